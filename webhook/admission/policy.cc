#include "admission/policy.h"

#include <algorithm>

namespace aw::admission {

bool Policy::IsTrusted(const std::string& user) const {
  return !user.empty() && std::find(trusted_users.begin(), trusted_users.end(), user) !=
                              trusted_users.end();
}

bool Policy::IsAgonesController(const std::string& user) const {
  return !user.empty() && std::find(agones_controller_users.begin(), agones_controller_users.end(),
                                    user) != agones_controller_users.end();
}

}  // namespace aw::admission
