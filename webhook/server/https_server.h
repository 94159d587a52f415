// AdmissionServer: the HTTPS listener kube-apiserver calls, on cpp-httplib + OpenSSL.
//
// Promise:
//   - POST on each admission route goes through AdmissionPipeline (a `?timeout=` query is
//     ignored); another method on those paths -> 405 with `Allow: POST`; any other path -> 404;
//     every error answer has a plain-text message.
//   - the body limit holds for Content-Length and chunked bodies alike (413, connection kept when
//     the rest of the body could be drained, closed otherwise);
//   - at most `max_connections` open; idle keep-alive connections parked in epoll and requests
//     served by a small worker pool that grows only while workers are stuck on slow clients (see
//     TlsConnectionServer), TCP_NODELAY, long keep-alive, read/write timeouts: a silent client is
//     cut after `read_timeout` and never delays another connection;
//   - TLS per ConfigureServerContext, with the key pair read from `source` at each handshake.
// Start() binds and serves on a background thread; Stop() stops accepting, closes idle keep-alive
// connections at once and lets requests in progress finish (WaitStopped waits for them).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "server/admission_pipeline.h"
#include "server/tls_context.h"

namespace httplib {
class SSLServer;
}

namespace aw::server {

class TlsConnectionServer;

struct ServerOptions {
  std::string bind_address = "0.0.0.0";
  int port = 8443;
  size_t max_connections = 1024;
  std::chrono::nanoseconds read_timeout = std::chrono::seconds(10);
  std::chrono::nanoseconds write_timeout = std::chrono::seconds(10);
  std::chrono::nanoseconds keep_alive_timeout = std::chrono::seconds(120);
  size_t keep_alive_max_requests = 1'000'000;
  size_t max_body_bytes = kDefaultMaxBodyBytes;
};

class AdmissionServer {
 public:
  AdmissionServer(ServerOptions options, const KeyPairSource& source, AdmissionPipeline& pipeline,
                  AdmissionMetrics& metrics);
  ~AdmissionServer();
  AdmissionServer(const AdmissionServer&) = delete;
  AdmissionServer& operator=(const AdmissionServer&) = delete;

  // Binds the port and starts serving; the error when the TLS setup or the bind fails.
  std::optional<std::string> Start();
  void Stop();
  // Waits for the listener thread to finish (after Stop); false on timeout.
  bool WaitStopped(std::chrono::milliseconds timeout);

  // Listener bound (its socket open) and the accept loop running, with a key pair loaded.
  bool Serving() const;

 private:
  void RegisterRoutes();

  const ServerOptions options_;
  const KeyPairSource& source_;
  AdmissionPipeline& pipeline_;
  AdmissionMetrics& metrics_;
  std::unique_ptr<TlsConnectionServer> http_;
  std::thread thread_;
  std::atomic<bool> done_{false};
};

}  // namespace aw::server
