#include "kube/config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>

#include "util/base64.h"
#include "util/io/file.h"
#include "util/url.h"

namespace aw::kube {
namespace {

std::string Trim(std::string s) {
  while (!s.empty() &&
         (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  return s.substr(i);
}

std::string Resolve(const std::string& base_dir, const std::string& p) {
  if (p.empty() || p[0] == '/' || base_dir.empty()) return p;
  return base_dir + "/" + p;
}

std::string ScalarOr(const YAML::Node& n, const char* key) {
  const YAML::Node v = n[key];
  if (!v || !v.IsScalar()) return {};
  return v.as<std::string>();
}

// Finds the entry named `name` in a list of {name:, <field>: {...}} maps.
std::optional<YAML::Node> FindNamed(const YAML::Node& list, const std::string& name,
                                    const char* field) {
  if (!list || !list.IsSequence()) return std::nullopt;
  for (const auto& item : list) {
    if (!item.IsMap()) continue;
    if (ScalarOr(item, "name") == name) {
      YAML::Node inner = item[field];
      if (inner && inner.IsMap()) return inner;
      return YAML::Node(YAML::NodeType::Map);
    }
  }
  return std::nullopt;
}

// Loads a PEM blob from "<field>-data" (base64) or "<field>" (file).
Status LoadBlob(const YAML::Node& n, const std::string& field, const std::string& base_dir,
                const std::string& where, std::string* out) {
  std::string data = ScalarOr(n, (field + "-data").c_str());
  if (!data.empty()) {
    auto dec = util::Base64DecodeText(data);
    if (!dec)
      return Status::InvalidArgument(fmt::format("{}: {}-data is not valid base64", where, field));
    *out = std::move(*dec);
    return Status::Ok();
  }
  std::string file = ScalarOr(n, field.c_str());
  if (!file.empty()) {
    StatusOr<std::string> content = util::ReadFile(Resolve(base_dir, file));
    if (!content) return content.status().Annotate(fmt::format("{}: {}", where, field));
    *out = std::move(*content);
  }
  return Status::Ok();
}

Status Fail(std::string msg) { return Status::InvalidArgument(std::move(msg)); }

}  // namespace

Status ParseServerUrl(std::string_view url, ClientConfig* out) {
  if (!url.starts_with("https://")) {
    return Status::InvalidArgument(
        fmt::format("server URL {:?} must start with https://", std::string(url)));
  }
  StatusOr<util::HttpUrl> parsed = util::ParseHttpUrl(url);
  if (!parsed.ok()) {
    return Status::InvalidArgument(
        fmt::format("server URL {:?}: {}", std::string(url), parsed.status().message()));
  }
  out->host = std::move(parsed->host);
  out->port = parsed->port;
  out->base_path = std::move(parsed->base_path);
  return Status::Ok();
}

bool InClusterAvailable() {
  const char* h = std::getenv("KUBERNETES_SERVICE_HOST");
  return h != nullptr && *h != '\0';
}

StatusOr<ClientConfig> LoadInCluster(const InClusterPaths& paths) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host) return Fail("in-cluster config: KUBERNETES_SERVICE_HOST is not set");
  std::string h = host;
  std::string url = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" +
                    std::string(port && *port ? port : "443");
  ClientConfig c;
  if (Status st = ParseServerUrl(url, &c); !st.ok()) return st.Annotate("in-cluster config");
  StatusOr<std::string> ca = util::ReadFile(paths.dir + "/ca.crt");
  if (!ca) return ca.status().Annotate("in-cluster config");
  c.ca_pem = std::move(*ca);
  c.token_file = paths.dir + "/token";
  if (StatusOr<std::string> t = util::ReadFile(c.token_file); !t) {
    return t.status().Annotate("in-cluster config");
  }
  if (StatusOr<std::string> ns = util::ReadFile(paths.dir + "/namespace")) c.namespace_ = Trim(*ns);
  c.source = "in-cluster";
  return c;
}

StatusOr<ClientConfig> ParseKubeconfig(std::string_view yaml, const std::string& base_dir,
                                       const std::string& origin, std::string_view context_arg,
                                       bool allow_insecure) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const std::exception& e) {
    return Fail(fmt::format("kubeconfig {}: not valid YAML: {}", origin, e.what()));
  }
  if (!root || !root.IsMap()) return Fail(fmt::format("kubeconfig {}: not a YAML mapping", origin));
  try {
    std::string ctx_name =
        context_arg.empty() ? ScalarOr(root, "current-context") : std::string(context_arg);
    if (ctx_name.empty()) {
      return Fail(
          fmt::format("kubeconfig {}: no current-context set and no --context given", origin));
    }
    auto ctx_found = FindNamed(root["contexts"], ctx_name, "context");
    if (!ctx_found)
      return Fail(fmt::format("kubeconfig {}: context {:?} not found", origin, ctx_name));
    YAML::Node ctx = *ctx_found;
    std::string where = fmt::format("kubeconfig {} context {:?}", origin, ctx_name);
    std::string cluster_name = ScalarOr(ctx, "cluster");
    if (cluster_name.empty()) return Fail(where + ": context has no cluster");
    auto cluster_found = FindNamed(root["clusters"], cluster_name, "cluster");
    if (!cluster_found) return Fail(fmt::format("{}: cluster {:?} not found", where, cluster_name));
    YAML::Node cluster = *cluster_found;
    ClientConfig c;
    std::string server = ScalarOr(cluster, "server");
    if (server.empty())
      return Fail(fmt::format("{}: cluster {:?} has no server", where, cluster_name));
    if (Status st = ParseServerUrl(server, &c); !st.ok()) return st.Annotate(where);
    std::string insecure = ScalarOr(cluster, "insecure-skip-tls-verify");
    if (insecure == "true") {
      if (!allow_insecure) {
        return Fail(where +
                    ": cluster sets insecure-skip-tls-verify; refusing (pass "
                    "--allow-insecure-kubeconfig to accept an unverified API server)");
      }
      c.insecure_skip_tls_verify = true;
    }
    if (Status st = LoadBlob(cluster, "certificate-authority", base_dir, where, &c.ca_pem);
        !st.ok())
      return st;
    std::string user_name = ScalarOr(ctx, "user");
    if (!user_name.empty()) {
      auto user_found = FindNamed(root["users"], user_name, "user");
      if (!user_found) return Fail(fmt::format("{}: user {:?} not found", where, user_name));
      YAML::Node user = *user_found;
      if (Status st = LoadBlob(user, "client-certificate", base_dir, where, &c.client_cert_pem);
          !st.ok())
        return st;
      if (Status st = LoadBlob(user, "client-key", base_dir, where, &c.client_key_pem); !st.ok())
        return st;
      if (c.client_cert_pem.empty() != c.client_key_pem.empty()) {
        return Fail(
            where +
            ": user has a client certificate without a key (or a key without a certificate)");
      }
      c.token = ScalarOr(user, "token");
      std::string tf = ScalarOr(user, "tokenFile");
      if (!tf.empty()) {
        c.token_file = Resolve(base_dir, tf);
        if (StatusOr<std::string> t = util::ReadFile(c.token_file); !t) {
          return t.status().Annotate(where + ": tokenFile");
        }
      }
      if (user["exec"] && c.token.empty() && c.token_file.empty() && c.client_cert_pem.empty()) {
        return Fail(where +
                    ": exec credential plugins are not supported; use a token, tokenFile or client "
                    "certificate");
      }
      if (user["auth-provider"] && c.token.empty() && c.token_file.empty() &&
          c.client_cert_pem.empty()) {
        return Fail(where +
                    ": auth-provider plugins are not supported; use a token, tokenFile or client "
                    "certificate");
      }
    }
    c.namespace_ = ScalarOr(ctx, "namespace");
    c.source = fmt::format("kubeconfig {} context {}", origin, ctx_name);
    return c;
  } catch (const std::exception& e) {
    return Fail(fmt::format("kubeconfig {}: malformed: {}", origin, e.what()));
  }
}

StatusOr<ClientConfig> LoadKubeconfig(const std::string& path, std::string_view context,
                                      bool allow_insecure) {
  StatusOr<std::string> text = util::ReadFile(path);
  if (!text) return text.status().Annotate("kubeconfig");
  std::string dir;
  if (auto pos = path.rfind('/'); pos != std::string::npos)
    dir = path.substr(0, pos == 0 ? 1 : pos);
  return ParseKubeconfig(*text, dir, path, context, allow_insecure);
}

}  // namespace aw::kube
