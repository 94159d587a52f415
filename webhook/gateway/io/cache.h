// GameServerCache: the allocation gateway's one GameServer informer (opted-in servers, one
// namespace or all) with its two handlers: the waiters (WaiterRegistry: its timers on the given
// executor, the process's dispatcher, else on a timer thread of its own) and
// the idempotency keys' index (RequestKeyIndex).
//
// Promise:
//   - Run(ctx) is the component's life as a runnable of runtime::Manager: it starts the waiters'
//     timers (their thread, when they have one) and the informer, reports ready once the informer
//     has listed and synced (so the gateway's listener, in a later group, opens only on a filled
//     cache), and on stop stops the informer and then the waiters (those still waiting complete
//     with "stopped"). Returns OK on stop; it does not fail (the informer retries its list and
//     watch on its own).
//   - Lookup(name) is the cache's objects of that name in every watched namespace (the waiters'
//     and the gateway's lookup); HasSynced() tells the readiness check. Both thread-safe.
//   - waiters() and request_keys() are the handlers, for the gateway to use; they live as long
//     as the cache.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <string>
#include <vector>

#include "gateway/io/request_keys.h"
#include "gateway/io/waiters.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "runtime/manager.h"
#include "util/status.h"

namespace prometheus {
class Registry;
}

namespace aw::gateway {

class GameServerCache {
 public:
  // `watch_namespace`: "" = all namespaces. `timers`: where the waiters' deadline timers run
  // (WaiterRegistry's executor).
  GameServerCache(kube::Client& client, const std::string& watch_namespace,
                  prometheus::Registry* registry, boost::asio::any_io_executor timers = {});
  GameServerCache(const GameServerCache&) = delete;
  GameServerCache& operator=(const GameServerCache&) = delete;

  Status Run(runtime::RunContext& ctx);

  std::vector<kube::ObjectPtr> Lookup(const std::string& name) const;
  bool HasSynced() const;
  WaiterRegistry& waiters() { return waiters_; }
  RequestKeyIndex& request_keys() { return request_keys_; }

 private:
  // The handlers outlive the informer that calls them (declared first, destroyed last).
  WaiterRegistry waiters_;
  RequestKeyIndex request_keys_;
  kube::Informer informer_;
};

}  // namespace aw::gateway
