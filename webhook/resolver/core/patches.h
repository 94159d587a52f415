// The resolver's writes, as RFC 6902 JSON patches with an optimistic-concurrency guard.
//
// Promise: pure. Every patch starts with `test /metadata/resourceVersion` (and, when the object
// has an allocation id, `test` of that annotation), so it applies only to the exact object the
// decision was made on: a concurrent change makes the API server refuse it (409/422) and nothing
// is promoted twice or after the allocation changed. Built with the gate's one patch builder
// (policy/json_patch.h), so keys are JSON-Pointer escaped ("/" -> "~1").
//   PromotePatch:  status.state = Allocated, confirmed = <allocation>, outcome = Confirmed.
//   TimeoutPatch:  status.state = <on-timeout>, outcome = TimedOut, and for on-timeout Allocated
//                  also confirmed = <allocation> (so the webhook's promotion rule admits it).
// Admission bypass (state Allocated, never changed by these patches; when admission is up, the
// resolver's trusted identity lets them through the gate's rule for Allocated -> Allocated):
//   RecordBypassPatch:  bypassed = allocation = <id>, since = <since>; a confirmed/outcome the
//                       allocation's metadata may have forged while validation was skipped is
//                       removed.
//   ConfirmBypassPatch: confirmed = <allocation>, outcome = Confirmed.
//   BypassDeadlinePatch: the rule's outcome, and confirmed = <allocation> when it confirms.
// Allocation gateway (a gated server allocated and never delivered):
//   ReleasePatch: status.state = <on-undelivered> (Shutdown or Unhealthy), outcome = Undelivered,
//                 and a test that `delivered` is still absent (a delivery written after the
//                 decision makes the patch fail instead of releasing a delivered server).
#pragma once

#include <string>

#include "policy/config.h"
#include "policy/decision_table.h"
#include "resolver/core/gameserver.h"

namespace aw::resolver {

std::string PromotePatch(const GameServerView& gs);
std::string TimeoutPatch(const GameServerView& gs, policy::OnTimeout action);
std::string RecordBypassPatch(const GameServerView& gs, const std::string& allocation,
                              const std::string& since);
std::string ConfirmBypassPatch(const GameServerView& gs);
std::string BypassDeadlinePatch(const GameServerView& gs, const policy::BypassTimeoutRule& rule);
std::string ReleasePatch(const GameServerView& gs, policy::OnUndelivered action);

}  // namespace aw::resolver
