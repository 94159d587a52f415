#include "server/core/eviction.h"

namespace aw::server {

std::optional<uint64_t> ChooseVictim(std::span<const ConnSnapshot> open) {
  const ConnSnapshot* idle = nullptr;
  const ConnSnapshot* oldest = nullptr;
  const ConnSnapshot* waiting = nullptr;
  auto earlier = [](const ConnSnapshot* best, const ConnSnapshot& c) {
    return best == nullptr || c.since < best->since;
  };
  for (const ConnSnapshot& c : open) {
    if (c.phase == ConnPhase::kIdle) {
      if (earlier(idle, c)) idle = &c;
    } else if (c.phase == ConnPhase::kWaiting) {
      if (earlier(waiting, c)) waiting = &c;
    } else if (earlier(oldest, c)) {
      oldest = &c;
    }
  }
  if (idle != nullptr) return idle->id;
  if (oldest != nullptr) return oldest->id;
  if (waiting != nullptr) return waiting->id;
  return std::nullopt;
}

}  // namespace aw::server
