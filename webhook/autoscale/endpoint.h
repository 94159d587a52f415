// The Buffer autoscaling endpoint's decision for one HTTP request: Agones' Buffer policy with the
// fleet's Allocating GameServers counted as allocated.
//
// Promise: HandleBufferReview(request, counts) never throws and answers, in this order:
//   405  method other than POST (the answer names it; `allow` = "POST");
//   400  parameters (path segments / query, params.h) missing or invalid per buffer.h;
//   415  content type other than application/json (parameters such as charset allowed);
//   413  body over kMaxReviewBytes;
//   400  body not a FleetAutoscaleReview per review.h;
//   503  counts not synced yet (the watch has not listed the GameServers): Agones then leaves the
//        fleet alone for this sync and retries at the next one;
//   200  `{"response":{"uid":<request uid>,"scale":...,"replicas":...}}`:
//        - fleet known (at least one opted-in GameServer carries its `agones.dev/fleet` label), or
//          empty (none, and the review's status.replicas is 0): scale true, replicas =
//          ApplyBuffer(policy, status.allocatedReplicas + Allocating servers of the fleet);
//        - unknown fleet (no opted-in GameServer of it although status.replicas > 0, e.g. a fleet
//          whose template lacks the opt-in label): scale false, replicas =
//          status.replicas (Agones keeps such a fleet at its current size).
//        An empty fleet is computed rather than refused because, for Agones, scale false means
//        "set spec.replicas to status.replicas": a new gated fleet would be scaled to 0 and stay
//        there.
// Every non-200 body is a plain-text message ending in a newline. Pure apart from reading
// `counts` (thread-safe); no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "autoscale/buffer.h"
#include "autoscale/counts.h"

namespace aw::autoscale {

inline constexpr std::string_view kBufferRoute = "/autoscale/buffer";
// A FleetAutoscaleReview is a few hundred bytes plus the fleet's labels and annotations (at most
// 256 KiB in Kubernetes).
inline constexpr size_t kMaxReviewBytes = 1024 * 1024;

struct ReviewHttpRequest {
  std::string_view method;
  std::string_view path;   // before the raw '?'
  std::string_view query;  // after it
  std::string_view content_type;
  std::string_view body;
  bool body_too_large = false;  // the transport already dropped an oversized body
};

enum class ReviewResult { kScaled, kUnknownFleet, kBadRequest, kUnavailable };
std::string_view ResultName(
    ReviewResult r);  // "scaled", "unknown_fleet", "bad_request", "unavailable"

struct ReviewAnswer {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string allow;  // for 405
  ReviewResult result = ReviewResult::kBadRequest;
  // Filled once the review parsed:
  std::string uid, namespace_, fleet;
  // For kScaled and kUnknownFleet: the answer, and what it was computed from.
  int32_t replicas = 0;
  bool limited = false;
  int64_t servers = 0;     // opted-in GameServers of the fleet in the cache
  int64_t allocating = 0;  // of which Allocating
  int32_t allocated = 0;   // the review's status.allocatedReplicas
  std::string message;     // the error, for non-200 answers (without the newline)
};

ReviewAnswer HandleBufferReview(const ReviewHttpRequest& req, const CountsView& counts);

}  // namespace aw::autoscale
