// FleetAutoscaleReview (autoscaling.agones.dev/v1): the body Agones' Webhook policy POSTs, and the
// answer it reads back.
//
// What Agones sends (pkg/fleetautoscalers applyWebhookPolicy; Go's encoding/json of the struct,
// so no apiVersion/kind and `"response":null`):
//   {"request":{"uid":"<uuid>","name":"<fleet>","namespace":"<ns>",
//               "status":{"replicas":N,"readyReplicas":N,"reservedReplicas":N,
//                         "allocatedReplicas":N, "players":..., "counters":..., "lists":...},
//               "labels":{...},"annotations":{...}},          (labels/annotations: optional)
//    "response":null}
// What it reads: `response.scale` (false: the fleet is set to its current status.replicas) and
// `response.replicas`; any status other than 200 is an error for that sync (the fleet is left
// alone and the FleetAutoscaler reports ableToScale: false).
//
// Promise: ParseAutoscaleReview accepts exactly such a body and fills `out`, or returns an
// InvalidArgument whose message names the field (`request.status.allocatedReplicas is -1: ...`):
// not one JSON object, JSON nesting deeper than 64 levels, a NUL byte, a duplicate key anywhere
// (Go keeps the last, this parser would see the first), `apiVersion`/`kind` present with other
// values than autoscaling.agones.dev/v1 / FleetAutoscaleReview, `request` missing or not an object,
// `uid`, `name` or `namespace` missing, empty or not strings, `status` missing or not an object,
// `status.replicas` or `status.allocatedReplicas` missing, and any of the four counts that is not
// an integer in [0, 2^31-1]. Unknown fields are ignored (Agones adds fields over releases).
// BuildAutoscaleResponse renders the answer: apiVersion, kind and
// `{"response":{"uid":...,"scale":...,"replicas":...}}` with the uid JSON-escaped.
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/status.h"

namespace aw::autoscale {

struct FleetStatusCounts {
  int32_t replicas = 0;
  int32_t ready_replicas = 0;
  int32_t reserved_replicas = 0;
  int32_t allocated_replicas = 0;
};

struct AutoscaleRequest {
  std::string uid;
  std::string name;        // the Fleet
  std::string namespace_;  // the Fleet's namespace
  FleetStatusCounts status;
};

Status ParseAutoscaleReview(std::string_view body, AutoscaleRequest* out);

std::string BuildAutoscaleResponse(std::string_view uid, bool scale, int32_t replicas);

}  // namespace aw::autoscale
