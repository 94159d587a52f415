#include "probe/core/http_status.h"

namespace aw::probe {

StatusLine ParseStatusLine(std::string_view received, size_t max_line) {
  size_t eol = received.find('\n');
  if (eol == std::string_view::npos) {
    if (received.size() > max_line) return {StatusLineState::kMalformed, 0};
    // Reject early when what we have cannot be the start of "HTTP/".
    std::string_view want = "HTTP/";
    size_t n = received.size() < want.size() ? received.size() : want.size();
    if (received.substr(0, n) != want.substr(0, n)) return {StatusLineState::kMalformed, 0};
    return {StatusLineState::kIncomplete, 0};
  }
  if (eol > max_line) return {StatusLineState::kMalformed, 0};
  std::string_view line = received.substr(0, eol);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  // HTTP/1.x SP 3DIGIT [SP reason]
  if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[8] != ' ') {
    return {StatusLineState::kMalformed, 0};
  }
  if (line[7] < '0' || line[7] > '9') return {StatusLineState::kMalformed, 0};
  int code = 0;
  for (size_t i = 9; i < 12; ++i) {
    if (line[i] < '0' || line[i] > '9') return {StatusLineState::kMalformed, 0};
    code = code * 10 + (line[i] - '0');
  }
  if (line.size() > 12 && line[12] != ' ') return {StatusLineState::kMalformed, 0};
  if (code < 100) return {StatusLineState::kMalformed, 0};
  return {StatusLineState::kComplete, code};
}

}  // namespace aw::probe
