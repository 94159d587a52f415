// The resolver as one component of the binary: its flags, and the composition of the GameServer
// cache, the prober, the patch workers and the loop on top of the Kubernetes client.
//
// Promise: RegisterResolverFlags binds --probe-timeout, --probe-concurrency, --resync-period,
// --udp-probe-payload, --resolver-workers and --resolver-namespace; ValidateResolverFlags reports
// an inconsistent setting (e.g. a probe timeout not below the default probe period) as one
// message. ResolverService provides a runtime::Service and a runtime::Runnable (manager.h):
// CacheRunnable() runs the GameServer cache on every replica (a standby keeps a warm cache);
// LoopRunnable() runs the resolver loop, to be added with needs_leader so it runs only while this
// replica leads (it first waits up to 2 s for the cache's first list, so its first pass sees every
// server). AddCacheHandler lets another reader of the same GameServers (the autoscale counts) share
// the cache's one LIST+WATCH. The service must outlive the manager that runs them.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "policy/policy.h"
#include "runtime/manager.h"
#include "util/flags.h"

namespace prometheus {
class Registry;
}
namespace aw::kube {
class Client;
class EventRecorder;
class GameServerCache;
class InformerHandler;
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
  size_t workers = 32;     // concurrent patches
  std::string namespace_;  // "" = all namespaces
  std::chrono::nanoseconds undelivered_grace = std::chrono::seconds(3);
};

void RegisterResolverFlags(flags::FlagSet& fs, ResolverFlags* f);
Status ValidateResolverFlags(const ResolverFlags& f, const policy::Policy& policy);

class ResolverService {
  struct PassKey {
    explicit PassKey() = default;
  };

 public:
  // The service, or the error that refused one of its parts (the prober's event loop).
  // `probes`: where the prober runs (the process's dispatcher, which must outlive the service);
  // empty: a thread of the prober's own.
  static StatusOr<std::unique_ptr<ResolverService>> Create(
      ResolverFlags flags, const policy::Policy& policy, kube::Client& client,
      kube::EventRecorder& events, prometheus::Registry& registry,
      boost::asio::any_io_executor probes = {});
  // Use Create().
  ResolverService(PassKey, std::unique_ptr<probe::SocketProber> prober, ResolverFlags flags,
                  const policy::Policy& policy, kube::Client& client, kube::EventRecorder& events,
                  prometheus::Registry& registry);
  ~ResolverService();

  std::unique_ptr<runtime::Service> CacheRunnable();
  // Another handler of the GameServer cache (before the manager starts it; not owned, must
  // outlive this service), so that one LIST+WATCH serves every reader of these objects.
  void AddCacheHandler(kube::InformerHandler* handler);
  // True when the cache holds the opted-in GameServers of every namespace.
  bool CacheWatchesAllNamespaces() const;
  std::unique_ptr<runtime::Runnable> LoopRunnable();
  // The loop's liveness (Resolver::Stalled): for the health server's /healthz. Thread-safe.
  std::optional<std::string> Stalled() const;

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
};

}  // namespace aw::resolver
