#include "resolver/kube_adapters.h"

#include <algorithm>
#include <cctype>

#include "runtime/io_thread.h"

namespace aw::resolver {

std::shared_ptr<const GameServerView> CacheSource::Get(const std::string& ns,
                                                       const std::string& name) {
  return cache_.Get(ns, name);  // the cached record is the view
}

std::vector<std::shared_ptr<const GameServerView>> CacheSource::List() {
  std::vector<kube::ObjectPtr> all = cache_.Snapshot();
  return {all.begin(), all.end()};
}

void CacheNotifier::Upsert(const kube::ObjectPtr& obj) {
  if (obj) resolver_.Notify(obj->namespace_, obj->name);
}

void CacheNotifier::OnDelete(const kube::ObjectPtr& last_known) {
  if (!last_known) return;
  resolver_.NotifyDeleted(last_known->namespace_, last_known->name, last_known);
}

void CacheNotifier::OnSynced() { resolver_.NotifyAll(); }

Status ClassifyPatchError(const kube::ApiError& error) {
  // One mapping (kube::ApiError::ToStatus, client-go's: 409 Conflict is kConflict, 409
  // AlreadyExists and 422 Invalid are refusals) with one rule of its own: these patches carry
  // `test` ops, and a failed `test` op comes back as 422, often with only a generic message. The
  // outcome states (Allocated, Unhealthy, Shutdown) are in the CRD enum and the values are plain
  // strings, so a 422 means the object changed under us unless the message names a schema or
  // admission refusal.
  if (error.IsInvalid()) {
    std::string msg = error.message;
    std::transform(msg.begin(), msg.end(), msg.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (msg.find("unsupported value") == std::string::npos &&
        msg.find("invalid value") == std::string::npos &&
        msg.find("admission webhook") == std::string::npos) {
      return Status::Conflict(error.ToString());
    }
  }
  return error.ToStatus();
}

KubePatcher::~KubePatcher() { Drain(); }

void KubePatcher::Drain() {
  // The patches' callbacks run on the client's I/O thread: waiting for them there never ends.
  runtime::DieIfOn(client_.executor(), "KubePatcher::Drain");
  limit_.WaitIdle();
}

void KubePatcher::PatchGameServerAsync(const std::string& ns, const std::string& name,
                                       const std::string& json_patch,
                                       std::function<void(Status)> done) {
  limit_.Submit([this, ns, name, json_patch,
                 done = std::move(done)](runtime::InFlightLimit::Release release) mutable {
    client_.PatchAsync(
        kube::kGameServers, ns, name, kube::PatchType::kJson, json_patch,
        [done = std::move(done), release = std::move(release)](kube::Result<kube::JsonPtr> r) {
          done(r.ok() ? Status::Ok() : ClassifyPatchError(r.error()));
          release();  // last: Drain may return once every slot is free
        });
  });
}

void KubeEvents::Record(const GameServerView& gs, EventType type, const std::string& reason,
                        const std::string& message) {
  kube::ObjectReference ref;
  ref.namespace_ = gs.namespace_;
  ref.name = gs.name;
  ref.uid = gs.uid;
  ref.resource_version = gs.resource_version;
  recorder_.Record(
      ref, type == EventType::kWarning ? kube::EventType::kWarning : kube::EventType::kNormal,
      reason, message);
}

}  // namespace aw::resolver
