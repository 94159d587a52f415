// AdmissionServer: the HTTPS listener kube-apiserver calls, on the Beast connection core.
//
// Promise:
//   - POST on each admission route goes through AdmissionPipeline (a `?timeout=` query is
//     ignored); another method on those paths -> 405 with `Allow: POST`; GET /healthz -> "ok";
//     any other path -> 404; every error answer has a plain-text message;
//   - the connection rules of ConnectionServer (connection_server.h), with the listener's own
//     ConnectionOptions (named "admission"; its `on_error` counts the connection layer's own
//     answers in the admission metrics): `io_threads` threads serve
//     every connection asynchronously; whole-request deadline (`read_timeout`), handshake,
//     write and idle (keep-alive) deadlines; head limits (414/431) and the body limit (413 before
//     the body is read, for Content-Length and chunked bodies alike; connection kept when the rest
//     of the body can be skipped); at `max_connections`, idle connections and then the oldest
//     in-progress one are closed to admit a new client;
//   - TLS per ConfigureServerContext, with the key pair read from `source` at each handshake.
// Start() binds and serves; Stop() stops accepting, closes idle keep-alive connections and lets
// requests in progress finish within their deadlines (WaitStopped waits for them).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "admission/io/pipeline.h"
#include "server/connection_server.h"
#include "server/tls_context.h"
#include "util/status.h"

namespace aw::admission {

class AdmissionServer {
 public:
  AdmissionServer(server::ConnectionOptions options, const server::KeyPairSource& source,
                  AdmissionPipeline& pipeline, AdmissionMetrics& metrics,
                  prometheus::Registry& registry);
  ~AdmissionServer();
  AdmissionServer(const AdmissionServer&) = delete;
  AdmissionServer& operator=(const AdmissionServer&) = delete;

  // Binds the port and starts serving; an IOError saying what failed when the TLS setup or the
  // bind fails.
  Status Start();
  // ConnectionServer::BeginDrain: readiness fails, answers close their connections, the listener
  // keeps accepting; Stop() follows.
  void BeginDrain();
  void Stop();
  // Waits for the connections to finish (after Stop); false on timeout.
  bool WaitStopped(std::chrono::milliseconds timeout);

  // Listener bound and accepting, with a key pair loaded.
  bool Serving() const;

  // Before Start(): requests whose path starts with `prefix` (and is no admission route) go to
  // `handler`, on the io threads, with the connection rules above (any method; the handler
  // answers). Used by components that serve on the admission port (the autoscaling webhook).
  void AddRoute(std::string prefix, server::HttpHandler handler);

 private:
  server::HttpResponse Route(const server::HttpRequest& req);

  const server::KeyPairSource& source_;
  AdmissionPipeline& pipeline_;
  AdmissionMetrics& metrics_;
  std::unique_ptr<server::ConnectionServer> server_;
  std::vector<std::pair<std::string, server::HttpHandler>> extra_routes_;
};

}  // namespace aw::admission
