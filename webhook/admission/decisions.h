// The admission decisions (docs/design.md, "Admission decisions"), one function per route.
//
// Promise: pure and deterministic functions of the parsed review and the context (policy, CRD
// readiness, clock reading); no I/O. They throw BadRequest for objects of the wrong shape (missing
// object/oldObject where the operation needs one, wrong JSON types) and never otherwise.
// The mutating decision's patch is minimal, applies to the object as sent, and is idempotent: the
// decision re-run on the patched object (same oldObject) yields no patch.
#pragma once

#include "admission/handler.h"
#include "admission/review.h"
#include "policy/config.h"
#include "policy/gameserver.h"

namespace aw::admission {

Decision MutateGameServer(const ReviewRequest& req, const Context& ctx);
Decision ValidateGameServer(const ReviewRequest& req, const Context& ctx);
// Fleets and GameServerSets: spec.template.metadata.
Decision ValidateTemplateOwner(const ReviewRequest& req, const Context& ctx);
Decision ValidateGameServerAllocation(const ReviewRequest& req, const Context& ctx);

// The preamble both validating decisions share: CREATE and UPDATE are validated (std::nullopt:
// go on), any other operation is allowed as "not validated" (the Decision to return); throws
// BadRequest when request.object, or for UPDATE request.oldObject, is missing.
std::optional<Decision> SkipUnlessCreateOrUpdate(const ReviewRequest& req);

// When the configured probe-port is a name that none of `port_names` (spec.ports[].name) carries:
// the message naming the key, the value and the known names. std::nullopt otherwise (also when the
// port is a number or the names are unknown).
std::optional<std::string> ProbePortMismatch(
    const policy::GateConfig& cfg, const std::optional<std::vector<std::string_view>>& port_names);

}  // namespace aw::admission
