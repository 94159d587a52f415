#include "policy/policy.h"

#include <algorithm>

namespace aw::policy {

bool Policy::IsTrusted(const std::string& user) const {
  return !user.empty() &&
         std::find(trusted_users.begin(), trusted_users.end(), user) != trusted_users.end();
}

bool Policy::IsAgonesController(const std::string& user) const {
  return !user.empty() && std::find(agones_controller_users.begin(), agones_controller_users.end(),
                                    user) != agones_controller_users.end();
}

std::string Policy::SdkIdentity(std::string_view namespace_,
                                std::string_view pod_service_account) const {
  std::string id = "system:serviceaccount:";
  id.append(namespace_);
  id.push_back(':');
  id.append(pod_service_account.empty() ? std::string_view(sdk_service_account)
                                        : pod_service_account);
  return id;
}

}  // namespace aw::policy
