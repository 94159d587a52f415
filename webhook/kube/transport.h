// The Kubernetes client's transport: the blocking interface (Do, Stream) and the asynchronous one
// (DoAsync, StreamAsync, executor()) that the client, informers, leader elector, Events, CRD guard
// and the resolver's patches use, and a fake of it in the unit tests.
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
// number of threads may call Do()/Stream()/DoAsync()/StreamAsync() concurrently; a blocking
// stream's on_data runs on the caller's thread, an asynchronous call's callbacks on executor().
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
  // Complete request/response. Any HTTP status is a successful Result; only transport failures
  // (connect, TLS, timeout, cancelled) are errors.
  virtual Result<HttpResponse> Do(const HttpRequest& req) = 0;
  // Streaming request. When the status is 2xx, `on_data` receives body bytes as they arrive
  // (return false to stop early: that is a successful Result); otherwise the body is collected
  // (bounded) into the returned HttpResponse and `on_data` is not called.
  virtual Result<HttpResponse> Stream(const HttpRequest& req,
                                      const std::function<bool(std::string_view)>& on_data) = 0;
  using Done = std::function<void(Result<HttpResponse>)>;
  // Do() without a waiting thread: `done` runs exactly once, on the transport's I/O thread (it
  // must not block); req.cancel, when set, cancels the call like Do()'s. This default, kept by
  // fakes, calls Do() and then `done` on the calling thread.
  virtual void DoAsync(const HttpRequest& req, Done done) { done(Do(req)); }
  // Stream() without a waiting thread. For a 2xx answer, `on_chunk` receives each piece of the
  // body as it is read, on executor(); the transport reads no further until `resume` is called
  // (from any thread, exactly once per chunk): resume(true) reads on, resume(false) ends the call
  // successfully. `done` runs exactly once, on executor(), after the last on_chunk returned and
  // its resume was called, with what Stream() would return. req.cancel, when set, cancels the call
  // (done then gets a cancelled error). Callbacks must not block.
  // This default, kept by the fakes of the unit tests (a test-only path: the real transport
  // overrides it), runs the blocking Stream() on a helper thread of its own, posts each chunk to
  // executor() and waits for its resume; the helper threads are joined by ~Transport, so a fake's
  // Stream() must return on Shutdown() or req.cancel.
  using Resume = std::function<void(bool more)>;
  using OnChunk = std::function<void(std::string_view data, Resume resume)>;
  virtual void StreamAsync(const HttpRequest& req, OnChunk on_chunk, Done done);
  // The executor of the transport's I/O thread, where DoAsync's `done` runs: the asynchronous
  // components of the Kubernetes side (their timers, their continuations) run on it and never
  // block it. The default, kept by fakes in tests, is an io_context on a thread of its own,
  // started on first use and joined by the destructor.
  virtual boost::asio::any_io_executor executor();
  // Cancels in-flight calls and makes future ones fail fast. Idempotent.
  virtual void Shutdown() = 0;
  virtual bool IsShutdown() const = 0;
  virtual TransportCounters counters() const { return {}; }
  // Joins the default StreamAsync's helper threads, then stops and joins the default executor()'s
  // thread (its pending handlers are dropped): afterwards no callback runs on them. Idempotent;
  // not from the fallback executor's own thread. Client's destructor calls it after Shutdown(),
  // while the derived transport is still whole: ~Transport is too late, a fake's members (its
  // handler, its condition variable) are gone by then while a handler may still call its Do().
  void StopFallbackIo() EXCLUDES(fallback_mu_);

 private:
  struct FallbackIo;
  struct StreamHelpers;
  mutable Mutex fallback_mu_;
  std::shared_ptr<FallbackIo> fallback_io_ GUARDED_BY(fallback_mu_);  // the default executor()'s
  std::shared_ptr<StreamHelpers> helpers_ GUARDED_BY(fallback_mu_);   // default StreamAsync's
};

// InvalidArgument (naming the CA, client certificate or key) when the TLS material in `config`
// cannot be loaded.
StatusOr<std::unique_ptr<Transport>> NewHttpsTransport(const ClientConfig& config);

}  // namespace aw::kube
