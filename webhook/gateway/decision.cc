#include "gateway/decision.h"

#include <fmt/format.h>

#include "gate/keys.h"
#include "util/time_format.h"

namespace aw::gateway {
namespace {

using Json = rapidjson::Value;

std::string_view Str(const Json* obj, std::string_view key) {
  if (obj == nullptr || !obj->IsObject()) return {};
  auto it = obj->FindMember(rapidjson::StringRef(key.data(), key.size()));
  if (it == obj->MemberEnd() || !it->value.IsString()) return {};
  return {it->value.GetString(), it->value.GetStringLength()};
}

const Json* Obj(const Json* obj, std::string_view key) {
  if (obj == nullptr || !obj->IsObject()) return nullptr;
  auto it = obj->FindMember(rapidjson::StringRef(key.data(), key.size()));
  if (it == obj->MemberEnd() || !it->value.IsObject()) return nullptr;
  return &it->value;
}

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

Decision Decide(const Json* gs, bool deleted, std::string_view last_allocated) {
  if (deleted) return {Verdict::kRetry, "deleted"};
  if (gs == nullptr) return {Verdict::kWait, "not seen yet"};
  const Json* ann = Obj(Obj(gs, "metadata"), "annotations");
  const std::string_view state = Str(Obj(gs, "status"), "state");
  const int cmp = CompareAllocation(Str(ann, keys::kLastAllocated), last_allocated);
  if (cmp < 0) return {Verdict::kWait, "the allocation is not seen yet"};
  if (cmp > 0) return {Verdict::kRetry, "allocated again by another request"};
  const std::string_view allocation = Str(ann, keys::kAllocation);
  const std::string_view confirmed = Str(ann, keys::kConfirmed);
  const std::string_view outcome = Str(ann, keys::kOutcome);
  if (state == keys::kStateAllocated) {
    if (outcome == keys::kOutcomeConfirmed && !allocation.empty() && confirmed == allocation) {
      return {Verdict::kAnswer, "confirmed"};
    }
    if (outcome == keys::kOutcomeTimedOut) {
      return {Verdict::kAnswer, "timed out, resolved Allocated (on-timeout: Allocated)"};
    }
    return {Verdict::kAnswer, "Allocated"};
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
