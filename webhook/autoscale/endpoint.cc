#include "autoscale/endpoint.h"

#include <fmt/format.h>

#include <cctype>
#include <vector>

#include "autoscale/params.h"
#include "autoscale/review.h"
#include "util/text.h"

namespace aw::autoscale {
namespace {

bool IsJson(std::string_view ct) {
  const size_t semi = ct.find(';');
  std::string_view base = ct.substr(0, semi);
  while (!base.empty() && (base.back() == ' ' || base.back() == '\t')) base.remove_suffix(1);
  while (!base.empty() && (base.front() == ' ' || base.front() == '\t')) base.remove_prefix(1);
  constexpr std::string_view kJson = "application/json";
  if (base.size() != kJson.size()) return false;
  for (size_t i = 0; i < base.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(base[i])) != kJson[i]) return false;
  }
  return true;
}

ReviewAnswer Error(int status, ReviewResult result, std::string message) {
  ReviewAnswer a;
  a.status = status;
  a.result = result;
  a.content_type = "text/plain; charset=utf-8";
  a.body = message + "\n";
  a.message = std::move(message);
  return a;
}

}  // namespace

std::string_view ResultName(ReviewResult r) {
  switch (r) {
    case ReviewResult::kScaled:
      return "scaled";
    case ReviewResult::kUnknownFleet:
      return "unknown_fleet";
    case ReviewResult::kBadRequest:
      return "bad_request";
    case ReviewResult::kUnavailable:
      return "unavailable";
  }
  return "unknown";
}

ReviewAnswer HandleBufferReview(const ReviewHttpRequest& req, const CountsView& counts) {
  if (req.method != "POST") {
    ReviewAnswer a =
        Error(405, ReviewResult::kBadRequest,
              fmt::format("method {} not allowed on {}: FleetAutoscaleReviews are POST",
                          util::Clip(req.method, 20), kBufferRoute));
    a.allow = "POST";
    return a;
  }
  std::vector<Param> params;
  BufferPolicy policy;
  if (Status s = SplitParams(kBufferRoute, req.path, req.query, &params); !s.ok()) {
    return Error(400, ReviewResult::kBadRequest, "bad Buffer policy parameters: " + s.message());
  }
  if (Status s = ParseBufferParams(params, &policy); !s.ok()) {
    return Error(400, ReviewResult::kBadRequest, "bad Buffer policy parameters: " + s.message());
  }
  if (!IsJson(req.content_type)) {
    return Error(415, ReviewResult::kBadRequest,
                 fmt::format("content type \"{}\" not supported: FleetAutoscaleReviews are "
                             "application/json",
                             util::Clip(req.content_type, 60)));
  }
  if (req.body_too_large || req.body.size() > kMaxReviewBytes) {
    return Error(413, ReviewResult::kBadRequest,
                 fmt::format("request body larger than {} bytes: not a FleetAutoscaleReview",
                             kMaxReviewBytes));
  }
  AutoscaleRequest review;
  if (Status s = ParseAutoscaleReview(req.body, &review); !s.ok()) {
    return Error(400, ReviewResult::kBadRequest, "bad FleetAutoscaleReview: " + s.message());
  }
  if (!counts.Synced()) {
    ReviewAnswer a = Error(503, ReviewResult::kUnavailable,
                           "the GameServer watch has not synced yet: no Allocating counts to "
                           "answer from; Agones retries at its next sync");
    a.uid = review.uid;
    a.namespace_ = review.namespace_;
    a.fleet = review.name;
    return a;
  }
  ReviewAnswer a;
  a.uid = review.uid;
  a.namespace_ = review.namespace_;
  a.fleet = review.name;
  a.allocated = review.status.allocated_replicas;
  const FleetCount c = counts.Lookup(review.namespace_, review.name);
  a.servers = c.servers;
  if (c.servers == 0 && review.status.replicas > 0) {
    a.result = ReviewResult::kUnknownFleet;
    a.replicas = review.status.replicas;
    a.body = BuildAutoscaleResponse(review.uid, false, a.replicas);
    return a;
  }
  a.allocating = c.allocating;
  const BufferResult r =
      ApplyBuffer(policy, int64_t{review.status.allocated_replicas} + c.allocating);
  a.result = ReviewResult::kScaled;
  a.replicas = r.replicas;
  a.limited = r.limited;
  a.body = BuildAutoscaleResponse(review.uid, true, r.replicas);
  return a;
}

}  // namespace aw::autoscale
