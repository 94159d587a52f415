#include "server/client_ca_reloader.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "util/io/file.h"
#include "util/io/log.h"
#include "util/io/mutex.h"

namespace aw::server {
namespace {

bool IsDirectory(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

// A directory: every regular file (symlinks followed) named *.crt or *.pem, not hidden (a
// Kubernetes Secret volume's ..data and timestamped directories are), in name order, with their
// paths, so that any change to the set (a name or a content) is seen.
Status ReadDirectory(const std::string& dir,
                     std::vector<std::pair<std::string, std::string>>* files) {
  std::error_code ec;
  std::vector<std::string> names;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with(".")) continue;
    if (!name.ends_with(".crt") && !name.ends_with(".pem")) continue;
    std::error_code fec;
    if (!std::filesystem::is_regular_file(it->path(), fec)) continue;
    names.push_back(name);
  }
  if (ec) return Status::IOError(fmt::format("cannot list {}: {}", dir, ec.message()));
  std::sort(names.begin(), names.end());
  files->clear();
  for (const auto& name : names) {
    StatusOr<std::string> text = util::ReadFile(dir + "/" + name);
    if (!text) return text.status();
    files->emplace_back(dir + "/" + name, std::move(text).value());
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ClientCaReloader::Files> ClientCaReloader::Read(const std::string& path) {
  Files files;
  if (!IsDirectory(path)) {
    StatusOr<std::string> text = util::ReadFile(path);
    if (!text) return text.status();
    files.emplace_back(path, std::move(text).value());
    return files;
  }
  if (Status s = ReadDirectory(path, &files); !s.ok()) return s;
  return files;
}

CaBundleResult ClientCaReloader::Parse(const std::string& path, const Files& files) {
  if (files.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: no *.crt or *.pem file (a client CA directory, e.g. Agones' "
                    "allocator-client-ca Secret)",
                    path));
  }
  if (files.size() == 1 && files.front().first == path) {
    return ParseCaBundle(files.front().second, path);
  }
  // A directory: as agones-allocator reads its client CA Secret, a file that holds no usable
  // certificate is skipped with a warning; the others are trusted.
  std::string pem;
  std::string skipped;
  for (const auto& [name, text] : files) {
    CaBundleResult one = ParseCaBundle(text, name);
    if (!one) {
      skipped += (skipped.empty() ? "" : "; ") + one.status().message();
      continue;
    }
    pem += text;
    pem += '\n';
  }
  if (!skipped.empty()) {
    log::warn("client CA files skipped (no usable PEM certificate)",
              {{"directory", path}, {"error", skipped}});
  }
  if (pem.empty()) {
    return Status::InvalidArgument(fmt::format("{}: no usable certificate ({})", path, skipped));
  }
  return ParseCaBundle(pem, path);
}

ClientCaReloader::ClientCaReloader(std::string path, prometheus::Registry& registry,
                                   std::chrono::milliseconds interval)
    : reloader_({
          .what = "client CA bundle",
          .files = path,
          .read = [path] { return Read(path); },
          .parse = [path](const Files& files) { return Parse(path, files); },
          .on_install =
              [path](const CaBundle& bundle) {
                log::info("client CA bundle loaded",
                          {{"file", path}, {"certificates", std::to_string(bundle.size())}});
              },
          .interval = interval,
          .look_again_after = std::chrono::milliseconds(0),
          .reloads = &prometheus::BuildCounter()
                          .Name("allocating_webhook_client_ca_reloads_total")
                          .Help("Client CA bundles installed after a change on disk")
                          .Register(registry)
                          .Add({}),
          .failures = &prometheus::BuildCounter()
                           .Name("allocating_webhook_client_ca_reload_failures_total")
                           .Help("Changed client CA files rejected (unreadable or not PEM "
                                 "certificates); the previous bundle keeps verifying")
                           .Register(registry)
                           .Add({}),
      }) {}

ClientCaReloader::~ClientCaReloader() { Stop(); }

Status ClientCaReloader::LoadInitial() { return reloader_.LoadInitial(); }

std::shared_ptr<const CaBundle> ClientCaReloader::CurrentCa() const { return reloader_.Current(); }

bool ClientCaReloader::PollOnce() { return reloader_.PollOnce(); }

void ClientCaReloader::Start(boost::asio::any_io_executor executor) {
  reloader_.Start(std::move(executor));
}

void ClientCaReloader::Stop() { reloader_.Stop(); }

}  // namespace aw::server
