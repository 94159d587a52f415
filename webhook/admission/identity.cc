#include "admission/identity.h"

#include <algorithm>

namespace aw::admission {

using policy::Json;
using policy::OptObject;
using policy::OptString;

std::string_view PodServiceAccount(const Json* gameserver, const std::string& path) {
  if (!gameserver || !gameserver->IsObject()) return {};
  const Json* spec = OptObject(*gameserver, "spec", path);
  if (!spec) return {};
  const Json* tmpl = OptObject(*spec, "template", path + ".spec");
  if (!tmpl) return {};
  const Json* pod = OptObject(*tmpl, "spec", path + ".spec.template");
  if (!pod) return {};
  return OptString(*pod, "serviceAccountName", path + ".spec.template.spec").value_or("");
}

std::string_view GameServerNamespace(const ReviewRequest& req, const policy::GameServerView& gs) {
  return gs.namespace_.empty() ? req.namespace_ : gs.namespace_;
}

std::string SdkIdentityOf(const ReviewRequest& req, const policy::GameServerView& gs,
                          const Json* gs_json, const policy::Policy& policy) {
  return policy.SdkIdentity(GameServerNamespace(req, gs),
                            PodServiceAccount(gs_json, "request.object"));
}

bool IsSdkWriter(const ReviewRequest& req, const policy::GameServerView& gs, const Json* gs_json,
                 const policy::Policy& policy) {
  return !req.username.empty() && !GameServerNamespace(req, gs).empty() &&
         req.username == SdkIdentityOf(req, gs, gs_json, policy);
}

policy::Writer WriterOf(const ReviewRequest& req, const policy::Policy& policy) {
  return WriterOf(req.username, policy);
}

policy::Writer WriterOf(std::string_view username, const policy::Policy& policy) {
  // Policy::IsTrusted and IsAgonesController, without a copy of the username.
  auto listed = [username](const std::vector<std::string>& users) {
    return !username.empty() && std::find(users.begin(), users.end(), username) != users.end();
  };
  if (listed(policy.trusted_users)) return policy::Writer::kTrusted;
  if (listed(policy.agones_controller_users)) return policy::Writer::kAgonesController;
  return policy::Writer::kOther;
}

}  // namespace aw::admission
