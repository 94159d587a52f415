// AdmissionPipeline: the HTTP semantics of one admission request, independent of sockets.
//
// Promise: given a request already read off the wire (route, method, content type, body or the
// fact that it was too large), returns the HTTP answer, and records exactly one metrics sample and
// one structured log line per admission request:
//   - content type other than application/json (parameters such as charset allowed) -> 415;
//   - body larger than the limit -> 413;
//   - otherwise admission::Handle decides (200 with an AdmissionReview, or 400 for a malformed
//     review); an exception or an internal error -> 500, logged at error level and counted.
// Every non-200 answer carries a plain-text message ending in a newline. Thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "admission/handler.h"
#include "admission/io/metrics.h"
#include "contract/crd_state.h"
#include "policy/policy.h"

namespace aw::admission {

struct HttpAnswer {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

inline constexpr size_t kDefaultMaxBodyBytes = 7 * 1024 * 1024;  // 7 MiB

class AdmissionPipeline {
 public:
  AdmissionPipeline(const policy::Policy& policy, const contract::CrdReadiness& crd,
                    AdmissionMetrics& metrics, size_t max_body_bytes = kDefaultMaxBodyBytes);

  HttpAnswer Serve(admission::Route route, std::string_view content_type, std::string_view body,
                   bool body_too_large);

  size_t max_body_bytes() const { return max_body_bytes_; }

  // Plain-text answers used by the transport for requests that never reach a route.
  static HttpAnswer Text(int status, std::string message);

 private:
  const policy::Policy& policy_;
  const contract::CrdReadiness& crd_;
  AdmissionMetrics& metrics_;
  const size_t max_body_bytes_;
};

// True for "application/json" with optional parameters, case-insensitively.
bool IsJsonContentType(std::string_view content_type);

}  // namespace aw::admission
