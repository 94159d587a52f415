// The resolver's decision for one GameServer: a pure function of the object, its gate config,
// the latest probe result and the current time.
//
// Promise (docs/design.md, "The contract" and "Decision tables"): the verdict is the rule of
// policy::ResolveRules() that the server matches, and a timeout's action is
// policy::TimeoutAction().
//   - kIgnore: not opted in, being deleted, or not in state Allocating: nothing to do.
//   - kPromote: every configured check passes: the readiness annotation
//     agones.dev/sdk-allocating-ready equals allocating.agones.dev/allocation (when
//     require-annotation; "true" counts only when agones.dev/last-allocated is absent), and the
//     latest probe of the current target, taken for the current allocation, succeeded (when
//     probe-port is set). Readiness wins over a deadline that passed at the same moment.
//   - kTimeOut: not ready and now >= deadline (since + timeout): apply config.on_timeout (Shutdown
//     instead of Unhealthy when the gate held the server's Shutdown: shutdown-requested).
//   - kScaledDown: state Shutdown with outcome ScaledDown: the webhook let the Agones controller's
//     scale-down of the Allocating server through (on-scale-down: Shutdown); only its outcome is
//     left to record (IsScaledDown() is the same test on its own).
//   - kWait: otherwise; `probe` says what to probe next (when a probe is configured and its
//     target resolves) and `deadline` when to give up.
//   Admission bypass (an opted-in server in state Allocated, policy::BypassOf()):
//   - kRecordBypass: the gate never saw this allocation (no `since` or `allocation`): record it.
//     `bypass_allocation` is the allocation id (agones.dev/last-allocated, else `bypass_since`)
//     and `bypass_since` the time it counts from (agones.dev/last-allocated when it parses,
//     else now); `bypass_since_text` is that time as `since` records it (last-allocated's own
//     text when it is used, so the two compare equal as strings).
//   - kConfirmBypass / kBypassDeadline / kWait: a recorded, still open bypass gets the same
//     checks and deadline as an Allocating server; the deadline writes
//     policy::BypassTimeoutAction(on-timeout) (`bypass_action`) and never changes the state.
//   Allocation gateway (docs/gateway.md, "No server lost"; DeliveryOf()): a gated server
//   (Allocating or Allocated) carrying `answer-by` without `delivered` (and not already released,
//   outcome Undelivered) is kRelease once now >= answer-by + `undelivered_grace`: write
//   config.on_undelivered (`release_action`) with outcome Undelivered. Before that an Allocated
//   one is kWait with `deadline` = answer-by + grace (the requeue), an Allocating one waits for
//   the earlier of its deadline and that time.
// `failed` always lists the checks that do not pass, in words fit for a Warning Event.
// Without a parsable `since`, the deadline counts from `first_seen` (when the resolver first saw
// the server Allocating). Without an allocation id nothing can be confirmed (webhook row 4 adds
// it).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "policy/config.h"
#include "policy/decision_table.h"
#include "probe/core/probe.h"
#include "resolver/core/gameserver.h"

namespace aw::resolver {

enum class Verdict {
  kIgnore,
  kWait,
  kPromote,
  kTimeOut,
  kScaledDown,
  kRecordBypass,
  kConfirmBypass,
  kBypassDeadline,
  kRelease
};
std::string_view VerdictName(Verdict v);

// A probe result remembered by the resolver, with what it was for.
struct ProbeObservation {
  std::string allocation;  // allocation id current when the probe was started
  probe::Target target;
  probe::Result result;
};

struct Evaluation {
  Verdict verdict = Verdict::kIgnore;
  policy::OnTimeout action = policy::OnTimeout::kUnhealthy;  // for kTimeOut
  TimePoint deadline{};
  std::optional<probe::Target> probe;  // the probe target, when configured and resolvable
  std::vector<std::string> failed;     // checks that do not pass (empty for kPromote)
  std::string reason;                  // for kIgnore: why
  policy::Bypass bypass = policy::Bypass::kNone;
  std::string bypass_allocation;  // for kRecordBypass
  TimePoint bypass_since{};       // for kRecordBypass
  std::string bypass_since_text;  // for kRecordBypass: bypass_since as written in `since`
  const policy::BypassTimeoutRule* bypass_action = nullptr;  // for kBypassDeadline
  policy::Delivery delivery = policy::Delivery::kNone;
  std::optional<TimePoint> release_at;  // answer-by + grace, while the delivery is pending
  policy::OnUndelivered release_action = policy::OnUndelivered::kShutdown;  // for kRelease
};

// Whether the server waits for the gateway's delivery: it carries `answer-by`, no `delivered`, and
// has not been released (outcome Undelivered). DeliveryOf() is kNone exactly when it does not.
bool AwaitsDelivery(const GameServerView& gs);

// Where the server stands towards the gateway's answer at `now` (policy::Delivery); `release_at`
// (when not null) receives answer-by + grace for a pending one. An answer-by that does not parse
// as RFC 3339 counts as passed (a forged or broken value never keeps a server for nobody).
policy::Delivery DeliveryOf(const GameServerView& gs, TimePoint now, std::chrono::nanoseconds grace,
                            TimePoint* release_at);

// The scale-down row of the resolver's table alone (Evaluate() would answer kScaledDown).
bool IsScaledDown(const GameServerView& gs);

// The readiness-annotation check alone: empty when it passes, else why not.
std::optional<std::string> ReadinessAnnotationProblem(const GameServerView& gs);

// Resolves the probe target from status.address and probe-port (a port name looked up in
// status.ports, or a number). std::nullopt and *problem when it cannot be resolved.
std::optional<probe::Target> ResolveProbeTarget(const GameServerView& gs,
                                                const policy::GateConfig& config,
                                                std::string* problem);

probe::Type ToProbeType(policy::ProbeType t);

inline constexpr std::chrono::nanoseconds kDefaultUndeliveredGrace = std::chrono::seconds(3);

Evaluation Evaluate(const GameServerView& gs, const policy::GateConfig& config,
                    const ProbeObservation* last_probe, TimePoint now, TimePoint first_seen,
                    std::chrono::nanoseconds undelivered_grace = kDefaultUndeliveredGrace);

}  // namespace aw::resolver
