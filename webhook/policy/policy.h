// Policy: the admin-set knobs that admission decisions depend on (from command-line flags).
//
// Pure data. Owned by the server, passed by const reference into every decision.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace aw::policy {

struct Policy {
  // Usernames (request.userInfo.username) allowed to promote Allocating -> Allocated and to
  // write the project-owned annotations. The resolver's service account belongs here.
  std::vector<std::string> trusted_users;
  // Usernames of the Agones controller: its Allocating -> Shutdown is not applied (scale-down
  // protection: the mutating webhook keeps the server Allocating, the update succeeds).
  std::vector<std::string> agones_controller_users{
      "system:serviceaccount:agones-system:agones-controller"};
  // The service account the Agones SDK sidecar runs as when a GameServer's pod template names
  // none (Agones' Helm value agones.serviceaccount.sdk.name). The SDK identity of a GameServer in
  // namespace NS is system:serviceaccount:NS:<its spec.template.spec.serviceAccountName, or this>.
  std::string sdk_service_account = "agones-sdk";

  // Defaults and bounds for the per-GameServer configuration annotations.
  std::chrono::nanoseconds default_timeout = std::chrono::seconds(30);
  std::chrono::nanoseconds min_timeout = std::chrono::seconds(1);
  std::chrono::nanoseconds max_timeout = std::chrono::minutes(10);
  std::chrono::nanoseconds default_probe_period = std::chrono::milliseconds(250);
  std::chrono::nanoseconds min_probe_period = std::chrono::milliseconds(50);
  std::chrono::nanoseconds max_probe_period = std::chrono::seconds(60);

  bool IsTrusted(const std::string& user) const;
  bool IsAgonesController(const std::string& user) const;
  // The username of the SDK sidecar of a GameServer in `namespace_` whose pod template names
  // `pod_service_account` ("" when it names none).
  std::string SdkIdentity(std::string_view namespace_, std::string_view pod_service_account) const;
};

}  // namespace aw::policy
