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
//   - DeliveredPatch / UndeliveredPatch / AnswerByPatch: the gateway's writes (RFC 6902).
//     DeliveredPatch tests status.state == Allocated, then adds `delivered` = `delivered_at` (so
//     a server the resolver already released is never marked, and a release decided before the
//     mark fails on the resolver's resourceVersion test). UndeliveredPatch tests that `delivered`
//     is still `delivered_at` (the mark of the answer that was not written: a later call's mark
//     on the same server, e.g. an idempotent retry's, is never taken back), removes it and sets
//     answer-by. AnswerByPatch sets answer-by (moved to now when nobody will get the server, or
//     to a retry's deadline when a retry waits on it); with `expected`, only while answer-by is
//     still that value (the releasing call's own: a retry that has since taken the server over
//     with its own deadline keeps it).
#pragma once

#include <rapidjson/document.h>

#include <cstddef>
#include <string>
#include <string_view>

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
Status AnswerFromGameServer(const rapidjson::Value& gameserver, std::string* out);

std::string DeliveredPatch(std::string_view delivered_at);
std::string UndeliveredPatch(std::string_view delivered_at, std::string_view answer_by);
std::string AnswerByPatch(std::string_view answer_by, std::string_view expected = {});

}  // namespace aw::gateway
