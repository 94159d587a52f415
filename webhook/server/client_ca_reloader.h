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
// ("client CA bundle reload rejected; keeping the previous one") and counted once per distinct
// content, and the old bundle keeps verifying (server/reloader.h). Metrics:
//   allocating_webhook_client_ca_reloads_total
//   allocating_webhook_client_ca_reload_failures_total
#pragma once

#include <prometheus/registry.h>

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/reloader.h"
#include "server/tls_context.h"
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
  // What a poll read: (path, contents) of the file, or of each file of the directory.
  using Files = std::vector<std::pair<std::string, std::string>>;
  static StatusOr<Files> Read(const std::string& path);
  static CaBundleResult Parse(const std::string& path, const Files& files);

  Reloader<Files, CaBundle> reloader_;  // last: stopped (by the destructor) first
};

}  // namespace aw::server
