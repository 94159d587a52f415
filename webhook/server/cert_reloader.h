// CertReloader: the serving key pair, loaded from two PEM files and reloaded when they change.
//
// Promise: Current() always returns the last valid pair (never a mismatched or half-written
// one) and is cheap and thread-safe (an atomic shared_ptr load per TLS handshake). Once Start(ex)
// is called it re-reads both files every `interval` through their paths (so a Kubernetes Secret
// volume's `..data` symlink swap is seen), as a steady_timer on the executor it is given (an
// existing io_context: the binaries give it the health server's io thread; the poller holds no
// thread of its own and never sleeps there), and installs a new pair only when the contents changed
// and the new key matches the new certificate. A changed pair that does not parse is looked at
// again 200 ms later (a writer replacing the files one by one) before it is called bad. A pair
// that stays bad is logged and counted once per distinct content, and the old pair keeps serving.
// Stop() ends the polling (waiting for a poll in progress). Metrics (on the shared registry):
//   allocating_webhook_certificate_reloads_total
//   allocating_webhook_certificate_reload_failures_total
//   allocating_webhook_certificate_expiry_timestamp_seconds  (notAfter of the serving leaf)
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "server/poll_timer.h"
#include "server/tls_context.h"
#include "util/io/mutex.h"
#include "util/status.h"

namespace aw::server {

class CertReloader final : public KeyPairSource {
 public:
  CertReloader(std::string cert_path, std::string key_path, prometheus::Registry& registry,
               std::chrono::milliseconds interval = std::chrono::seconds(1));
  ~CertReloader() override;
  CertReloader(const CertReloader&) = delete;
  CertReloader& operator=(const CertReloader&) = delete;

  // Loads the pair once; an error naming the file when the files are missing or do not form a
  // pair.
  Status LoadInitial();
  // Polls every `interval` on `executor` until Stop(); OK at once (a manager Service: the pair
  // loaded by LoadInitial is ready). Idempotent while started.
  Status Start(boost::asio::any_io_executor executor);
  void Stop();  // idempotent; also run by the destructor

  std::shared_ptr<const KeyPair> Current() const override;
  bool Loaded() const { return Current() != nullptr; }

  // One poll: re-reads the files and installs a changed valid pair (looking again after 200 ms,
  // sleeping on the calling thread, when a changed pair does not parse). Returns true when a new
  // pair was installed. Public for tests; the timer polls without sleeping.
  bool PollOnce();

 private:
  struct Contents {
    std::string cert, key;
    bool operator==(const Contents&) const = default;
  };
  enum class Step { kUnchanged, kInstalled, kLookAgain };
  static constexpr std::chrono::milliseconds kLookAgainAfter{200};
  // One look; kLookAgain (nothing recorded) when a changed pair does not parse and !looked_again.
  Step PollStep(bool looked_again);
  std::chrono::milliseconds TimerPoll();  // the timer's poll: returns the delay to the next
  StatusOr<Contents> ReadFiles() const;
  void Install(std::shared_ptr<const KeyPair> pair, Contents contents);

  const std::string cert_path_, key_path_;
  const std::chrono::milliseconds interval_;
  prometheus::Counter& reloads_;
  prometheus::Counter& failures_;
  prometheus::Gauge& expiry_;

  // The installed one, read by every handshake. A Mutex, not std::atomic<std::shared_ptr>:
  // libstdc++ 12's load() releases its internal lock with memory_order_relaxed, so a load and the
  // next store of the pointer are not ordered (ThreadSanitizer reports it, rightly).
  mutable Mutex current_mu_;
  std::shared_ptr<const KeyPair> current_ GUARDED_BY(current_mu_);
  Contents loaded_;                             // contents of the installed pair (the poller only)
  std::optional<Contents> last_rejected_;       // so a bad pair is counted once
  std::optional<std::string> last_read_error_;  // so a missing file is counted once
  bool look_again_pending_ = false;             // the timer's next poll is the second look
  PollTimer poller_;  // last: stopped (by the destructor) before the state it polls goes
};

}  // namespace aw::server
