#include "server/cert_reloader.h"

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "util/log.h"

namespace aw::server {
namespace {

std::optional<std::string> ReadSmallFile(const std::string& path, std::string* error) {
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

CertReloader::CertReloader(std::string cert_path, std::string key_path,
                           prometheus::Registry& registry, std::chrono::milliseconds interval)
    : cert_path_(std::move(cert_path)),
      key_path_(std::move(key_path)),
      interval_(interval),
      reloads_(prometheus::BuildCounter()
                   .Name("allocating_webhook_certificate_reloads_total")
                   .Help("Serving certificate/key pairs installed after a change on disk")
                   .Register(registry)
                   .Add({})),
      failures_(prometheus::BuildCounter()
                    .Name("allocating_webhook_certificate_reload_failures_total")
                    .Help("Changed certificate/key files rejected (unreadable or not a matching "
                          "pair); the previous pair keeps serving")
                    .Register(registry)
                    .Add({})),
      expiry_(prometheus::BuildGauge()
                  .Name("allocating_webhook_certificate_expiry_timestamp_seconds")
                  .Help("notAfter of the serving certificate, as a Unix timestamp")
                  .Register(registry)
                  .Add({})) {}

CertReloader::~CertReloader() = default;

std::optional<CertReloader::Contents> CertReloader::ReadFiles(std::string* error) const {
  auto cert = ReadSmallFile(cert_path_, error);
  if (!cert) return std::nullopt;
  auto key = ReadSmallFile(key_path_, error);
  if (!key) return std::nullopt;
  return Contents{std::move(*cert), std::move(*key)};
}

void CertReloader::Install(std::shared_ptr<const KeyPair> pair, Contents contents) {
  expiry_.Set(static_cast<double>(
      std::chrono::duration_cast<std::chrono::seconds>(pair->not_after().time_since_epoch())
          .count()));
  log::info("serving certificate loaded",
            {{"subject", pair->subject()},
             {"sha256", pair->fingerprint_sha256()},
             {"not_after", fmt::format("{:%FT%TZ}", std::chrono::time_point_cast<std::chrono::seconds>(pair->not_after()))},
             {"cert_file", cert_path_}});
  if (pair->not_after() < std::chrono::system_clock::now()) {
    log::warn("serving certificate has expired", {{"subject", pair->subject()}});
  }
  current_.store(std::move(pair), std::memory_order_release);
  loaded_ = std::move(contents);
  last_rejected_.reset();
  last_read_error_.reset();
}

Status CertReloader::LoadInitial() {
  std::string error;
  auto contents = ReadFiles(&error);
  if (!contents) return Status::IOError(error);
  auto result = ParseKeyPair(contents->cert, contents->key, cert_path_, key_path_);
  if (auto* err = std::get_if<std::string>(&result)) return Status::InvalidArgument(*err);
  Install(std::get<std::shared_ptr<const KeyPair>>(std::move(result)), std::move(*contents));
  return Status::Ok();
}

bool CertReloader::PollOnce() {
  std::string error;
  auto contents = ReadFiles(&error);
  if (contents && *contents == loaded_) return false;
  if (contents && last_rejected_ && *contents == *last_rejected_) return false;
  if (!contents && last_read_error_ && error == *last_read_error_) return false;

  // A writer that replaces the two files one after the other is briefly inconsistent: look again
  // shortly before calling the change bad. (Secret volumes swap both at once.)
  auto parse = [&]() -> KeyPairResult {
    if (!contents) return error;
    return ParseKeyPair(contents->cert, contents->key, cert_path_, key_path_);
  };
  KeyPairResult result = parse();
  if (std::holds_alternative<std::string>(result)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    error.clear();
    contents = ReadFiles(&error);
    if (contents && *contents == loaded_) return false;
    result = parse();
  }
  if (auto* err = std::get_if<std::string>(&result)) {
    if (contents) {
      last_rejected_ = *contents;
      last_read_error_.reset();
    } else {
      last_read_error_ = error;
    }
    failures_.Increment();
    log::error("serving certificate reload rejected; keeping the previous certificate",
               {{"error", *err}, {"cert_file", cert_path_}, {"key_file", key_path_}});
    return false;
  }
  Install(std::get<std::shared_ptr<const KeyPair>>(std::move(result)), std::move(*contents));
  reloads_.Increment();
  return true;
}

Status CertReloader::Run(runtime::RunContext& ctx) {
  ctx.Ready();
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  const std::stop_token stop = ctx.stop();
  while (!cv.wait_for(lock, stop, interval_, [] { return false; }) && !stop.stop_requested()) {
    try {
      PollOnce();
    } catch (const std::exception& e) {
      failures_.Increment();
      log::error("serving certificate reload failed", {{"error", e.what()}});
    }
  }
  return Status::Ok();
}

std::shared_ptr<const KeyPair> CertReloader::Current() const {
  return current_.load(std::memory_order_acquire);
}

}  // namespace aw::server
