// What the gateway does with an allocation it is waiting on, from the GameServer as last seen.
// Pure: no I/O, no clock.
//
// Promise: Decide() maps (the GameServer, the allocation's agones.dev/last-allocated) to
//   kAnswer  the server is Allocated for this allocation and either not opted in to the gate, or
//            confirmed (outcome Confirmed and `confirmed` equal to the allocation id, also when
//            the resolver confirmed a bypassed allocation after the fact), or resolved as
//            Allocated on timeout (outcome TimedOut with `confirmed`: on-timeout Allocated, the
//            user's choice);
//   kRetry   this allocation is lost: the server was deleted, timed out (outcome TimedOut) to
//            Unhealthy/Shutdown, became Unhealthy/Shutdown/Error, went back to Ready/Reserved,
//            was allocated again by someone else (a newer last-allocated), or its allocation
//            bypassed the gate and was not confirmed by its deadline (outcome Unconfirmed: the
//            server is left Allocated);
//   kWait    anything else: still Allocating, an opted-in server Allocated without a
//            confirmation (a bypass of the gate not yet recorded or confirmed by the resolver), or
//            the copy predates this allocation (an older or missing last-allocated: the watch
//            has not delivered the allocator's write yet).
// `reason` says why, for logs, metrics and the final error message.
// AttemptsLeft() is the retry budget: another allocation is made only while attempts remain and
// the request's deadline has not passed.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "policy/gameserver.h"

namespace aw::gateway {

enum class Verdict { kWait, kAnswer, kRetry };

struct Decision {
  Verdict verdict = Verdict::kWait;
  std::string reason;
};

// `gameserver` (the project's one GameServer view, policy::ParseGameServer) may be null or not
// present (not seen yet); `deleted` when the watch reported its deletion.
Decision Decide(const policy::GameServerView* gameserver, bool deleted,
                std::string_view last_allocated);

bool AttemptsLeft(int attempts_made, int max_attempts, std::chrono::nanoseconds time_left);

}  // namespace aw::gateway
