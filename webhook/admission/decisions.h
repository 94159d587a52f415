// The admission decisions of DESIGN.md section 3, one function per route.
//
// Promise: pure and deterministic functions of the parsed review and the context (policy, CRD
// readiness, clock reading); no I/O. They throw BadRequest for objects of the wrong shape (missing
// object/oldObject where the operation needs one, wrong JSON types) and never otherwise.
// The mutating decision's patch is minimal, applies to the object as sent, and is idempotent: the
// decision re-run on the patched object (same oldObject) yields no patch.
#pragma once

#include "admission/gate_config.h"
#include "admission/handler.h"
#include "admission/json_view.h"
#include "admission/review.h"

namespace aw::admission {

Decision MutateGameServer(const ReviewRequest& req, const Context& ctx);
Decision ValidateGameServer(const ReviewRequest& req, const Context& ctx);
// Fleets and GameServerSets: spec.template.metadata.
Decision ValidateTemplateOwner(const ReviewRequest& req, const Context& ctx);
Decision ValidateGameServerAllocation(const ReviewRequest& req, const Context& ctx);

// The allocation id for a GameServer entering Allocating: agones.dev/last-allocated when this
// update set it (present and different from the old object's value), else `since`.
// Exposed for the resolver and tests.
std::optional<std::string_view> FreshLastAllocated(const GameServerView& old_gs,
                                                   const GameServerView& new_gs);

// When the configured probe-port is a name that none of `port_names` (spec.ports[].name) carries:
// the message naming the key, the value and the known names. std::nullopt otherwise (also when the
// port is a number or the names are unknown).
std::optional<std::string> ProbePortMismatch(const GateConfig& cfg,
                                             const std::optional<std::vector<std::string_view>>& port_names);

// The project-owned annotation keys (since, allocation, confirmed, outcome).
const std::vector<std::string_view>& OwnedAnnotationKeys();

}  // namespace aw::admission
