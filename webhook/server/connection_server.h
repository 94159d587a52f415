// ConnectionServer: one HTTP/1.1 (and, opted in, HTTP/2) listener (TLS or plain) on
// Boost.Beast/Asio that no client can hold hostage. Both the admission port (TLS) and the health
// port (plain) are one of these; so is the gateway's port, the one that serves HTTP/2.
//
// Promise:
//   - a small fixed set of io threads (`io_threads`) runs every connection asynchronously: no
//     thread is held by a slow or silent client, and a client costs only its socket, its TLS state
//     and a read buffer bounded by the head limit. Each io thread runs its own io_context; a
//     connection is given one at accept (round robin) and all its work runs on that thread;
//   - a TLS handshake must finish within `handshake_timeout` of the accept; at most
//     `max_concurrent_handshakes` run at once (the others wait, in order, holding no TLS state),
//     and a connection that has sent nothing holds no slot; a request, from its first byte to its
//     last (head and body), within `read_timeout`; a response must be taken by the client within
//     `write_timeout`; a keep-alive connection idle for `idle_timeout` is closed. A timed-out
//     connection is closed without an answer;
//   - head and body limits per RequestLimits (http_limits.h): 414 / 431 / 413 with a plain-text
//     message, the 413 sent before the body is read (and instead of `100 Continue`); `100
//     Continue` is sent when the client asks for it and the body is within the limit; malformed
//     HTTP -> 400. The connection is closed after 414, 431, 400, and after a 413 whose body is not
//     skipped (see RequestLimits::max_discard_bytes);
//   - the whole request is read before `handler` runs, on an io thread (handlers must be quick and
//     must not block); an exception from it -> 500;
//   - an asynchronous handler (AsyncHttpHandler) gets the request and a Responder instead of
//     returning the answer: it may call the Responder later, from any thread, at most once (later
//     calls are ignored). No deadline runs on the connection meanwhile (the handler owns the
//     wait), but the connection is read: a client that closes or resets it is noticed at once
//     (HttpRequest::on_abandoned; an end of stream counts, so a client that half-closes its
//     sending side is taken as gone, as Go's net/http server does), and bytes it pipelines are
//     kept for its next request. The
//     request it was given stays valid until it answers. Dropping every copy of the Responder
//     without calling it closes the connection without an answer. An exception thrown by the
//     handler before it answered -> 500;
//   - with a ClientCaSource (tls_context.h) every TLS client must present a certificate that
//     verifies against the source's current CA bundle, or the handshake fails;
//   - at most `max_connections` open: a new connection is always accepted and, at the cap, the
//     connection chosen by ChooseVictim (eviction.h) is closed: idle keep-alive ones first, else
//     the one whose current handshake/request/response started earliest, and a request waiting
//     for an asynchronous handler's answer only when nothing else is left;
//   - HTTP/2 (only with ConnectionOptions::http2: ALPN "h2" on TLS, the preface on a plain
//     listener): H2Session (h2_session.h) frames it; each stream's request goes to the same
//     handler as an HTTP/1.1 request (HttpRequest::http2 set), many at once per connection, each
//     answered on its stream (HttpResponse::trailers); a stream reset by the client, or the
//     connection's end, runs that request's on_abandoned; on_written tells whether the answer was
//     written. The connection is read and written one operation at a time (the answer cancels the
//     read that waits for the client); read_timeout bounds a request from its stream's first
//     byte, idle_timeout a connection with no stream open, write_timeout each write; on Stop() a
//     connection gets GOAWAY once it has no stream open (until then new streams are still
//     handed to the handler, which may refuse them) and closes;
//   - Stop(): stop accepting, close idle connections (those with no request bytes pending), answer
//     every request being read (each within its deadline) with `Connection: close`, then close;
//     WaitStopped() waits for that (or gives up at its timeout and stops the io threads).
//   - On an external executor (ConnectionOptions::executor, the health port on the process's
//     dispatcher): WaitStopped() waits as above, then closes the connections still open and waits
//     (within the same timeout) until every connection object is destroyed, so none outlives the
//     server's handler; the acceptor's and the connections' handlers still queued hold the
//     server's state (not the ConnectionServer), so one that runs late, or is destroyed unrun with
//     the io_context, touches nothing freed. The destructor does the same (1 s). WaitStopped() and
//     the destructor must not run on that executor's thread: they abort (runtime/io_thread.h).
// Metrics (labelled listener=<name>): allocating_webhook_connections_open,
// allocating_webhook_connections_evicted_total{kind=idle|oldest|waiting},
// allocating_webhook_connection_timeouts_total{phase=handshake|request|write},
// allocating_webhook_http2_connections_total, allocating_webhook_http2_streams_total.
#pragma once

#include <prometheus/registry.h>

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/core/http_limits.h"
#include "server/tls_context.h"
#include "util/status.h"

namespace aw::server {

struct HttpRequest {
  std::string_view method;
  std::string_view path;   // target before '?'
  std::string_view query;  // after '?', without it
  std::string_view content_type;
  std::string_view body;
  bool body_too_large = false;  // the body was over the limit (body is empty then)
  // The value of a request header field (case-insensitive name), "" when absent. Valid as long as
  // the request is.
  std::function<std::string_view(std::string_view name)> header;
  // Asynchronous handlers only, and only during the handler's call: registers a function run
  // (once, on an io thread; it must not block) when the connection ends before the answer was
  // given: the client closed or reset it, or it was evicted at the connection cap. Not run once
  // the Responder has been called. Empty for synchronous handlers.
  std::function<void(std::function<void()>)> on_abandoned;
  // The request came on an HTTP/2 stream (H2Session, on a listener with `http2` set).
  bool http2 = false;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // HTTP/2 only (ignored on HTTP/1.1): fields sent after the body in a trailing HEADERS frame
  // (gRPC's grpc-status); with an empty body and no trailers the answer is one HEADERS frame.
  std::vector<std::pair<std::string, std::string>> trailers;
  // Called exactly once by the transport after the response has been fully written to the
  // socket (true) or could not be (false: the client left, the stream was reset, the connection
  // failed), on HTTP/1.1 and HTTP/2. Optional.
  std::function<void(bool written)> on_written;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;
// Answers the request it was made for; callable from any thread, the first call wins.
using Responder = std::function<void(HttpResponse)>;
using AsyncHttpHandler = std::function<void(const HttpRequest&, Responder)>;

// HTTP/2 limits per connection (H2Session, h2_session.h); the body and head limits are the
// listener's RequestLimits.
struct H2Options {
  // Streams open at once (SETTINGS_MAX_CONCURRENT_STREAMS). A waiting allocation holds its stream
  // for as long as it waits, so the gateway sets this to 1,000.
  uint32_t max_concurrent_streams = 100;
  size_t max_requests = 1'000'000;  // streams over a connection's life, then GOAWAY
  // Request bodies buffered at once over all the streams still being received; the stream whose
  // DATA would pass it is reset (ENHANCE_YOUR_CALM). Bounds a connection's memory as the body
  // limit bounds one HTTP/1.1 request's.
  size_t max_buffered_bytes = 4 << 20;
  size_t max_body_bytes = 1 << 20;
  size_t max_header_bytes = 32 * 1024;
  size_t max_header_count = 100;
};

struct ConnectionOptions {
  std::string name = "admission";  // for logs and metric labels
  std::string bind_address = "0.0.0.0";
  int port = 8443;
  int backlog = 4096;  // the kernel caps it at net.core.somaxconn
  size_t io_threads = 2;
  // When set, the server has no io thread of its own: it runs every connection on this executor
  // (the process's runtime::Dispatcher; the health port), and `io_threads` is ignored. The
  // executor's io_context must outlive the server and run until the server's Stop()+WaitStopped()
  // (or destruction) returned, which must not be called on it (runtime/io_thread.h).
  boost::asio::any_io_executor executor;
  size_t max_connections = 1024;
  // TLS handshakes in progress at once (HandshakeGate): a connection whose ClientHello has
  // arrived waits for a turn beyond this, holding only its socket, within handshake_timeout.
  size_t max_concurrent_handshakes = 64;
  RequestLimits limits;
  std::chrono::nanoseconds handshake_timeout = std::chrono::seconds(5);
  std::chrono::nanoseconds read_timeout = std::chrono::seconds(10);
  std::chrono::nanoseconds write_timeout = std::chrono::seconds(10);
  std::chrono::nanoseconds idle_timeout = std::chrono::seconds(120);
  // After the last response on a connection, how long unread client bytes are drained before the
  // socket is closed (so a pending request body does not turn the close into a reset that
  // destroys the answer).
  std::chrono::nanoseconds linger_timeout = std::chrono::seconds(2);
  size_t keep_alive_max_requests = 1'000'000;
  // TLS listeners: offer ALPN "h2" as well as "http/1.1" and serve HTTP/2 (H2Session, h2_session.h)
  // to clients that pick it; a plain listener also takes HTTP/2 with prior knowledge (the client
  // opens with the HTTP/2 preface). Off for the admission listener: kube-apiserver would switch to
  // HTTP/2. The deadlines above apply per connection: `read_timeout` to a stream's request,
  // `idle_timeout` while no stream is open, `write_timeout` to each write.
  bool http2 = false;
  H2Options h2;
  // Counts the answers the connection layer makes itself (400, 414, 431, 413 on chunked).
  std::function<void(int status)> on_error;
};

class ConnectionServer {
 public:
  // `tls`: the key pair source for a TLS listener (ConfigureServerContext), or nullptr for plain
  // HTTP. Must outlive the server.
  ConnectionServer(ConnectionOptions options, HttpHandler handler, const KeyPairSource* tls,
                   prometheus::Registry& registry);
  // An asynchronous handler; `client_ca` (may be null: no client certificates asked for) makes a
  // TLS listener require and verify client certificates. Both sources must outlive the server.
  ConnectionServer(ConnectionOptions options, AsyncHttpHandler handler, const KeyPairSource* tls,
                   const ClientCaSource* client_ca, prometheus::Registry& registry);
  ~ConnectionServer();
  ConnectionServer(const ConnectionServer&) = delete;
  ConnectionServer& operator=(const ConnectionServer&) = delete;

  // Binds, listens and starts the io threads. InvalidArgument when the TLS setup or the bind
  // address is unusable, IOError when the listen fails (e.g. the port is in use).
  Status Start();
  // The first step of a graceful stop, while clients may still pick this server: Serving() turns
  // false (readiness fails, so the endpoint leaves its Service), every answer from now on carries
  // Connection: close (an HTTP/2 connection gets GOAWAY once no stream is open), but the listener
  // keeps accepting and idle keep-alive connections stay open, so a client reusing a pooled
  // connection gets an answer and learns that the connection ends, instead of racing a close.
  // Stop() follows.
  void BeginDrain();
  // Stops accepting and closes idle connections (a connection with a request on it is answered,
  // with Connection: close, then closed); Serving() is false from here.
  void Stop();
  // After Stop(): true when every connection closed within `timeout`; the io threads are stopped
  // either way.
  bool WaitStopped(std::chrono::milliseconds timeout);
  // After Stop(): true when every connection closed within `timeout`; the io threads keep running.
  bool WaitDrained(std::chrono::milliseconds timeout);
  // The executor of the first io thread's io_context (it exists from construction and runs from
  // Start() until the io threads stop), or the external executor: for timers that ride on this
  // server's thread, such as the certificate pollers (poll_timer.h).
  boost::asio::any_io_executor executor() const;
  // Listening and not stopped.
  bool Serving() const;
  size_t OpenConnections() const;
  // Connection objects alive (open, or closed with a handler still holding them).
  size_t LiveConnections() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace aw::server
