#include "server/eviction.h"

namespace aw::server {

std::optional<uint64_t> ChooseVictim(std::span<const ConnSnapshot> open) {
  const ConnSnapshot* idle = nullptr;
  const ConnSnapshot* oldest = nullptr;
  for (const ConnSnapshot& c : open) {
    if (c.phase == ConnPhase::kIdle) {
      if (idle == nullptr || c.since < idle->since) idle = &c;
    } else if (oldest == nullptr || c.since < oldest->since) {
      oldest = &c;
    }
  }
  if (idle != nullptr) return idle->id;
  if (oldest != nullptr) return oldest->id;
  return std::nullopt;
}

}  // namespace aw::server
