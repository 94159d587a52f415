#include "server/core/http_limits.h"

#include <fmt/format.h>

namespace aw::server {

HeadProblem ClassifyHeadOverflow(std::optional<size_t> parsed_request_line,
                                 std::string_view buffered, const RequestLimits& limits) {
  if (parsed_request_line) {
    return *parsed_request_line > limits.max_request_line_bytes ? HeadProblem::kRequestLineTooLong
                                                                : HeadProblem::kHeaderTooLarge;
  }
  // The request line ends at the first CRLF (a bare LF is tolerated by parsers too).
  const size_t window = std::min(buffered.size(), limits.max_request_line_bytes + 2);
  const size_t eol = buffered.substr(0, window).find('\n');
  if (eol == std::string_view::npos) return HeadProblem::kRequestLineTooLong;
  const size_t line = (eol > 0 && buffered[eol - 1] == '\r') ? eol - 1 : eol;
  if (line > limits.max_request_line_bytes) return HeadProblem::kRequestLineTooLong;
  return HeadProblem::kHeaderTooLarge;
}

HeadProblem CheckHead(size_t request_line_bytes, size_t head_bytes, size_t header_count,
                      const RequestLimits& limits) {
  if (request_line_bytes > limits.max_request_line_bytes) return HeadProblem::kRequestLineTooLong;
  if (head_bytes > limits.max_header_bytes) return HeadProblem::kHeaderTooLarge;
  if (header_count > limits.max_header_count) return HeadProblem::kTooManyHeaders;
  return HeadProblem::kNone;
}

int StatusOf(HeadProblem problem) {
  switch (problem) {
    case HeadProblem::kNone:
      return 200;
    case HeadProblem::kRequestLineTooLong:
      return 414;
    case HeadProblem::kHeaderTooLarge:
    case HeadProblem::kTooManyHeaders:
      return 431;
  }
  return 400;
}

std::string MessageOf(HeadProblem problem, const RequestLimits& limits) {
  switch (problem) {
    case HeadProblem::kNone:
      return "ok\n";
    case HeadProblem::kRequestLineTooLong:
      return fmt::format("request line longer than the limit of {} bytes\n",
                         limits.max_request_line_bytes);
    case HeadProblem::kHeaderTooLarge:
      return fmt::format("request header fields larger than the limit of {} bytes\n",
                         limits.max_header_bytes);
    case HeadProblem::kTooManyHeaders:
      return fmt::format("more request header fields than the limit of {}\n",
                         limits.max_header_count);
  }
  return "bad request\n";
}

BodyPlan PlanBody(std::optional<uint64_t> content_length, bool expect_continue,
                  const RequestLimits& limits) {
  if (!content_length || *content_length <= limits.max_body_bytes) return BodyPlan::kRead;
  // The client waits for 100 Continue before sending: it will not send the body after a 413.
  if (expect_continue) return BodyPlan::kRefuseThenClose;
  if (*content_length - limits.max_body_bytes > limits.max_discard_bytes) {
    return BodyPlan::kRefuseThenClose;
  }
  return BodyPlan::kRefuseThenDiscard;
}

}  // namespace aw::server
