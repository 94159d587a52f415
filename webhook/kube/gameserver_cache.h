// The watch-backed cache of opted-in GameServers, for the resolver.
//
// Promise: an Informer over agones.dev/v1 gameservers restricted to the opt-in label
// `allocating.agones.dev/enabled=true` (in one namespace, or all when namespace is ""). Everything
// in informer.h applies; in short, for the resolver:
//
//   kube::GameServerCache cache(client, &registry);      // all namespaces
//   cache.AddHandler(&my_handler);   // OnAdd / OnUpdate / OnDelete / OnSynced, on the I/O thread
//   cache.Start();
//   ...
//   for (const kube::ObjectPtr& gs : cache.Snapshot()) { std::string_view s = gs->state; }
//   cache.Stop();
//
// Each object is the compact GameServer record (InformerOptions::Decode::kGameServer: a
// policy::GameServerView decoded from the list/watch bytes, with no document and no managedFields
// or spec kept), and obj->resource_version is what an optimistic-concurrency patch must test.
// The cache never writes; the resolver writes through kube::Client::Patch and sees its own write
// come back through OnUpdate.
#pragma once

#include "contract/keys.h"
#include "kube/informer.h"

namespace aw::kube {

inline InformerOptions GameServerCacheOptions(std::string namespace_ = "") {
  InformerOptions o;
  o.name = "gameservers";
  o.resource = kGameServers;
  o.namespace_ = std::move(namespace_);
  o.label_selector = std::string(keys::kEnabledLabel) + "=true";
  o.decode = InformerOptions::Decode::kGameServer;
  return o;
}

class GameServerCache final : public Informer {
 public:
  GameServerCache(Client& client, prometheus::Registry* registry, std::string namespace_ = "")
      : Informer(client, GameServerCacheOptions(std::move(namespace_)), registry) {}
};

}  // namespace aw::kube
