// The resolver's ports implemented on the Kubernetes client (webhook/kube).
//
// Promise:
//   CacheSource     GameServerSource over the watch-backed GameServer cache, whose records are
//                   the views (decoded once per object change, shared, never copied).
//   CacheNotifier   InformerHandler forwarding every change to Resolver::Notify (a deletion with
//                   its last known object, to NotifyDeleted) and every
//                   (re)sync to NotifyAll; it only queues, so the informer's (I/O) thread never
//                   waits.
//   KubePatcher     Patcher on Client::Patch / PatchAsync (application/json-patch+json; the
//                   asynchronous form bounded to --resolver-workers in flight). Errors map as
//                   kube::ApiError::ToStatus does (409 Conflict kConflict; 404 kNotFound;
//                   transport/429/5xx/408 kRetry; other 4xx, AlreadyExists among them, kRejected),
//                   except 422: a failed `test` op, kConflict, unless the message names a schema or
//                   admission refusal.
//   KubeEvents      EventRecorder on kube::EventRecorder (non-blocking, rate-limited).
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "kube/client.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "resolver/core/ports.h"
#include "resolver/resolver.h"
#include "runtime/in_flight.h"
#include "util/io/mutex.h"

namespace aw::resolver {

class CacheSource final : public GameServerSource {
 public:
  explicit CacheSource(const kube::Informer& cache) : cache_(cache) {}
  std::shared_ptr<const GameServerView> Get(const std::string& ns,
                                            const std::string& name) override;
  std::vector<std::shared_ptr<const GameServerView>> List() override;

 private:
  const kube::Informer& cache_;
};

class CacheNotifier final : public kube::InformerHandler {
 public:
  explicit CacheNotifier(Resolver& resolver) : resolver_(resolver) {}
  void OnAdd(const kube::ObjectPtr& obj) override { Upsert(obj); }
  void OnUpdate(const kube::ObjectPtr&, const kube::ObjectPtr& obj) override { Upsert(obj); }
  void OnDelete(const kube::ObjectPtr& last_known) override;
  void OnSynced() override;

 private:
  void Upsert(const kube::ObjectPtr& obj);
  Resolver& resolver_;
};

// Classifies an API error for the resolver as a Status (PatchStatusOf reads it; exposed for tests).
Status ClassifyPatchError(const kube::ApiError& error);

class KubePatcher final : public Patcher {
 public:
  // `max_in_flight`: asynchronous patches sent at once (--resolver-workers); the rest wait in
  // order of arrival (runtime::InFlightLimit). The wait is bounded by the resolver itself: one
  // patch per tracked GameServer at a time (its key is requeued only when the patch completes).
  explicit KubePatcher(kube::Client& client, size_t max_in_flight = 32)
      : client_(client), limit_(max_in_flight) {}
  // Drain() and destroy.
  ~KubePatcher() override;
  // Waits until every patch started or waiting has completed (its callback ran). Not on the
  // client's I/O thread, where the callbacks run: there it aborts with a message naming the rule.
  void Drain();
  // Client::PatchAsync, at most max_in_flight at once; `done` runs on the client's I/O thread.
  void PatchGameServerAsync(const std::string& ns, const std::string& name,
                            const std::string& json_patch,
                            std::function<void(Status)> done) override;
  size_t InFlight() const { return limit_.InFlight(); }
  size_t Waiting() const { return limit_.Waiting(); }

 private:
  kube::Client& client_;
  runtime::InFlightLimit limit_;  // last member: waited for first, while the client is there
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
