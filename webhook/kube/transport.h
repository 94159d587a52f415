// The Kubernetes client's transport: the asynchronous interface (DoAsync, StreamAsync, executor())
// that the client, informers, leader elector, Events, CRD guard and the resolver's patches use; no
// thread waits for an answer. The unit tests' fakes implement it (test/unit/scripted_transport.h).
//
// Promise: NewHttpsTransport() is the project's one HTTPS client (net/https_client.h, Boost.Beast,
// asynchronous, on an I/O thread of its own) behind this interface; every promise of that client
// holds here: TLS >= 1.2 verified against the configured CA (system roots when none; nothing when
// insecure is allowed), tls_server_name as SNI and verified name, client certificate and/or bearer
// token (the token file re-read when it changes and right after a 401), a connect timeout of
// min(timeout, 10 s) and a per-read/per-write timeout, the keep-alive pool (64 idle connections,
// none reused after 45 s idle or when its socket shows a close while idle: kube-apiserver closes
// connections idle for 90 s, k8s.io/apiserver/pkg/server/secure_serving.go), and the one retry
// rule: a request that fails on a reused connection before any byte of the answer because the
// server closed or reset it is sent once more on a new connection, unless the request says
// resend_on_closed_connection = false. That is safe for every request this client makes: reads;
// a JSON patch with a resourceVersion test or a PUT with metadata.resourceVersion cannot apply
// twice (409/422, and the caller re-reads); a merge patch sets the same values again; a DELETE of
// a deleted object answers 404; a POST of an existing Lease answers 409; an Event posted twice is
// tolerated (client-go's recorder retries them too). Never retried: a failure on a new
// connection, a timeout, a failure after any answer byte, a cancelled call. Error messages name
// the verb, host:port and path, the stage, new or reused connection, the cause and the bytes
// written/received (net/https_client.h). Shutdown() makes in-flight calls (including watch
// streams) return promptly with a cancelled error and future calls fail fast. Thread-safe: any
// number of threads may call DoAsync()/StreamAsync() concurrently; their callbacks run on
// executor().
#pragma once

#include <boost/asio/any_io_executor.hpp>
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

namespace aw::net {
class Call;
}  // namespace aw::net

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
  std::shared_ptr<net::Call> call_ GUARDED_BY(mu_);  // set while a call is in flight
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
  virtual ~Transport();
  using Done = std::function<void(Result<HttpResponse>)>;
  // A complete request/response: `done` runs exactly once, on the transport's I/O thread (it must
  // not block). Any HTTP status is a successful Result; only transport failures (connect, TLS,
  // timeout, cancelled) are errors. req.cancel, when set, cancels the call (a cancelled error).
  virtual void DoAsync(const HttpRequest& req, Done done) = 0;
  // A streamed GET. For a 2xx answer, `on_chunk` receives each piece of the body as it is read, on
  // executor(); the transport reads no further until `resume` is called (from any thread, exactly
  // once per chunk): resume(true) reads on, resume(false) ends the call successfully. Otherwise the
  // body is collected (bounded) into the HttpResponse and `on_chunk` is not called. `done` runs
  // exactly once, on executor(), after the last on_chunk returned and its resume was called.
  // req.cancel, when set, cancels the call (done then gets a cancelled error). Callbacks must not
  // block.
  using Resume = std::function<void(bool more)>;
  using OnChunk = std::function<void(std::string_view data, Resume resume)>;
  virtual void StreamAsync(const HttpRequest& req, OnChunk on_chunk, Done done) = 0;
  // The executor of the transport's I/O thread, where the callbacks run: the asynchronous
  // components of the Kubernetes side (their timers, their continuations) run on it and never
  // block it.
  virtual boost::asio::any_io_executor executor() = 0;
  // Cancels in-flight calls and makes future ones fail fast. Idempotent.
  virtual void Shutdown() = 0;
  virtual bool IsShutdown() const = 0;
  virtual TransportCounters counters() const { return {}; }
  // Called by Client's destructor after Shutdown(), while the whole transport still exists:
  // returns once no callback of a thread the transport's implementation owns for its own use (a
  // test fake's helper threads) runs any more. The default has none to wait for.
  virtual void Join() {}
};

// InvalidArgument (naming the CA, client certificate or key) when the TLS material in `config`
// cannot be loaded.
StatusOr<std::unique_ptr<Transport>> NewHttpsTransport(const ClientConfig& config);

}  // namespace aw::kube
