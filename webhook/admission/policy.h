// Policy: the admin-set knobs that admission decisions depend on (from command-line flags).
//
// Pure data. Owned by the server, passed by const reference into every decision.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace aw::admission {

struct Policy {
  // Usernames (request.userInfo.username) allowed to promote Allocating -> Allocated and to
  // write the project-owned annotations. The resolver's service account belongs here.
  std::vector<std::string> trusted_users;
  // Usernames of the Agones controller: denied Allocating -> Shutdown (scale-down protection).
  std::vector<std::string> agones_controller_users{
      "system:serviceaccount:agones-system:agones-controller"};

  // Defaults and bounds for the per-GameServer configuration annotations.
  std::chrono::nanoseconds default_timeout = std::chrono::seconds(30);
  std::chrono::nanoseconds min_timeout = std::chrono::seconds(1);
  std::chrono::nanoseconds max_timeout = std::chrono::minutes(10);
  std::chrono::nanoseconds default_probe_period = std::chrono::milliseconds(250);
  std::chrono::nanoseconds min_probe_period = std::chrono::milliseconds(50);
  std::chrono::nanoseconds max_probe_period = std::chrono::seconds(60);

  bool IsTrusted(const std::string& user) const;
  bool IsAgonesController(const std::string& user) const;
};

}  // namespace aw::admission
