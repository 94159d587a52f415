#include "server/client_ca_reloader.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "util/log.h"

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

}  // namespace

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
                    .Add({})) {}

ClientCaReloader::~ClientCaReloader() { Stop(); }

Status ClientCaReloader::LoadInitial() {
  std::string error;
  auto text = ReadFile(path_, &error);
  if (!text) return Status::IOError(error);
  auto parsed = ParseCaBundle(*text, path_);
  if (auto* msg = std::get_if<std::string>(&parsed)) return Status::InvalidArgument(*msg);
  auto bundle = std::get<std::shared_ptr<const CaBundle>>(parsed);
  log::info("client CA bundle loaded",
            {{"file", path_}, {"certificates", std::to_string(bundle->size())}});
  current_.store(std::move(bundle));
  loaded_ = std::move(*text);
  return Status::Ok();
}

std::shared_ptr<const CaBundle> ClientCaReloader::CurrentCa() const {
  return current_.load(std::memory_order_acquire);
}

bool ClientCaReloader::PollOnce() {
  std::string error;
  auto text = ReadFile(path_, &error);
  if (!text) {
    if (rejected_ != error) {
      rejected_ = error;
      failures_.Increment();
      log::warn("client CA file unreadable; keeping the loaded bundle", {{"error", error}});
    }
    return false;
  }
  if (*text == loaded_ || rejected_ == *text) return false;
  auto parsed = ParseCaBundle(*text, path_);
  if (auto* msg = std::get_if<std::string>(&parsed)) {
    rejected_ = *text;
    failures_.Increment();
    log::warn("client CA file rejected; keeping the loaded bundle", {{"error", *msg}});
    return false;
  }
  auto bundle = std::get<std::shared_ptr<const CaBundle>>(parsed);
  log::info("client CA bundle reloaded",
            {{"file", path_}, {"certificates", std::to_string(bundle->size())}});
  current_.store(std::move(bundle), std::memory_order_release);
  loaded_ = std::move(*text);
  rejected_.reset();
  reloads_.Increment();
  return true;
}

void ClientCaReloader::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      if (cv_.wait_for(lock, interval_, [this] { return stopping_; })) break;
      lock.unlock();
      PollOnce();
      lock.lock();
    }
  });
}

void ClientCaReloader::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace aw::server
