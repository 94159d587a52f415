// HTTPS transport to the API server: HTTP/1.1 over OpenSSL, written for this client (no
// third-party HTTP client), so that every failure can say exactly what failed.
//
// Promise: every request is sent over TLS (>= 1.2) (or plain TCP when the config asks for
// plain_http: only the allocation gateway's upstream does), with the server certificate verified
// against the configured CA only (the system roots when no CA is configured; nothing when the
// config explicitly allows insecure), host name or IP SAN included (the config's tls_server_name
// instead of the host when set, also sent as SNI), with the client certificate and/or a bearer
// token; the token file is re-read when it changes (checked at most once a second, and
// immediately after a 401). Every call has a connect timeout and a per-read/per-write timeout.
// Shutdown() makes in-flight calls (including long watch streams) return promptly with a
// cancelled error and future calls fail fast. Thread-safe: any number of threads may call
// Do()/Stream() concurrently. Creating one sets SIGPIPE to ignored when it is still at its
// default (a write to a connection the server closed must not kill the process).
//
// Connection pool (Do() only; every Stream() opens its own connection and closes it after):
//   - up to 64 idle keep-alive connections, reused most-recently-used first;
//   - a pooled connection is discarded instead of reused when it has been idle for 45 s or more
//     (kube-apiserver's http.Server closes HTTP/1.1 and HTTP/2 connections idle for 90 s:
//     IdleTimeout in k8s.io/apiserver/pkg/server/secure_serving.go; load balancers in front of
//     it often close after 60 s), or when its socket is readable, hung up or in error while idle
//     (an idle HTTP/1.1 connection has nothing to read: a TLS close_notify, a FIN or a RST means
//     the server closed it; anything else is junk);
//   - a request on a reused connection that fails before any response byte arrived because the
//     connection was closed or reset (a write error, or EOF / close_notify / ECONNRESET while
//     waiting for the status line: the server closed an idle connection as we sent on it) is
//     sent again at once, once, on a new connection, whatever the verb, unless the request says
//     resend_on_closed_connection = false. That is safe for every
//     request this client makes: GET/LIST/WATCH are reads; a JSON patch with a resourceVersion
//     test and a PUT carrying metadata.resourceVersion cannot apply twice (had the first copy
//     reached the server, the second fails its precondition with 409/422 and the caller
//     re-reads, as after any conflict); a merge patch sets the same fields to the same values
//     again; a DELETE of a deleted object answers 404; a POST of a Lease that exists answers 409
//     AlreadyExists; a POST of an Event could at worst record one Event twice, which Events
//     tolerate (client-go's recorder retries them too). A server that closes an idle connection
//     never read the request on it, so in practice the first copy never arrived;
//   - never retried: a failure on a new connection, a timeout, a failure after any response byte
//     (a partial status line, headers or body), a cancelled call;
//   - counters() counts connections opened and reused, pooled connections dropped (closed by the
//     server, or too old) and retries; each retry and each drop is also logged at debug.
// Errors: a transport failure's message names the verb, host:port and path (query stripped), the
// stage (resolve / connect / TLS handshake / write / read), whether the connection was new or
// reused (and how long it was idle), the cause (strerror text, OpenSSL's error strings and the
// certificate verification result, "closed by the server", "timed out after ..."), the request
// bytes written out of the total and the response bytes received; after a retry, both attempts.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "kube/config.h"
#include "kube/core/status.h"
#include "util/io/mutex.h"

namespace aw::kube {

// Cancels one in-flight call from another thread (e.g. an informer's watch on Stop()). Once
// cancelled, calls using it fail fast with a cancelled error. Reset() re-arms it.
class Cancellation {
 public:
  void Cancel();
  bool cancelled() const;
  void Reset();

 private:
  friend class HttpsTransport;
  mutable Mutex mu_;
  bool cancelled_ GUARDED_BY(mu_) = false;
  std::function<void()> stopper_ GUARDED_BY(mu_);  // set while a call is in flight
};

struct HttpRequest {
  std::string method = "GET";  // GET, POST, PUT, PATCH, DELETE
  std::string path;            // absolute path incl. already-encoded query, without base_path
  std::string body;
  std::string content_type;                  // for bodies
  std::chrono::milliseconds timeout{30000};  // per socket read/write; connect is min(this, 10s)
  Cancellation* cancel = nullptr;            // optional, not owned
  // False: never sent a second time, even after a reused connection was found closed (a
  // non-idempotent call, e.g. a POST that allocates a GameServer): the caller gets the error.
  bool resend_on_closed_connection = true;
};

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string retry_after;  // raw Retry-After header, "" if absent
};

// Counters of the connection pool, for metrics, logs and tests. Monotonic.
struct TransportCounters {
  uint64_t connections_opened = 0;  // TCP+TLS connections established
  uint64_t connections_reused = 0;  // requests sent on a pooled connection
  uint64_t stale_discarded = 0;    // pooled connections found closed (readable/hung up) and dropped
  uint64_t expired_discarded = 0;  // pooled connections dropped for their idle age
  uint64_t stale_retries = 0;      // requests re-sent on a new connection after a reused one failed
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Complete request/response. Any HTTP status is a successful Result; only transport failures
  // (connect, TLS, timeout, cancelled) are errors.
  virtual Result<HttpResponse> Do(const HttpRequest& req) = 0;
  // Streaming request. When the status is 2xx, `on_data` receives body bytes as they arrive
  // (return false to stop early: that is a successful Result); otherwise the body is collected
  // (bounded) into the returned HttpResponse and `on_data` is not called.
  virtual Result<HttpResponse> Stream(const HttpRequest& req,
                                      const std::function<bool(std::string_view)>& on_data) = 0;
  // Cancels in-flight calls and makes future ones fail fast. Idempotent.
  virtual void Shutdown() = 0;
  virtual bool IsShutdown() const = 0;
  virtual TransportCounters counters() const { return {}; }
};

// InvalidArgument (naming the CA, client certificate or key) when the TLS material in `config`
// cannot be loaded.
StatusOr<std::unique_ptr<Transport>> NewHttpsTransport(const ClientConfig& config);

}  // namespace aw::kube
