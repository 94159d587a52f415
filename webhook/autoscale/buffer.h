// Agones' Buffer autoscaling policy, as a pure function, with its parameters read from a URL.
//
// Promise:
//   - ParseBufferParams reads `bufferSize`, `minReplicas` and `maxReplicas` from the parameters of
//     one request (see params.h for where they come from) and checks them with the rules of
//     Agones' own FleetAutoscaler validation (autoscaling/v1 BufferPolicy.ValidateBufferPolicy):
//       bufferSize: an integer > 0, or a percentage "N%" with 1 <= N <= 99 (required);
//       maxReplicas: required; >= bufferSize when bufferSize is an integer;
//       minReplicas: default 0; <= maxReplicas; when non-zero and bufferSize is an integer,
//                    >= bufferSize; >= 1 when bufferSize is a percentage.
//     Any other parameter, a repeated one, or a value that is not a decimal integer in int32 range
//     is an InvalidArgument whose message names the parameter and the value.
//   - ApplyBuffer computes what Agones' Buffer policy (pkg/fleetautoscalers applyBufferPolicy)
//     computes for a fleet with `allocated` allocated replicas:
//       integer buffer:    replicas = allocated + bufferSize
//       percentage buffer: replicas = ceil(allocated * 100 / (100 - bufferSize%))
//     then raised to minReplicas / lowered to maxReplicas, `limited` telling that a bound applied.
//     The arithmetic is in 64 bits (Agones multiplies in int32; the answers agree wherever Agones'
//     does not overflow, i.e. below 21,474,837 allocated replicas).
// No I/O, no allocation beyond the error messages; thread-safe (no state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/status.h"

namespace aw::autoscale {

struct BufferPolicy {
  int32_t buffer_size = 0;  // replicas, or percent when `percent`
  bool percent = false;
  int32_t min_replicas = 0;
  int32_t max_replicas = 0;
};

// One request parameter, already percent-decoded: name and value.
using Param = std::pair<std::string, std::string>;

// Reads and validates the policy from `params` (in order; a repeated name is an error).
Status ParseBufferParams(const std::vector<Param>& params, BufferPolicy* out);

// Agones' validation of a Buffer policy (the rules above), for a policy built in code.
Status ValidateBufferPolicy(const BufferPolicy& p);

struct BufferResult {
  int32_t replicas = 0;
  bool limited = false;  // minReplicas or maxReplicas applied
};

// `allocated` >= 0: the replicas that count as allocated.
BufferResult ApplyBuffer(const BufferPolicy& p, int64_t allocated);

// "5", or "20%".
std::string BufferSizeText(const BufferPolicy& p);

}  // namespace aw::autoscale
