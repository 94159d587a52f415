// The resolver's names for the gate's GameServer view (policy/gameserver.h: the one view, read here
// in Parse::kLenient mode so that a malformed object can never crash the resolver) and its clock.
#pragma once

#include "policy/gameserver.h"

namespace aw::resolver {

using Clock = policy::Clock;
using TimePoint = policy::TimePoint;
using policy::GameServerView;
using policy::ParseGameServer;
using policy::PortView;

}  // namespace aw::resolver
