// Unit tests of the Kubernetes client's pure parts: kubeconfig parsing, server URLs, Status
// errors, watch stream framing and backoff bounds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kube/backoff.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/core/status.h"
#include "kube/core/watch_stream.h"

namespace aw::kube {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kube_test_XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& content) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p) << content;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// base64("CA-PEM") etc.: the parser only decodes; TLS validity is checked by the transport.
constexpr const char* kGood = R"(apiVersion: v1
kind: Config
current-context: main
clusters:
- name: c1
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: Q0EtUEVN
- name: c2
  cluster:
    server: https://[::1]:8443/prefix/
    certificate-authority: ca.crt
contexts:
- name: main
  context: {cluster: c1, user: u1, namespace: games}
- name: other
  context: {cluster: c2, user: u2}
users:
- name: u1
  user:
    token: abc123
- name: u2
  user:
    client-certificate: client.crt
    client-key-data: S0VZ
    tokenFile: tok
)";

TEST(KubeconfigTest, CurrentContextWithTokenAndInlineCA) {
  TempDir d;
  auto r = ParseKubeconfig(kGood, d.path(), "test", "", false);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->host, "127.0.0.1");
  EXPECT_EQ(r->port, 6443);
  EXPECT_EQ(r->base_path, "");
  EXPECT_EQ(r->ca_pem, "CA-PEM");
  EXPECT_EQ(r->token, "abc123");
  EXPECT_EQ(r->namespace_, "games");
  EXPECT_FALSE(r->insecure_skip_tls_verify);
}

TEST(KubeconfigTest, NamedContextWithFilesRelativeToKubeconfig) {
  TempDir d;
  d.Write("ca.crt", "FILE-CA");
  d.Write("client.crt", "FILE-CERT");
  d.Write("tok", "tok-1\n");
  std::string path = d.Write("config", kGood);
  auto r = LoadKubeconfig(path, "other", false);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->host, "::1");
  EXPECT_EQ(r->port, 8443);
  EXPECT_EQ(r->base_path, "/prefix");
  EXPECT_EQ(r->ca_pem, "FILE-CA");
  EXPECT_EQ(r->client_cert_pem, "FILE-CERT");
  EXPECT_EQ(r->client_key_pem, "KEY");
  EXPECT_EQ(r->token_file, d.path() + "/tok");
}

struct BadCase {
  const char* name;
  std::string yaml;
  const char* context;
  const char* want;  // substring of the error
};

TEST(KubeconfigTest, BadFilesGetClearErrors) {
  TempDir d;
  std::string base = kGood;
  std::vector<BadCase> cases = {
      {"not yaml", "a: [b", "", "not valid YAML"},
      {"scalar", "hello", "", "not a YAML mapping"},
      {"no current context", "clusters: []\n", "", "no current-context"},
      {"unknown context", base, "nope", "context \"nope\" not found"},
      {"missing cluster",
       "current-context: x\ncontexts:\n- name: x\n  context: {cluster: zz, user: u}\n", "",
       "cluster \"zz\" not found"},
      {"http server",
       "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n  "
       "cluster: {server: "
       "'http://127.0.0.1:80'}\n",
       "", "must start with https://"},
      {"bad port",
       "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n  "
       "cluster: {server: "
       "'https://h:99999'}\n",
       "", "bad port"},
      {"insecure refused",
       "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n  "
       "cluster: {server: "
       "'https://h', insecure-skip-tls-verify: true}\n",
       "", "--allow-insecure-kubeconfig"},
      {"bad base64",
       "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n  "
       "cluster: {server: "
       "'https://h', certificate-authority-data: '!!!'}\n",
       "", "not valid base64"},
      {"missing ca file",
       "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n  "
       "cluster: {server: "
       "'https://h', certificate-authority: nope.crt}\n",
       "", "cannot read"},
      {"cert without key",
       "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n- "
       "name: c\n  cluster: "
       "{server: 'https://h'}\nusers:\n- name: u\n  user: {client-certificate-data: Q0VSVA==}\n",
       "", "without a key"},
      {"exec plugin",
       "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n- "
       "name: c\n  cluster: "
       "{server: 'https://h'}\nusers:\n- name: u\n  user: {exec: {command: aws}}\n",
       "", "exec credential plugins are not supported"},
      {"contexts not a list", "current-context: x\ncontexts: 5\n", "", "context \"x\" not found"},
  };
  for (const auto& c : cases) {
    auto r = ParseKubeconfig(c.yaml, d.path(), "cfg", c.context, false);
    EXPECT_FALSE(r.ok()) << c.name;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos)
        << c.name << ": " << r.status().message();
    EXPECT_NE(r.status().message().find("cfg"), std::string::npos)
        << c.name << " names the file: " << r.status().message();
  }
  auto missing = LoadKubeconfig(d.path() + "/absent", "", false);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot read"), std::string::npos);
}

TEST(KubeconfigTest, InsecureAllowedOnlyWithFlag) {
  std::string y =
      "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n  "
      "cluster: {server: "
      "'https://h', insecure-skip-tls-verify: true}\n";
  auto r = ParseKubeconfig(y, "", "cfg", "", true);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->insecure_skip_tls_verify);
  EXPECT_EQ(r->port, 443);
}

TEST(InClusterTest, ReadsServiceAccountFiles) {
  TempDir d;
  d.Write("ca.crt", "CA");
  d.Write("token", "t");
  d.Write("namespace", "allocating-system\n");
  setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
  auto r = LoadInCluster({d.path()});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->host, "10.0.0.1");
  EXPECT_EQ(r->port, 6443);
  EXPECT_EQ(r->ca_pem, "CA");
  EXPECT_EQ(r->token_file, d.path() + "/token");
  EXPECT_EQ(r->namespace_, "allocating-system");
  fs::remove(d.path() + "/ca.crt");
  auto bad = LoadInCluster({d.path()});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ca.crt"), std::string::npos);
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  EXPECT_FALSE(LoadInCluster({d.path()}).ok());
}

TEST(StatusTest, ApiErrorsMapToTheProjectStatus) {
  using Code = aw::Status::Code;
  auto code = [](const ApiError& e) { return e.ToStatus().code(); };
  EXPECT_EQ(code(ParseStatusError(404, "", "")), Code::kNotFound);
  EXPECT_EQ(code(ParseStatusError(409, R"({"kind":"Status","reason":"Conflict","code":409})", "")),
            Code::kConflict);
  EXPECT_EQ(
      code(ParseStatusError(409, R"({"kind":"Status","reason":"AlreadyExists","code":409})", "")),
      Code::kInvalidArgument);
  EXPECT_EQ(code(ParseStatusError(422, "", "")), Code::kInvalidArgument);
  EXPECT_EQ(code(ParseStatusError(403, "", "")), Code::kInvalidArgument);
  EXPECT_EQ(code(ParseStatusError(429, "", "")), Code::kUnavailable);
  EXPECT_EQ(code(ParseStatusError(503, "", "")), Code::kUnavailable);
  EXPECT_EQ(code(TransportError("connection refused")), Code::kUnavailable);
  EXPECT_EQ(code(TransportError("client stopped", /*cancelled=*/true)), Code::kCancelled);
  ApiError e = ParseStatusError(
      404, R"({"kind":"Status","reason":"NotFound","message":"gone","code":404})", "");
  EXPECT_EQ(e.ToStatus().message(), e.ToString());
  Result<int> ok(7);
  EXPECT_TRUE(ok.status().ok());
  Result<int> bad(e);
  EXPECT_EQ(bad.status().code(), Code::kNotFound);
}

TEST(StatusTest, ParsesStatusBodies) {
  auto e = ParseStatusError(
      409,
      R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"the object has been modified","reason":"Conflict","code":409})",
      "");
  EXPECT_TRUE(e.IsConflict());
  EXPECT_FALSE(e.IsAlreadyExists());
  EXPECT_FALSE(e.IsRetryable());
  EXPECT_EQ(e.message, "the object has been modified");
  auto exists =
      ParseStatusError(409, R"({"kind":"Status","reason":"AlreadyExists","code":409})", "");
  EXPECT_TRUE(exists.IsAlreadyExists());
  EXPECT_FALSE(exists.IsConflict());
  auto tmr = ParseStatusError(
      429,
      R"({"kind":"Status","reason":"TooManyRequests","code":429,"details":{"retryAfterSeconds":3}})",
      "");
  EXPECT_TRUE(tmr.IsTooManyRequests());
  EXPECT_TRUE(tmr.IsRetryable());
  EXPECT_EQ(tmr.retry_after.count(), 3);
  auto hdr = ParseStatusError(503, "<html>unavailable</html>", " 7 ");
  EXPECT_TRUE(hdr.IsRetryable());
  EXPECT_EQ(hdr.retry_after.count(), 7);
  EXPECT_EQ(hdr.message, "<html>unavailable</html>");
  auto gone = ParseStatusError(
      410,
      R"({"kind":"Status","reason":"Expired","message":"too old resource version","code":410})",
      "");
  EXPECT_TRUE(gone.IsExpired());
  EXPECT_TRUE(ParseStatusError(403, "", "").IsForbidden());
  EXPECT_TRUE(ParseStatusError(404, "{", "").IsNotFound());
  EXPECT_TRUE(TransportError("connect").IsRetryable());
  EXPECT_FALSE(TransportError("stop", true).IsRetryable());
  EXPECT_NE(tmr.ToString().find("retry after 3s"), std::string::npos);
}

TEST(StatusTest, RetryAfterHeader) {
  EXPECT_EQ(ParseRetryAfter("").count(), 0);
  EXPECT_EQ(ParseRetryAfter("12").count(), 12);
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT").count(), 0);
  EXPECT_EQ(ParseRetryAfter("-1").count(), 0);
  EXPECT_EQ(ParseRetryAfter("999999").count(), 3600);
}

std::vector<std::string> Frame(const std::vector<std::string>& chunks) {
  LineFramer f;
  std::vector<std::string> lines;
  for (const auto& c : chunks) f.Feed(c, [&](std::string_view l) { lines.emplace_back(l); });
  return lines;
}

TEST(WatchFramingTest, SplitAndMergedChunks) {
  std::string a = R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}})";
  std::string b = R"({"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"2"}}})";
  std::string all = a + "\n" + b + "\r\n\n";
  // Every split point of the concatenation gives the same two lines.
  for (size_t i = 0; i <= all.size(); ++i) {
    auto lines = Frame({all.substr(0, i), all.substr(i)});
    ASSERT_EQ(lines.size(), 2u) << i;
    EXPECT_EQ(lines[0], a);
    EXPECT_EQ(lines[1], b);
  }
  // One byte at a time.
  std::vector<std::string> bytes;
  for (char c : all) bytes.emplace_back(1, c);
  EXPECT_EQ(Frame(bytes).size(), 2u);
  // An incomplete last line is not emitted.
  EXPECT_EQ(Frame({a + "\n" + b.substr(0, 10)}).size(), 1u);
}

TEST(WatchFramingTest, LineLimit) {
  LineFramer f(16);
  int n = 0;
  EXPECT_TRUE(f.Feed("short\n", [&](std::string_view) { ++n; }));
  EXPECT_FALSE(f.Feed(std::string(40, 'x'), [&](std::string_view) { ++n; }));
  EXPECT_TRUE(f.failed());
  EXPECT_FALSE(f.Feed("\n", [&](std::string_view) { ++n; }));
  EXPECT_EQ(n, 1);
}

TEST(WatchEventTest, ParsesTypes) {
  auto ev = ParseWatchEvent(
      R"({"type":"BOOKMARK","object":{"kind":"GameServer","metadata":{"resourceVersion":"42"}}})");
  ASSERT_TRUE(ev) << ev.status().message();
  EXPECT_EQ(ev->type, WatchEvent::Type::kBookmark);
  EXPECT_EQ(MetaString(*ev->object, "resourceVersion"), "42");
  auto del =
      ParseWatchEvent(R"({"type":"DELETED","object":{"metadata":{"name":"x","namespace":"n"}}})");
  ASSERT_TRUE(del);
  EXPECT_EQ(del->type, WatchEvent::Type::kDeleted);
  EXPECT_EQ(MetaString(*del->object, "namespace"), "n");
}

TEST(WatchEventTest, ErrorEventCarries410) {
  auto ev = ParseWatchEvent(
      R"j({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}})j");
  ASSERT_TRUE(ev) << ev.status().message();
  EXPECT_EQ(ev->type, WatchEvent::Type::kError);
  EXPECT_TRUE(ev->error.IsExpired());
  EXPECT_EQ(ev->error.http_status, 410);
  EXPECT_EQ(ev->error.message, "too old resource version: 1 (5)");
  auto gone =
      ParseWatchEvent(R"({"type":"ERROR","object":{"kind":"Status","reason":"Gone","code":410}})");
  ASSERT_TRUE(gone);
  EXPECT_TRUE(gone->error.IsExpired());
}

TEST(WatchEventTest, MalformedLines) {
  for (const char* bad : {"", "{", "[]", R"({"type":"ADDED"})", R"({"object":{}})",
                          R"({"type":"WHAT","object":{}})", R"({"type":"ADDED","object":"x"})"}) {
    StatusOr<WatchEvent> ev = ParseWatchEvent(bad);
    EXPECT_FALSE(ev) << bad;
    EXPECT_FALSE(ev.status().message().empty()) << bad;
  }
}

TEST(BackoffTest, ExponentialCappedWithJitterBounds) {
  using std::chrono::milliseconds;
  Backoff no_jitter(milliseconds(100), milliseconds(1000), 0.0, [] { return 0.5; });
  std::vector<int64_t> got;
  for (int i = 0; i < 7; ++i) got.push_back(no_jitter.Next().count());
  EXPECT_EQ(got, (std::vector<int64_t>{100, 200, 400, 800, 1000, 1000, 1000}));
  no_jitter.Reset();
  EXPECT_EQ(no_jitter.Next().count(), 100);

  Backoff low(milliseconds(100), milliseconds(1000), 0.2, [] { return 0.0; });
  Backoff high(milliseconds(100), milliseconds(1000), 0.2, [] { return 0.999999; });
  for (int i = 0; i < 100; ++i) {
    auto l = low.Next().count();
    auto h = high.Next().count();
    EXPECT_GE(l, 80);
    EXPECT_LE(h, 1200);
    EXPECT_LE(l, h);
  }
  Backoff real(milliseconds(50), milliseconds(400));
  for (int i = 0; i < 1000; ++i) {
    auto v = real.Next().count();
    EXPECT_GE(v, 40);
    EXPECT_LE(v, 480);
  }
}

TEST(ClientPathsTest, ResourcePathsAndEscaping) {
  EXPECT_EQ(kGameServers.Path("default", "gs-1"),
            "/apis/agones.dev/v1/namespaces/default/gameservers/gs-1");
  EXPECT_EQ(kGameServers.Path(""), "/apis/agones.dev/v1/gameservers");
  EXPECT_EQ(kEvents.Path("ns"), "/api/v1/namespaces/ns/events");
  EXPECT_EQ(kCustomResourceDefinitions.Path("ignored", "gameservers.agones.dev"),
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gameservers.agones.dev");
  EXPECT_EQ(kLeases.Path("s", "l"), "/apis/coordination.k8s.io/v1/namespaces/s/leases/l");
  EXPECT_EQ(kGameServers.Path("d", "g", "status"),
            "/apis/agones.dev/v1/namespaces/d/gameservers/g/status");
  EXPECT_EQ(QueryEscape("allocating.agones.dev/enabled=true,a in (b)"),
            "allocating.agones.dev%2Fenabled%3Dtrue%2Ca%20in%20%28b%29");
}

}  // namespace
}  // namespace aw::kube
