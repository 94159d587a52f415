#include "server/cert_reloader.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "util/io/file.h"
#include "util/io/log.h"
#include "util/io/mutex.h"
#include "util/time_format.h"

namespace aw::server {
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
                  .Add({})),
      poller_([this] { return TimerPoll(); }) {}

CertReloader::~CertReloader() { Stop(); }

StatusOr<CertReloader::Contents> CertReloader::ReadFiles() const {
  StatusOr<std::string> cert = util::ReadFile(cert_path_);
  if (!cert) return cert.status();
  StatusOr<std::string> key = util::ReadFile(key_path_);
  if (!key) return key.status();
  return Contents{std::move(cert).value(), std::move(key).value()};
}

void CertReloader::Install(std::shared_ptr<const KeyPair> pair, Contents contents) {
  expiry_.Set(static_cast<double>(
      std::chrono::duration_cast<std::chrono::seconds>(pair->not_after().time_since_epoch())
          .count()));
  log::info(
      "serving certificate loaded",
      {{"subject", pair->subject()},
       {"sha256", pair->fingerprint_sha256()},
       {"not_after", util::FormatRfc3339(pair->not_after(), util::Rfc3339Precision::kSeconds)},
       {"cert_file", cert_path_}});
  if (pair->not_after() < std::chrono::system_clock::now()) {
    log::warn("serving certificate has expired", {{"subject", pair->subject()}});
  }
  {
    MutexLock lock(current_mu_);
    current_ = std::move(pair);
  }
  loaded_ = std::move(contents);
  last_rejected_.reset();
  last_read_error_.reset();
}

Status CertReloader::LoadInitial() {
  StatusOr<Contents> contents = ReadFiles();
  if (!contents) return contents.status();
  KeyPairResult result = ParseKeyPair(contents->cert, contents->key, cert_path_, key_path_);
  if (!result) return result.status();
  Install(std::move(result).value(), std::move(contents).value());
  return Status::Ok();
}

bool CertReloader::PollOnce() {
  Step step = PollStep(false);
  if (step == Step::kLookAgain) {
    std::this_thread::sleep_for(kLookAgainAfter);
    step = PollStep(true);
  }
  return step == Step::kInstalled;
}

CertReloader::Step CertReloader::PollStep(bool looked_again) {
  StatusOr<Contents> contents = ReadFiles();
  if (contents && *contents == loaded_) return Step::kUnchanged;
  if (contents && last_rejected_ && *contents == *last_rejected_) return Step::kUnchanged;
  if (!contents && last_read_error_ && contents.status().message() == *last_read_error_) {
    return Step::kUnchanged;
  }
  KeyPairResult result = contents
                             ? ParseKeyPair(contents->cert, contents->key, cert_path_, key_path_)
                             : KeyPairResult(contents.status());
  if (!result) {
    // A writer that replaces the two files one after the other is briefly inconsistent: look
    // again shortly before calling the change bad. (Secret volumes swap both at once.)
    if (!looked_again) return Step::kLookAgain;
    if (contents) {
      last_rejected_ = *contents;
      last_read_error_.reset();
    } else {
      last_read_error_ = contents.status().message();
    }
    failures_.Increment();
    log::error(
        "serving certificate reload rejected; keeping the previous certificate",
        {{"error", result.status().message()}, {"cert_file", cert_path_}, {"key_file", key_path_}});
    return Step::kUnchanged;
  }
  Install(std::move(result).value(), std::move(contents).value());
  reloads_.Increment();
  return Step::kInstalled;
}

std::chrono::milliseconds CertReloader::TimerPoll() {
  try {
    Step step = PollStep(look_again_pending_);
    look_again_pending_ = step == Step::kLookAgain;
    if (look_again_pending_) return kLookAgainAfter;
  } catch (const std::exception& e) {
    look_again_pending_ = false;
    failures_.Increment();
    log::error("serving certificate reload failed", {{"error", e.what()}});
  }
  return interval_;
}

Status CertReloader::Start(boost::asio::any_io_executor executor) {
  poller_.Start(std::move(executor), interval_);
  return Status::Ok();
}

void CertReloader::Stop() { poller_.Stop(); }

std::shared_ptr<const KeyPair> CertReloader::Current() const {
  MutexLock lock(current_mu_);
  return current_;
}

}  // namespace aw::server
