// The admission decisions (docs/design.md, "Admission decisions"), one function per route.
//
// Promise: pure and deterministic functions of the parsed review and the context (policy, CRD
// readiness, clock reading); no I/O. They throw BadRequest for objects of the wrong shape (missing
// object/oldObject where the operation needs one, wrong JSON types) and never otherwise.
// The mutating decision's patch is minimal, applies to the object as sent, and is idempotent: the
// decision re-run on the patched object (same oldObject) yields no patch.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "admission/handler.h"
#include "admission/review.h"
#include "policy/config.h"
#include "policy/gameserver.h"

namespace aw::admission {

// What the mutating decision reads of an UPDATE review, whichever way it was parsed: the document
// path (ParseReview, ParseGameServer) or the one pass (review_scan.h).
struct MutateInput {
  std::string_view username;                 // request.userInfo.username
  std::string_view namespace_;               // request.namespace
  std::string_view name;                     // request.name
  const policy::GameServerView& object;      // request.object, as ParseGameServer kStrict reads it
  const policy::GameServerView& old_object;  // request.oldObject
  // request.object's spec.template.spec.serviceAccountName: read (strictly, may throw BadRequest)
  // from `object_json` when it is set, else `service_account` (the one pass read it).
  const policy::Json* object_json = nullptr;
  std::string_view service_account;
};

// Parses request.object and request.oldObject (kStrict) and decides with the overload below.
Decision MutateGameServer(const ReviewRequest& req, const Context& ctx);
// The gate's decision for an UPDATE (the operation is UPDATE, both objects are present).
Decision MutateGameServer(const MutateInput& in, const Context& ctx);
// The decision for an operation other than UPDATE (not gated).
Decision MutateNotGated(std::string_view operation);
// The validating routes' decision for an operation they do not validate (allowed).
Decision NotValidated(std::string_view operation);
// Parses request.object and, for UPDATE, request.oldObject (kStrict) and decides with the overload
// below.
Decision ValidateGameServer(const ReviewRequest& req, const Context& ctx);

// What /validate/gameservers decides from.
struct ValidateInput {
  std::string_view operation;                // CREATE or UPDATE (others are not validated)
  std::string_view username;                 // request.userInfo.username
  std::string_view namespace_;               // request.namespace
  std::string_view name;                     // request.name
  const policy::GameServerView& object;      // request.object, as ParseGameServer kStrict reads it
  const policy::GameServerView& old_object;  // request.oldObject (UPDATE), else an empty view
  // request.object's spec.ports names and spec.template.spec.serviceAccountName: read (strictly,
  // may throw BadRequest, only when the decision needs them) from `object_json` when it is set,
  // else `port_names` and `service_account` (the one pass read them).
  const policy::Json* object_json = nullptr;
  std::optional<std::vector<std::string_view>> port_names;
  std::string_view service_account;
};
// The decision for CREATE or UPDATE (request.object present, and request.oldObject for UPDATE).
Decision ValidateGameServer(const ValidateInput& in, const Context& ctx);
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
