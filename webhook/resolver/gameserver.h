// The resolver's names for the gate's GameServer view (gate/gameserver.h: the one view, read here
// in Parse::kLenient mode so that a malformed object can never crash the resolver) and its clock.
#pragma once

#include "gate/gameserver.h"

namespace aw::resolver {

using Clock = gate::Clock;
using TimePoint = gate::TimePoint;
using gate::GameServerView;
using gate::ParseGameServer;
using gate::PortView;

}  // namespace aw::resolver
