// The allocation gateway's wire formats: agones-allocator's REST API (POST /gameserverallocation,
// proto/allocation/allocation.proto served through grpc-gateway with protojson) as far as the
// gateway reads or changes it. Pure: no I/O.
//
// Promise:
//   - ParseAllocationRequest accepts what agones-allocator accepts as far as the gateway reads it
//     (a JSON object; unknown fields ignored, as protojson with DiscardUnknown; `namespace` a
//     string; `metadata`/`metaPatch` objects whose `labels`/`annotations` are string maps) and
//     returns InvalidArgument with the JSON path of the offending value otherwise. The request is
//     forwarded as it came; only the gateway's deadline is read from it.
//   - ParseAllocationResponse reads the allocator's 200 answer: the GameServer's name, and
//     whether the allocation is gated: its metadata labels opt the server in
//     (allocating.agones.dev/enabled "true"), so it is answered only once confirmed, whether the
//     webhook rewrote this allocation or it bypassed the gate (admission unreachable) and is
//     confirmed after the fact (gateway/decision.h); its `source` ("local" or absent for the local
//     cluster; a remote allocator's endpoint when agones-allocator forwarded it under a
//     multi-cluster policy).
//   - RefreshMetadata returns the allocator's answer with metadata.labels/annotations replaced by
//     the GameServer's current ones (so the matchmaker sees `confirmed`/`outcome`); every other
//     field is kept as the allocator wrote it.
//   - Every JSON text (request, answer, error body) nested deeper than kMaxNestingDepth is
//     refused with InvalidArgument before it is parsed (never a crash: the parser recurses).
//   - ErrorBody is grpc-gateway's error body ({"code":N,"message":"...","details":[]}) and
//     HttpStatusOf its mapping of gRPC codes to HTTP statuses (runtime.HTTPStatusFromCode).
#pragma once

#include <rapidjson/document.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "policy/gameserver.h"
#include "util/status.h"

namespace aw::gateway {

// Per-request deadline override: a request header, or an annotation in the request's metadata
// (the annotation is forwarded and lands on the GameServer, like every allocation annotation).
inline constexpr std::string_view kDeadlineHeader = "X-Allocating-Deadline";
inline constexpr std::string_view kDeadlineAnnotation = "allocating.agones.dev/gateway-deadline";

// Deepest nesting of `[`/`{` accepted in any JSON the gateway parses (a real AllocationRequest
// nests about 6 levels; protojson's own limit is 10,000, our parser recurses).
inline constexpr size_t kMaxNestingDepth = 400;

// AllocationResponse.source of a local allocation (allocator.go localAllocationSource).
inline constexpr std::string_view kLocalSource = "local";

// Agones' message for an allocation that found no server (convertStateV1ToError).
inline constexpr std::string_view kNoServerMessage = "there is no available GameServer to allocate";

// gRPC status codes used here (google.golang.org/grpc/codes).
enum class GrpcCode : int {
  kOk = 0,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kResourceExhausted = 8,
  kAborted = 10,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
};

struct AllocationRequest {
  std::string namespace_;  // "" when absent (Agones' default namespace then)
  // From kDeadlineAnnotation in metadata.annotations, when present.
  std::optional<std::chrono::nanoseconds> deadline;
};
Status ParseAllocationRequest(std::string_view body, AllocationRequest* out);

// Parses a Go duration given for the deadline (header or annotation); InvalidArgument naming
// `where` when it is malformed, zero, or above `max`.
Status ParseDeadline(std::string_view text, std::string_view where, std::chrono::nanoseconds max,
                     std::chrono::nanoseconds* out);

struct AllocationResponse {
  std::string game_server_name;
  std::string last_allocated;  // metadata.annotations agones.dev/last-allocated ("" if absent)
  std::string source;          // "" when absent
  bool gated = false;
  // Allocated by another cluster (multi-cluster policy): its GameServer is not in the local watch,
  // so the answer is passed through as it came.
  bool remote = false;
};
Status ParseAllocationResponse(std::string_view body, AllocationResponse* out);

// `gameserver`'s labels and annotations (absent = empty) replace the answer's.
// InvalidArgument when `response_body` is not a JSON object.
Status RefreshMetadata(std::string_view response_body, const policy::GameServerView& gameserver,
                       std::string* out);

std::string ErrorBody(GrpcCode code, std::string_view message);
int HttpStatusOf(GrpcCode code);
// The message of a grpc-gateway error body, or the body itself when it is not one.
std::string ErrorMessageOf(std::string_view body);
// The integer `code` of a grpc-gateway error body, or -1 when it is not one.
int ErrorCodeOf(std::string_view body);

}  // namespace aw::gateway
