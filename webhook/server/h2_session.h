// H2Session: the server side of one HTTP/2 connection (RFC 9113) as bytes in and bytes out, on
// nghttp2's session API. It does no I/O and keeps no clock: ConnectionServer's session feeds it
// what the socket read (Receive), writes what it produces (TakeOutput) and keeps the deadlines.
//
// Promise:
//   - protocol-generic: every complete request (HEADERS, then DATA up to END_STREAM) becomes one
//     HttpRequest (method, path, query, content_type, body, header(), on_abandoned, http2 = true)
//     given to `dispatch`, from inside Receive; the answer comes back through Respond(stream, ...)
//     on the same thread that calls Receive (the caller serialises them), at most once per stream;
//   - limits: at most `max_concurrent_streams` streams open at once
//   (SETTINGS_MAX_CONCURRENT_STREAMS;
//     a client exceeding it gets its new streams refused by nghttp2), at most `max_requests`
//     streams over the connection's life (then GOAWAY: the client reconnects); request headers over
//     `max_header_bytes` (name + value + 32 per field, as SETTINGS_MAX_HEADER_LIST_SIZE counts) or
//     `max_header_count` fields -> the stream is answered 431 and closed; a body over
//     `max_body_bytes` is not kept: the request is dispatched with body_too_large set, as soon as
//     the limit is passed (the rest of the stream is discarded); request bodies buffered at once
//     over the streams still being received are bounded by `max_buffered_bytes` (the stream that
//     would pass it is reset with ENHANCE_YOUR_CALM);
//   - a stream the client resets (RST_STREAM), or that ends with the connection, before its answer
//     was written runs its on_abandoned function at once (from inside Receive, or from the
//     destructor) and, if an answer was given, that answer's on_written(false);
//   - Respond: `headers` and `content_type` go in the HEADERS frame with :status; an empty body
//     with no trailers is a single HEADERS frame with END_STREAM (gRPC's "trailers-only"); else
//     DATA frames, then a trailing HEADERS frame with `trailers` when there are any. on_written
//     runs once: true when the stream's last frame is in bytes TakeOutput returned and the caller
//     reports them written (Flushed(true)), false when it cannot be (the stream was reset, the
//     connection failed: Flushed(false) or destruction). Answering a stream that is gone is
//     harmless (on_written(false));
//   - Shutdown(): GOAWAY; the streams already open are still served, then WantsIo() turns false;
//   - a protocol error by the client (malformed frames, a bad preface, flow-control violation)
//     makes Receive return an error after queueing GOAWAY with the error code; the caller writes
//     what is left and closes. Never crashes on any input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "server/connection_server.h"
#include "util/status.h"

namespace aw::server {

class H2Session {
 public:
  // Called for each complete request; the request is valid until the stream is answered (or, for
  // a stream that ended first, until Respond is called for it or the session is destroyed).
  using Dispatch = std::function<void(int32_t stream, HttpRequest& request)>;

  // H2Options: connection_server.h.
  H2Session(H2Options options, Dispatch dispatch);
  ~H2Session();
  H2Session(const H2Session&) = delete;
  H2Session& operator=(const H2Session&) = delete;

  // Queues the server preface (SETTINGS). Call once, before anything else.
  Status Start();
  // Feeds bytes read from the client. An error: the connection is beyond repair (a protocol
  // error: GOAWAY is queued; write TakeOutput() and close).
  Status Receive(std::string_view bytes);
  // Bytes to write now (up to about `max` bytes; empty when there is nothing).
  std::string TakeOutput(size_t max = 64 * 1024);
  // After the bytes of the last TakeOutput were written (true) or could not be (false).
  void Flushed(bool written);
  void Respond(int32_t stream, HttpResponse response);
  // The handler dropped the stream without an answer: reset it (INTERNAL_ERROR).
  void Reset(int32_t stream);
  // GOAWAY: no new streams; open ones are served.
  void Shutdown();

  // The session still wants to read or write (false: the connection can be closed).
  bool WantsIo() const;
  bool WantsWrite() const;
  // Streams whose request is being received (the read deadline applies), and streams waiting for
  // their answer.
  size_t Receiving() const;
  size_t Waiting() const;
  size_t OpenStreams() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace aw::server
