// The allocation gateway's "no server lost" marks and idempotency keys, as pure functions
// (docs/gateway.md, "No server lost"; docs/design.md, "The allocation gateway's answer").
//
// Promise (pure: no clock, socket or file; times are passed in):
//   - ValidateIdempotencyKey: a key is 1..kMaxIdempotencyKeyLength characters of
//     [A-Za-z0-9._~:-] (safe as an annotation value and in a log line); InvalidArgument naming the
//     header and the rule otherwise.
//   - WithGatewayAnnotations: the AllocationRequest `body` (already accepted by
//     ParseAllocationRequest) with metadata.annotations carrying allocating.agones.dev/answer-by =
//     `answer_by` and, when `request_key` is not empty, allocating.agones.dev/request-key =
//     `request_key` (Agones merges the allocation's metadata into the GameServer in the
//     allocation's own write). A request that sets any of answer-by, request-key or delivered
//     itself is refused (InvalidArgument naming the key): those are the gateway's. Every other
//     field is kept.
//   - HoldsRequest: whether a GameServer carrying a request's key still holds that request's
//     allocation: opted in, not being deleted, in state Allocating or Allocated, and not released
//     (outcome Undelivered). A retry with the key waits on (or is answered with) such a server.
//   - AnswerFromGameServer: an AllocationResponse JSON (agones-allocator's REST answer, every
//     field present as EmitUnpopulated writes it) built from the GameServer object, for a retried
//     request answered from the server an earlier attempt allocated.
//   - `delivered` holds the deliveries of the current allocation, comma-separated (each an RFC 3339
//     time with nanoseconds, unique per answer): several calls may answer the same server (the
//     attempts of one idempotency key), and one that could not write its answer takes back only
//     its own delivery. DeliveriesOf splits the value.
//   - DeliveredPatch / UndeliveredPatch / AnswerByPatch: the gateway's writes (RFC 6902).
//     DeliveredPatch and UndeliveredPatch are compare-and-swap writes on the object read at
//     `resource_version` (whose `delivered` was `current`): DeliveredPatch also tests status.state
//     == Allocated (a server the resolver released is never marked, and a release decided before
//     the mark fails on the resolver's own resourceVersion test), and appends `delivered_at`;
//     UndeliveredPatch removes `delivered_at` from the list and, when none is left, removes
//     `delivered` and sets answer-by (the resolver then releases the server after its grace).
//     AnswerByPatch sets answer-by (moved to now when nobody will get the server, or to a retry's
//     deadline when a retry waits on it); with `expected`, only while answer-by is still that
//     value (the releasing call's own: a retry that has since taken the server over keeps it).
#pragma once

#include <rapidjson/document.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "policy/gameserver.h"
#include "util/status.h"

namespace aw::gateway {

inline constexpr std::string_view kIdempotencyKeyHeader = "X-Allocating-Idempotency-Key";
inline constexpr size_t kMaxIdempotencyKeyLength = 128;

Status ValidateIdempotencyKey(std::string_view key);

Status WithGatewayAnnotations(std::string_view body, std::string_view answer_by,
                              std::string_view request_key, std::string* out);

bool HoldsRequest(const policy::GameServerView& gs);

// `gameserver` is the GameServer object; InvalidArgument when it is not an object.
Status AnswerFromGameServer(const policy::GameServerView& gameserver, std::string* out);

std::vector<std::string> DeliveriesOf(std::string_view value);
std::string DeliveredPatch(std::string_view resource_version, std::string_view current,
                           std::string_view delivered_at);
std::string UndeliveredPatch(std::string_view resource_version, std::string_view current,
                             std::string_view delivered_at, std::string_view answer_by);
std::string AnswerByPatch(std::string_view answer_by, std::string_view expected = {});

}  // namespace aw::gateway
