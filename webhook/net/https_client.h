// HttpsClient: one asynchronous HTTP/1.1 client on Boost.Beast, over TLS (>= 1.2) or plain TCP,
// for every outgoing call of the program (the Kubernetes client, kube/transport.h, and the
// gateway's allocator client). IoThreadClient runs one on an I/O thread of its own (the Kubernetes
// transport's).
//
// Promise:
//   - Every call runs on the client's strand: Do()/Stream() may be called from any thread and
//     return at once; `done` (and a stream's `on_chunk`) run on the strand, never inline in the
//     caller. Exactly one `done` per call, also after Cancel() or Shutdown().
//   - TLS: the server certificate is verified against the configured CA only (the system roots
//     when none; nothing when insecure_skip_tls_verify), host name or IP SAN included, with
//     tls_server_name (when set) as the verified name and the SNI; the client certificate and/or
//     a bearer token (token_file re-read when it changes, checked at most once a second and right
//     after a 401, on which the call is made once more with the re-read token).
//   - Deadlines per phase (tcp_stream expiry): resolve + connect + TLS handshake within
//     min(request timeout, 10 s) together; each write and each read within the request timeout
//     (for a stream, the timeout is the idle time allowed between two pieces of the body).
//   - Limits: response headers up to max_header_bytes, a non-streamed body up to max_body; a
//     streamed non-2xx body is kept up to 64 KiB. Beyond them the call fails with a clear error.
//   - Keep-alive pool (Do() only; a stream has its own connection, closed after): up to max_idle
//     idle connections, most recently used first; a pooled connection idle for max_idle_age or
//     more, or whose socket shows a close, reset or unread bytes while idle, is dropped unused.
//   - Retry rule (the only one): a request on a reused connection that fails before any byte of
//     the answer because the connection was closed or reset (write error, or EOF/close_notify/
//     reset while waiting for the status line) is sent once more at once on a new connection,
//     unless the request says resend_on_closed_connection = false (a non-idempotent call, e.g.
//     an allocation). Never retried: a failure on a new connection, a timeout, a failure after
//     any answer byte, a cancelled call.
//   - Errors are Status values: Unavailable for a transport failure, Cancelled after Cancel() or
//     Shutdown(), InvalidArgument for a request the client cannot send (unknown verb, stream of a
//     non-GET). The message names verb, host:port and path (query stripped), the stage (resolve,
//     connect, TLS handshake, write, read), new or reused connection (idle time, request number
//     on it), the cause (errno text, OpenSSL reason and certificate verification result, "closed
//     by the server", "timed out after ..."), request bytes written of the total and answer
//     bytes received; after a retry, both attempts. Any HTTP status is a successful Response.
//   - Shutdown() (any thread, idempotent) ends every call in flight promptly with Cancelled and
//     makes later calls fail fast; the pool is closed.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "util/status.h"

namespace aw::net {

struct ClientOptions {
  std::string host;  // DNS name or IP literal (no brackets)
  int port = 443;
  std::string base_path;  // prefix of every path, "" or "/prefix"
  std::string ca_pem;     // empty: the system trust store
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string token;       // static bearer token
  std::string token_file;  // re-read when it changes (takes precedence over token)
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;   // SNI and verified name ("" = host)
  bool plain_http = false;       // no TLS at all; the TLS fields are unused
  std::string log_name = "net";  // prefix of this client's debug log lines
  size_t max_idle = 64;
  std::chrono::seconds max_idle_age{45};
  size_t max_header_bytes = 1 << 20;
  size_t max_body = 256u << 20;
};

struct Request {
  std::string method = "GET";  // GET, POST, PUT, PATCH, DELETE
  std::string path;            // absolute, with its encoded query, without base_path
  std::string body;
  std::string content_type;
  std::chrono::milliseconds timeout{30000};  // per read/write; connect is min(this, 10 s)
  bool resend_on_closed_connection = true;   // false: never sent twice (see the retry rule)
};

struct Response {
  int status = 0;
  std::string body;         // empty for a stream's 2xx answer (the body went to on_chunk)
  std::string retry_after;  // the raw Retry-After header, "" when absent
};

// Monotonic counters of the pool.
struct Counters {
  uint64_t connections_opened = 0;
  uint64_t connections_reused = 0;
  uint64_t stale_discarded = 0;    // pooled connections found closed while idle
  uint64_t expired_discarded = 0;  // pooled connections dropped for their idle age
  uint64_t stale_retries = 0;      // requests sent again after a reused connection closed
};

// One call in flight. Cancel() from any thread: the call ends with Cancelled (unless it already
// ended). Idempotent.
class Call {
 public:
  virtual ~Call() = default;
  virtual void Cancel() = 0;
};

class HttpsClient {
 public:
  using Done = std::function<void(StatusOr<Response>)>;
  // Hands the caller the next piece of a 2xx stream's body as soon as it is read (a watch's event
  // is never held back for more data or the stream's end); the client reads no further until
  // `resume` is called (from any thread): resume(true) reads on, resume(false) ends the call
  // successfully (the connection is closed).
  using Resume = std::function<void(bool more)>;
  using OnChunk = std::function<void(std::string_view data, Resume resume)>;

  // InvalidArgument naming the CA, client certificate or key when the TLS material is bad.
  // `executor`: where the calls run (a strand of it is made).
  static StatusOr<std::shared_ptr<HttpsClient>> Create(boost::asio::any_io_executor executor,
                                                       ClientOptions options);
  virtual ~HttpsClient() = default;

  virtual std::shared_ptr<Call> Do(Request req, Done done) = 0;
  // GET only. A non-2xx answer's body is collected (bounded) into the Response instead.
  virtual std::shared_ptr<Call> Stream(Request req, OnChunk on_chunk, Done done) = 0;
  virtual void Shutdown() = 0;
  virtual bool IsShutdown() const = 0;
  virtual Counters counters() const = 0;
};

// An HttpsClient on an I/O thread of its own (the Kubernetes transport's): the asynchronous client
// and that thread's executor, for timers and other asynchronous work of the client's users (never
// blocking it). Thread-safe. The destructor shuts the client down and joins its thread.
class IoThreadClient {
 public:
  static StatusOr<std::unique_ptr<IoThreadClient>> Create(ClientOptions options);
  ~IoThreadClient();
  IoThreadClient(const IoThreadClient&) = delete;
  IoThreadClient& operator=(const IoThreadClient&) = delete;

  void Shutdown();
  bool IsShutdown() const;
  Counters counters() const;
  // The asynchronous client, on this client's I/O thread (its callbacks run there and must not
  // block).
  HttpsClient& async();
  boost::asio::any_io_executor executor();

 private:
  struct Impl;
  explicit IoThreadClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace aw::net
