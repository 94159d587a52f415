// What the autoscaling answer needs to know about GameServers, without holding any of them.
//
// Promise:
//   - FactsOf(gameserver) reads the fleet (label `agones.dev/fleet`, "" when absent or not a
//     string) and whether `status.state` is "Allocating"; never throws, whatever the document.
//   - CountsView is what HandleBufferReview reads: per (namespace, fleet) how many opted-in
//     GameServers carry that fleet label (`servers`) and how many of them are Allocating (both 0
//     for a fleet never seen), and whether the first full list has been seen (Synced). The store
//     that a watch fills (autoscale/io/fleet_counts.h) implements it; tests may implement it too.
// No I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "policy/gameserver.h"

namespace aw::autoscale {

inline constexpr std::string_view kFleetLabel = "agones.dev/fleet";

struct GameServerFacts {
  std::string fleet;  // "" = not part of a fleet
  bool allocating = false;
};

GameServerFacts FactsOf(const policy::GameServerView& gameserver);

struct FleetCount {
  int64_t servers = 0;
  int64_t allocating = 0;
};

class CountsView {
 public:
  virtual ~CountsView() = default;
  virtual bool Synced() const = 0;
  virtual FleetCount Lookup(std::string_view ns, std::string_view fleet) const = 0;
};

}  // namespace aw::autoscale
