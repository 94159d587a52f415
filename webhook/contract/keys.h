// The user-facing contract: label, annotation keys, state names and their defaults
// (docs/design.md, "The contract"). Every component refers to these constants; no key is spelled
// twice.
#pragma once

#include <array>
#include <string_view>

namespace aw::keys {

inline constexpr std::string_view kPrefix = "allocating.agones.dev/";

// Opt-in label (value must be "true").
inline constexpr std::string_view kEnabledLabel = "allocating.agones.dev/enabled";

// User configuration annotations.
inline constexpr std::string_view kTimeout = "allocating.agones.dev/timeout";
inline constexpr std::string_view kOnTimeout = "allocating.agones.dev/on-timeout";
inline constexpr std::string_view kMode = "allocating.agones.dev/mode";
// What the Agones controller's Shutdown of an Allocating server does (scale-down, rolling update):
// "Shutdown" (default: applied, outcome ScaledDown) or "Hold" (kept Allocating until resolved).
inline constexpr std::string_view kOnScaleDown = "allocating.agones.dev/on-scale-down";
// What the resolver does with a gated server the allocation gateway allocated and never delivered
// to a client (answer-by passed by the grace, no `delivered`): "Shutdown" (default) or
// "Unhealthy" (docs/gateway.md, "No server lost").
inline constexpr std::string_view kOnUndelivered = "allocating.agones.dev/on-undelivered";
inline constexpr std::string_view kRequireAnnotation = "allocating.agones.dev/require-annotation";
inline constexpr std::string_view kProbePort = "allocating.agones.dev/probe-port";
inline constexpr std::string_view kProbeType = "allocating.agones.dev/probe-type";
inline constexpr std::string_view kProbePath = "allocating.agones.dev/probe-path";
inline constexpr std::string_view kProbePeriod = "allocating.agones.dev/probe-period";

// Readiness annotation written by the game server through SDK SetAnnotation("allocating-ready",
// id).
inline constexpr std::string_view kSdkReady = "agones.dev/sdk-allocating-ready";
// Written by the Agones allocator on every allocation (RFC 3339 with nanoseconds).
inline constexpr std::string_view kLastAllocated = "agones.dev/last-allocated";

// Project-owned annotations (written only by the webhook's own rewrite or a trusted identity).
inline constexpr std::string_view kSince = "allocating.agones.dev/since";
inline constexpr std::string_view kAllocation = "allocating.agones.dev/allocation";
inline constexpr std::string_view kConfirmed = "allocating.agones.dev/confirmed";
inline constexpr std::string_view kOutcome = "allocating.agones.dev/outcome";
// Set by the webhook when it held back the Agones controller's Shutdown of an Allocating server
// (on-scale-down: Hold): the RFC 3339 time of that request. The Shutdown is then applied when
// the server leaves the allocation cycle (docs/design.md, scale-down).
inline constexpr std::string_view kShutdownRequested = "allocating.agones.dev/shutdown-requested";
// Set by the resolver on an opted-in GameServer that reached Allocated without passing the gate
// (admission was unreachable and the webhook configuration's failurePolicy is Ignore): the
// allocation id of the bypassed allocation (docs/operations.md, "Admission bypass").
inline constexpr std::string_view kBypassed = "allocating.agones.dev/bypassed";

// Written by the allocation gateway (docs/gateway.md, "No server lost"). `answer-by` (RFC 3339):
// the time by which the gateway answers the request that allocated the server; it arrives with
// the allocation (the request's metadata.annotations) and the gateway moves it to now when the
// client is gone. `request-key`: the request's idempotency key (X-Allocating-Idempotency-Key).
// `delivered` (RFC 3339): the gateway is sending the server to its client. A gated server with
// `answer-by` passed by the resolver's grace and no `delivered` is released (on-undelivered).
inline constexpr std::string_view kAnswerBy = "allocating.agones.dev/answer-by";
inline constexpr std::string_view kRequestKey = "allocating.agones.dev/request-key";
inline constexpr std::string_view kDelivered = "allocating.agones.dev/delivered";

// Every project-owned annotation, in a stable order.
inline constexpr std::array<std::string_view, 6> kOwnedAnnotations = {
    kSince, kAllocation, kConfirmed, kOutcome, kShutdownRequested, kBypassed};

// GameServer states that matter here.
inline constexpr std::string_view kStateAllocating = "Allocating";
inline constexpr std::string_view kStateAllocated = "Allocated";
inline constexpr std::string_view kStateReady = "Ready";
inline constexpr std::string_view kStateReserved = "Reserved";
inline constexpr std::string_view kStateShutdown = "Shutdown";
inline constexpr std::string_view kStateUnhealthy = "Unhealthy";
inline constexpr std::string_view kStateError = "Error";

// Outcome annotation values.
inline constexpr std::string_view kOutcomeConfirmed = "Confirmed";
inline constexpr std::string_view kOutcomeTimedOut = "TimedOut";
// Written by the webhook when it lets the Agones controller's Shutdown of an Allocating server
// through (on-scale-down: Shutdown): the allocation was abandoned before it was confirmed.
inline constexpr std::string_view kOutcomeScaledDown = "ScaledDown";
// A bypassed allocation not confirmed by its deadline: left Allocated (players may already be on
// the server), never confirmed.
inline constexpr std::string_view kOutcomeUnconfirmed = "Unconfirmed";
// A server the gateway allocated and never delivered (answer-by passed, no delivered): released
// by the resolver with on-undelivered.
inline constexpr std::string_view kOutcomeUndelivered = "Undelivered";

}  // namespace aw::keys
