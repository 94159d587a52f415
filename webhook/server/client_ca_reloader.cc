#include "server/client_ca_reloader.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "util/io/log.h"
#include "util/io/mutex.h"

namespace aw::server {
namespace {

std::optional<std::string> ReadFile(const std::string& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = fmt::format("cannot open {}", path);
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    *error = fmt::format("cannot read {}", path);
    return std::nullopt;
  }
  return ss.str();
}

bool IsDirectory(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

// A directory: every regular file (symlinks followed) named *.crt or *.pem, not hidden (a
// Kubernetes Secret volume's ..data and timestamped directories are), in name order. The result
// is the files' names and contents, so that any change to the set is seen.
std::optional<std::string> ReadDirectory(const std::string& dir, std::string* error,
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
  if (ec) {
    *error = fmt::format("cannot list {}: {}", dir, ec.message());
    return std::nullopt;
  }
  std::sort(names.begin(), names.end());
  std::string all;
  files->clear();
  for (const auto& name : names) {
    auto text = ReadFile(dir + "/" + name, error);
    if (!text) return std::nullopt;
    all += name;
    all += '\0';
    all += *text;
    all += '\0';
    files->emplace_back(dir + "/" + name, std::move(*text));
  }
  return all;
}

}  // namespace

std::optional<std::string> ClientCaReloader::Read(std::string* error) {
  if (!IsDirectory(path_)) {
    auto text = ReadFile(path_, error);
    files_.clear();
    if (text) files_.emplace_back(path_, *text);
    return text;
  }
  return ReadDirectory(path_, error, &files_);
}

CaBundleResult ClientCaReloader::Parse() {
  if (files_.empty()) {
    return fmt::format(
        "{}: no *.crt or *.pem file (a client CA directory, e.g. Agones' "
        "allocator-client-ca Secret)",
        path_);
  }
  if (files_.size() == 1 && files_.front().first == path_) {
    return ParseCaBundle(files_.front().second, path_);
  }
  // A directory: as agones-allocator reads its client CA Secret, a file that holds no usable
  // certificate is skipped with a warning; the others are trusted.
  std::string pem;
  std::string skipped;
  for (const auto& [name, text] : files_) {
    auto one = ParseCaBundle(text, name);
    if (auto* msg = std::get_if<std::string>(&one)) {
      skipped += (skipped.empty() ? "" : "; ") + *msg;
      continue;
    }
    pem += text;
    pem += '\n';
  }
  if (!skipped.empty()) {
    log::warn("client CA files skipped (no usable PEM certificate)",
              {{"directory", path_}, {"error", skipped}});
  }
  if (pem.empty()) return fmt::format("{}: no usable certificate ({})", path_, skipped);
  return ParseCaBundle(pem, path_);
}

ClientCaReloader::ClientCaReloader(std::string path, prometheus::Registry& registry,
                                   std::chrono::milliseconds interval)
    : path_(std::move(path)),
      interval_(interval),
      reloads_(prometheus::BuildCounter()
                   .Name("allocating_webhook_client_ca_reloads_total")
                   .Help("Client CA bundles installed after a change on disk")
                   .Register(registry)
                   .Add({})),
      failures_(prometheus::BuildCounter()
                    .Name("allocating_webhook_client_ca_reload_failures_total")
                    .Help("Changed client CA files rejected (unreadable or not PEM "
                          "certificates); the previous bundle keeps verifying")
                    .Register(registry)
                    .Add({})),
      poller_([this] {
        try {
          PollOnce();
        } catch (const std::exception& e) {
          failures_.Increment();
          log::error("client CA reload failed", {{"error", e.what()}});
        }
        return interval_;
      }) {}

ClientCaReloader::~ClientCaReloader() { Stop(); }

Status ClientCaReloader::LoadInitial() {
  std::string error;
  auto text = Read(&error);
  if (!text) return Status::IOError(error);
  auto parsed = Parse();
  if (auto* msg = std::get_if<std::string>(&parsed)) return Status::InvalidArgument(*msg);
  auto bundle = std::get<std::shared_ptr<const CaBundle>>(parsed);
  log::info("client CA bundle loaded",
            {{"file", path_}, {"certificates", std::to_string(bundle->size())}});
  {
    MutexLock lock(current_mu_);
    current_ = std::move(bundle);
  }
  loaded_ = std::move(*text);
  return Status::Ok();
}

std::shared_ptr<const CaBundle> ClientCaReloader::CurrentCa() const {
  MutexLock lock(current_mu_);
  return current_;
}

bool ClientCaReloader::PollOnce() {
  std::string error;
  auto text = Read(&error);
  if (!text) {
    if (rejected_ != error) {
      rejected_ = error;
      failures_.Increment();
      log::warn("client CA file unreadable; keeping the loaded bundle", {{"error", error}});
    }
    return false;
  }
  if (*text == loaded_ || rejected_ == *text) return false;
  auto parsed = Parse();
  if (auto* msg = std::get_if<std::string>(&parsed)) {
    rejected_ = *text;
    failures_.Increment();
    log::warn("client CA file rejected; keeping the loaded bundle", {{"error", *msg}});
    return false;
  }
  auto bundle = std::get<std::shared_ptr<const CaBundle>>(parsed);
  log::info("client CA bundle reloaded",
            {{"file", path_}, {"certificates", std::to_string(bundle->size())}});
  {
    MutexLock lock(current_mu_);
    current_ = std::move(bundle);
  }
  loaded_ = std::move(*text);
  rejected_.reset();
  reloads_.Increment();
  return true;
}

void ClientCaReloader::Start(boost::asio::any_io_executor executor) {
  poller_.Start(std::move(executor), interval_);
}

void ClientCaReloader::Stop() { poller_.Stop(); }

}  // namespace aw::server
