#include "autoscale/counts.h"

namespace aw::autoscale {
GameServerFacts FactsOf(const policy::GameServerView& gs) {
  GameServerFacts f;
  f.fleet = std::string(gs.Label(kFleetLabel).value_or(""));
  f.allocating = gs.state == "Allocating";
  return f;
}

}  // namespace aw::autoscale
