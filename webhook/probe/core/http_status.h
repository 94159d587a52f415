// Parsing of an HTTP/1.x response status line, for the HTTP probe.
//
// Promise: pure, total over any byte string. Given the bytes received so far, says whether a full
// status line is present and, if so, its status code; never reads past the first CRLF.
#pragma once

#include <optional>
#include <string_view>

namespace aw::probe {

enum class StatusLineState { kIncomplete, kComplete, kMalformed };

struct StatusLine {
  StatusLineState state = StatusLineState::kIncomplete;
  int code = 0;  // valid when kComplete
};

// `received` is the response prefix read so far. A line longer than `max_line` bytes without a
// CRLF is kMalformed (so a misbehaving peer cannot make the prober buffer unboundedly).
StatusLine ParseStatusLine(std::string_view received, size_t max_line = 1024);

}  // namespace aw::probe
