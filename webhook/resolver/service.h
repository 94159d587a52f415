// The resolver as one component of the binary: its flags, and the composition of the GameServer
// cache, the prober, the patch workers and the loop on top of the Kubernetes client.
//
// Promise: RegisterResolverFlags binds --probe-timeout, --probe-concurrency, --resync-period,
// --udp-probe-payload, --resolver-workers and --resolver-namespace; ValidateResolverFlags reports
// an inconsistent setting (e.g. a probe timeout not below the default probe period) as one
// message. ResolverService::Start() starts the cache and the prober on every replica (a standby
// keeps a warm cache); StartLeading()/StopLeading() run the loop only while this replica leads
// (wire them to the leader-election callbacks); Stop() stops everything. Thread-safe calls.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "gate/policy.h"
#include "util/flags.h"

namespace prometheus {
class Registry;
}
namespace aw::kube {
class Client;
class EventRecorder;
class GameServerCache;
}  // namespace aw::kube
namespace aw::probe {
class SocketProber;
}

namespace aw::resolver {

struct ResolverFlags {
  std::chrono::nanoseconds probe_timeout = std::chrono::milliseconds(200);
  size_t probe_concurrency = 256;
  std::chrono::nanoseconds resync_period = std::chrono::seconds(30);
  std::string udp_probe_payload = "ping";
  size_t workers = 32;           // concurrent patches
  std::string namespace_;        // "" = all namespaces
};

void RegisterResolverFlags(flags::FlagSet& fs, ResolverFlags* f);
std::optional<std::string> ValidateResolverFlags(const ResolverFlags& f,
                                                 const gate::Policy& policy);

class ResolverService {
 public:
  ResolverService(ResolverFlags flags, const gate::Policy& policy, kube::Client& client,
                  kube::EventRecorder& events, prometheus::Registry& registry);
  ~ResolverService();

  void Start();
  void StartLeading();
  void StopLeading();
  void Stop();

 private:
  struct Parts;
  std::mutex mu_;
  std::unique_ptr<Parts> parts_;
};

}  // namespace aw::resolver
