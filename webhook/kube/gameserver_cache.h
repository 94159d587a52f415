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
//   for (const kube::ObjectPtr& gs : cache.Snapshot()) { const rapidjson::Document& d = *gs->doc; }
//   cache.Stop();
//
// obj->doc is the full GameServer JSON (metadata.labels/annotations, status.state, status.address,
// status.ports...) and obj->resource_version is what an optimistic-concurrency patch must test.
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
  return o;
}

class GameServerCache final : public Informer {
 public:
  GameServerCache(Client& client, prometheus::Registry* registry, std::string namespace_ = "")
      : Informer(client, GameServerCacheOptions(std::move(namespace_)), registry) {}
};

}  // namespace aw::kube
