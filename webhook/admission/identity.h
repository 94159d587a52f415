// Who wrote an admission request, in the gate's terms (docs/design.md, "Admission decisions"): the
// resolver and the admin-listed identities (trusted), the Agones controller, and the GameServer's
// own SDK sidecar.
//
// Promise: pure functions of the parsed request and the policy; throw BadRequest only for a
// GameServer whose spec.template.spec.serviceAccountName has the wrong JSON type.
#pragma once

#include <string>
#include <string_view>

#include "admission/review.h"
#include "policy/decision_table.h"
#include "policy/gameserver.h"
#include "policy/policy.h"

namespace aw::admission {

// spec.template.spec.serviceAccountName of a GameServer object ("" when absent). Agones runs the
// pod (and so the SDK sidecar) as the SDK service account only when the template names none.
std::string_view PodServiceAccount(const policy::Json* gameserver, const std::string& path);

// The namespace of the GameServer under review: metadata.namespace, else request.namespace.
std::string_view GameServerNamespace(const ReviewRequest& req, const policy::GameServerView& gs);

// The username of the SDK sidecar of the GameServer `gs` (object JSON `gs_json`).
std::string SdkIdentityOf(const ReviewRequest& req, const policy::GameServerView& gs,
                          const policy::Json* gs_json, const policy::Policy& policy);

// Whether the request comes from that SDK identity.
bool IsSdkWriter(const ReviewRequest& req, const policy::GameServerView& gs,
                 const policy::Json* gs_json, const policy::Policy& policy);

// The writer class of the request: trusted (policy.trusted_users), else the Agones controller
// (policy.agones_controller_users), else other.
policy::Writer WriterOf(const ReviewRequest& req, const policy::Policy& policy);
// The same for a username (request.userInfo.username), without a copy of it.
policy::Writer WriterOf(std::string_view username, const policy::Policy& policy);

}  // namespace aw::admission
