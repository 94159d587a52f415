#include "gateway/decision.h"

#include <fmt/format.h>

#include "contract/keys.h"
#include "policy/decision_table.h"
#include "util/time_format.h"

namespace aw::gateway {
namespace {

// -1: `seen` is older than (or missing, or unparsable against) `ours`; 0: equal; 1: newer.
int CompareAllocation(std::string_view seen, std::string_view ours) {
  if (seen == ours) return 0;
  if (seen.empty()) return -1;
  auto a = util::ParseRfc3339(seen);
  auto b = util::ParseRfc3339(ours);
  if (!a || !b) return -1;
  if (*a == *b) return 0;
  return *a < *b ? -1 : 1;
}

}  // namespace

Decision Decide(const policy::GameServerView* gs, bool deleted, std::string_view last_allocated) {
  if (deleted) return {Verdict::kRetry, "deleted"};
  if (gs == nullptr || !gs->present) return {Verdict::kWait, "not seen yet"};
  auto annotation = [gs](std::string_view key) { return gs->Annotation(key).value_or(""); };
  const std::string_view state = gs->state;
  const int cmp = CompareAllocation(annotation(keys::kLastAllocated), last_allocated);
  if (cmp < 0) return {Verdict::kWait, "the allocation is not seen yet"};
  if (cmp > 0) return {Verdict::kRetry, "allocated again by another request"};
  const std::string_view allocation = gs->allocation;
  const std::string_view confirmed = annotation(keys::kConfirmed);
  const std::string_view outcome = annotation(keys::kOutcome);
  if (state == keys::kStateAllocated) {
    if (!gs->OptedIn()) return {Verdict::kAnswer, "Allocated (not opted in to the gate)"};
    // An allocation that bypassed the gate (admission unreachable) is answered only once the
    // resolver has confirmed it after the fact; keys it has not recorded yet are not trusted.
    const policy::Bypass bypass = policy::BypassOf(*gs);
    if (bypass == policy::Bypass::kUnseen) {
      return {Verdict::kWait, "Allocated without passing the gate (admission bypassed)"};
    }
    if (bypass == policy::Bypass::kOpen) {
      return {Verdict::kWait, "bypassed the gate: waiting for the confirmation after the fact"};
    }
    if (outcome == keys::kOutcomeConfirmed && !allocation.empty() && confirmed == allocation) {
      return {Verdict::kAnswer, "confirmed"};
    }
    if (outcome == keys::kOutcomeTimedOut && !allocation.empty() && confirmed == allocation) {
      return {Verdict::kAnswer, "timed out, resolved Allocated (on-timeout: Allocated)"};
    }
    if (outcome == keys::kOutcomeUnconfirmed) {
      return {Verdict::kRetry,
              "timed out (bypassed the gate, not confirmed in time; left Allocated)"};
    }
    return {Verdict::kWait, "Allocated, not confirmed"};
  }
  if (state == keys::kStateAllocating) return {Verdict::kWait, "Allocating"};
  if (state == keys::kStateUnhealthy || state == keys::kStateShutdown ||
      state == keys::kStateError) {
    if (outcome == keys::kOutcomeTimedOut) {
      return {Verdict::kRetry, fmt::format("timed out (not confirmed in time), now {}", state)};
    }
    return {Verdict::kRetry, fmt::format("became {}", state)};
  }
  return {Verdict::kRetry,
          fmt::format("left the allocation ({})", state.empty() ? "no state" : state)};
}

bool AttemptsLeft(int attempts_made, int max_attempts, std::chrono::nanoseconds time_left) {
  return attempts_made < max_attempts && time_left.count() > 0;
}

}  // namespace aw::gateway
