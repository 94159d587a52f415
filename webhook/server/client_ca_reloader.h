// ClientCaReloader: the CA bundle that client certificates are verified against (mutual TLS),
// loaded from one PEM file, or from a directory, and reloaded when it changes.
//
// A directory (as agones-allocator reads its `allocator-client-ca` Secret, mounted as one): every
// file in it named *.crt or *.pem (hidden entries, such as a Secret volume's `..data`, skipped;
// symlinks followed), each holding one or more PEM certificates. A file without a usable
// certificate is skipped with a warning, as agones-allocator does; a directory without any usable
// certificate is an error.
//
// Promise: CurrentCa() always returns the last valid bundle (never a half-written one) and is
// cheap and thread-safe. Once Start(ex) is called, a steady_timer on the executor it is given (an
// existing io_context: the gateway gives it the health server's io thread; no thread of its own)
// re-reads the file (or the directory's file names and contents) every `interval` through its path
// (a Kubernetes Secret volume's `..data` symlink swap is seen) and installs the new bundle when the
// contents changed and every block in a file is a PEM certificate. A bad or missing file is logged
// and counted once per distinct content, and the old bundle keeps verifying. Metrics:
//   allocating_webhook_client_ca_reloads_total
//   allocating_webhook_client_ca_reload_failures_total
#pragma once

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/poll_timer.h"
#include "server/tls_context.h"
#include "util/io/mutex.h"
#include "util/status.h"

namespace aw::server {

class ClientCaReloader final : public ClientCaSource {
 public:
  ClientCaReloader(std::string path, prometheus::Registry& registry,
                   std::chrono::milliseconds interval = std::chrono::seconds(1));
  ~ClientCaReloader() override;
  ClientCaReloader(const ClientCaReloader&) = delete;
  ClientCaReloader& operator=(const ClientCaReloader&) = delete;

  // Loads the bundle once; InvalidArgument/IOError naming the file when it is unusable.
  Status LoadInitial();
  // Polls every `interval` on `executor` until Stop(). Idempotent while started.
  void Start(boost::asio::any_io_executor executor);
  void Stop();  // waits for a poll in progress; idempotent; also run by the destructor

  std::shared_ptr<const CaBundle> CurrentCa() const override;
  // One poll; true when a new bundle was installed. Public for tests.
  bool PollOnce();

 private:
  // Reads the file or the directory into files_; returns what change detection compares.
  std::optional<std::string> Read(std::string* error);
  CaBundleResult Parse();  // files_ as one bundle

  const std::string path_;
  std::vector<std::pair<std::string, std::string>> files_;  // (path, contents) last read
  const std::chrono::milliseconds interval_;
  prometheus::Counter& reloads_;
  prometheus::Counter& failures_;
  // The installed one, read by every handshake. A Mutex, not std::atomic<std::shared_ptr>:
  // libstdc++ 12's load() releases its internal lock with memory_order_relaxed, so a load and the
  // next store of the pointer are not ordered (ThreadSanitizer reports it, rightly).
  mutable Mutex current_mu_;
  std::shared_ptr<const CaBundle> current_ GUARDED_BY(current_mu_);
  std::string loaded_;                   // contents of the installed bundle (the poller only)
  std::optional<std::string> rejected_;  // last rejected contents or read error, counted once
  PollTimer poller_;  // last: stopped (by the destructor) before the state it polls goes
};

}  // namespace aw::server
