// CertReloader: the serving key pair, loaded from two PEM files and reloaded when they change.
//
// Promise: Current() always returns the last valid pair (never a mismatched or half-written
// one) and is cheap and thread-safe (an atomic shared_ptr load per TLS handshake). Run() (a
// runtime::Runnable body) re-reads both files every `interval` through their paths (so a Kubernetes
// Secret volume's `..data` symlink swap is seen) and installs a new pair only when the contents
// changed and the new key matches the new certificate. A pair that stays bad is logged and counted
// once per distinct content, and the old pair keeps serving. Metrics (on the shared registry):
//   allocating_webhook_certificate_reloads_total
//   allocating_webhook_certificate_reload_failures_total
//   allocating_webhook_certificate_expiry_timestamp_seconds  (notAfter of the serving leaf)
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "runtime/manager.h"
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
  // Polls (PollOnce every `interval`) on the calling thread until ctx.stop(); Ready at once.
  // Returns OK.
  Status Run(runtime::RunContext& ctx);

  std::shared_ptr<const KeyPair> Current() const override;
  bool Loaded() const { return Current() != nullptr; }

  // One poll: re-reads the files and installs a changed valid pair. Returns true when a new pair
  // was installed. Public for tests; normally called by Run().
  bool PollOnce();

 private:
  struct Contents {
    std::string cert, key;
    bool operator==(const Contents&) const = default;
  };
  StatusOr<Contents> ReadFiles() const;
  void Install(std::shared_ptr<const KeyPair> pair, Contents contents);

  const std::string cert_path_, key_path_;
  const std::chrono::milliseconds interval_;
  prometheus::Counter& reloads_;
  prometheus::Counter& failures_;
  prometheus::Gauge& expiry_;

  std::atomic<std::shared_ptr<const KeyPair>> current_;
  Contents loaded_;                             // contents of the installed pair (poll thread only)
  std::optional<Contents> last_rejected_;       // so a bad pair is counted once
  std::optional<std::string> last_read_error_;  // so a missing file is counted once
};

}  // namespace aw::server
