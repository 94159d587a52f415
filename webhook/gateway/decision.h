// What the gateway does with an allocation it is waiting on, from the GameServer as last seen.
// Pure: no I/O, no clock.
//
// Promise: Decide() maps (the GameServer, the allocation's agones.dev/last-allocated) to
//   kAnswer  the server is Allocated for this allocation: confirmed (outcome Confirmed and
//            `confirmed` equal to the allocation id), or resolved as Allocated on timeout
//            (on-timeout: Allocated, the user's choice), or Allocated without the gate's marks;
//   kRetry   this allocation is lost: the server was deleted, timed out (outcome TimedOut) to
//            Unhealthy/Shutdown, became Unhealthy/Shutdown/Error, went back to Ready/Reserved, or
//            was allocated again by someone else (a newer last-allocated);
//   kWait    anything else: still Allocating, or the copy predates this allocation (an older or
//            missing last-allocated: the watch has not delivered the allocator's write yet).
// `reason` says why, for logs, metrics and the final error message.
// AttemptsLeft() is the retry budget: another allocation is made only while attempts remain and
// the request's deadline has not passed.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "gate/gameserver.h"

namespace aw::gateway {

enum class Verdict { kWait, kAnswer, kRetry };

struct Decision {
  Verdict verdict = Verdict::kWait;
  std::string reason;
};

// `gameserver` (the project's one GameServer view, gate::ParseGameServer) may be null or not
// present (not seen yet); `deleted` when the watch reported its deletion.
Decision Decide(const gate::GameServerView* gameserver, bool deleted,
                std::string_view last_allocated);

bool AttemptsLeft(int attempts_made, int max_attempts, std::chrono::nanoseconds time_left);

}  // namespace aw::gateway
