// The resolver's ports implemented on the Kubernetes client (webhook/kube).
//
// Promise:
//   CacheSource     GameServerSource over the watch-backed GameServer cache; parsed views are
//                   memoised per resourceVersion (one parse per object change). Loop thread only.
//   CacheNotifier   InformerHandler forwarding every change to Resolver::Notify (a deletion with
//                   its last known object, to NotifyDeleted) and every
//                   (re)sync to NotifyAll; it only queues, so the informer thread never waits.
//   KubePatcher     Patcher on Client::Patch (application/json-patch+json). Errors map as
//                   kube::ApiError::ToStatus does (409 Conflict kConflict; 404 kNotFound;
//                   transport/429/5xx/408 kRetry; other 4xx, AlreadyExists among them, kRejected),
//                   except 422: a failed `test` op, kConflict, unless the message names a schema or
//                   admission refusal.
//   KubeEvents      EventRecorder on kube::EventRecorder (non-blocking, rate-limited).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "kube/client.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "resolver/core/ports.h"
#include "resolver/resolver.h"

namespace aw::resolver {

class CacheSource final : public GameServerSource {
 public:
  explicit CacheSource(const kube::Informer& cache) : cache_(cache) {}
  std::shared_ptr<const GameServerView> Get(const std::string& ns,
                                            const std::string& name) override;
  std::vector<std::shared_ptr<const GameServerView>> List() override;

 private:
  std::shared_ptr<const GameServerView> View(const kube::ObjectPtr& obj);
  const kube::Informer& cache_;
  std::map<std::string, std::shared_ptr<const GameServerView>> memo_;  // key -> latest view
};

class CacheNotifier final : public kube::InformerHandler {
 public:
  explicit CacheNotifier(Resolver& resolver) : resolver_(resolver) {}
  void OnUpsert(const kube::ObjectPtr& obj) override;
  void OnDelete(const kube::ObjectPtr& last_known) override;
  void OnSynced() override;

 private:
  Resolver& resolver_;
};

// Classifies an API error for the resolver as a Status (PatchStatusOf reads it; exposed for tests).
Status ClassifyPatchError(const kube::ApiError& error);

class KubePatcher final : public Patcher {
 public:
  explicit KubePatcher(kube::Client& client) : client_(client) {}
  Status PatchGameServer(const std::string& ns, const std::string& name,
                         const std::string& json_patch) override;

 private:
  kube::Client& client_;
};

class KubeEvents final : public EventRecorder {
 public:
  explicit KubeEvents(kube::EventRecorder& recorder) : recorder_(recorder) {}
  void Record(const GameServerView& gs, EventType type, const std::string& reason,
              const std::string& message) override;

 private:
  kube::EventRecorder& recorder_;
};

}  // namespace aw::resolver
