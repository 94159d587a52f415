// CertReloader: the serving key pair, loaded from two PEM files and reloaded when they change.
//
// Promise: Current() always returns the last valid pair (never a mismatched or half-written
// one) and is cheap and thread-safe (a shared_ptr copy under a mutex per TLS handshake). Once
// Start(ex) is called it re-reads both files every `interval` through their paths (so a Kubernetes
// Secret volume's `..data` symlink swap is seen), as a steady_timer on the executor it is given (an
// existing io_context: the binaries give it the health server's io thread; the poller holds no
// thread of its own and never sleeps there), and installs a new pair only when the contents changed
// and the new key matches the new certificate. A changed pair that does not parse is looked at
// again 200 ms later (a writer replacing the files one by one) before it is called bad. A pair
// that stays bad is logged ("serving certificate reload rejected; keeping the previous one") and
// counted once per distinct content, and the old pair keeps serving (server/reloader.h).
// Stop() ends the polling (waiting for a poll in progress). Metrics (on the shared registry):
//   allocating_webhook_certificate_reloads_total
//   allocating_webhook_certificate_reload_failures_total
//   allocating_webhook_certificate_expiry_timestamp_seconds  (notAfter of the serving leaf)
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "server/reloader.h"
#include "server/tls_context.h"
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
  static constexpr std::chrono::milliseconds kLookAgainAfter{200};

  prometheus::Gauge& expiry_;
  Reloader<Contents, KeyPair> reloader_;  // last: stopped (by the destructor) first
};

}  // namespace aw::server
