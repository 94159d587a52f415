// Request-size limits of the connection layer, and the pure decisions made from them.
//
// Promise: no I/O, no clocks. Given what has been read of a request, says which limit (if any) it
// broke and therefore which status answers it:
//   - the request line (method, target, version) longer than max_request_line_bytes -> 414;
//   - the head (request line + header fields) larger than max_header_bytes -> 431;
//   - more than max_header_count header fields -> 431;
//   - a body larger than max_body_bytes -> 413, decided from Content-Length before any of the body
//     is read (and answered instead of `100 Continue`); a chunked body is cut at the same size.
// A head that overflowed before it was complete is told apart (414 vs 431) by the request line:
// when the parser has not taken it yet, by whether the bytes buffered so far (which then start at
// the request line) hold a CRLF within the request-line limit: without one, the request line
// itself is what overflowed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace aw::server {

struct RequestLimits {
  size_t max_request_line_bytes = 8 * 1024;
  size_t max_header_bytes = 32 * 1024;  // request line + header fields + CRLFs
  size_t max_header_count = 100;
  size_t max_body_bytes = 7 * 1024 * 1024;
  // After a body over the limit has been refused, at most this many more bytes of it are read and
  // discarded so that the connection stays usable; beyond, the connection is closed.
  size_t max_discard_bytes = 64 * 1024 * 1024;
};

enum class HeadProblem { kNone, kRequestLineTooLong, kHeaderTooLarge, kTooManyHeaders };

// The head overflowed max_header_bytes before its end was seen. `parsed_request_line`: the length
// of the request line when the parser already took it (parsers consume it as soon as its CRLF
// arrives); otherwise `buffered`, the bytes read so far, starts at the request line.
HeadProblem ClassifyHeadOverflow(std::optional<size_t> parsed_request_line,
                                 std::string_view buffered, const RequestLimits& limits);

// A complete head: its request line length (without CRLF), its total size in bytes (with the
// final empty line) and its number of header fields.
HeadProblem CheckHead(size_t request_line_bytes, size_t head_bytes, size_t header_count,
                      const RequestLimits& limits);

int StatusOf(HeadProblem problem);  // 414, 431 or 200 for kNone
std::string MessageOf(HeadProblem problem, const RequestLimits& limits);

// What to do with a request's body once its head is read.
enum class BodyPlan {
  kRead,               // read it (sending `100 Continue` first when the client asked for it)
  kRefuseThenDiscard,  // answer 413 now, then read and drop the body, keep the connection
  kRefuseThenClose,    // answer 413 now and close: the body is not coming or is too large to skip
};

// content_length: the Content-Length header when present; chunked bodies are read (kRead) and cut
// while they are read.
BodyPlan PlanBody(std::optional<uint64_t> content_length, bool expect_continue,
                  const RequestLimits& limits);

}  // namespace aw::server
