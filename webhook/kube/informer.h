// A watch-backed cache of one kind of object (client-go "informer" semantics, simplified).
//
// Promise: after Start(), a background thread lists the objects (paginated), then watches from
// the list's resourceVersion with bookmarks, and keeps an in-memory copy keyed by
// namespace/name. Handlers see each change exactly once, in order, on that thread:
//   OnUpsert(obj)  object new, or its resourceVersion changed (ADDED / MODIFIED / found on re-list)
//   OnDelete(obj)  object gone (DELETED, or missing from a re-list); obj is the last known copy
//   OnSynced()     a full (re)list was applied: the cache equals the server at that point
// When the watch expires (410 as HTTP status or as an ERROR event), the server restarts, or the
// connection drops, the informer re-watches from the last seen resourceVersion or re-lists and
// delivers only the difference (no lost and no duplicated state). Reconnects use capped
// exponential backoff with jitter. Every `resync` period (0 = off) each cached object is
// re-delivered to OnUpsert (a safety net; checked when an event or bookmark arrives or the watch
// restarts, so its precision is about a minute: keep precise timers elsewhere). Stop() cancels the
// in-flight list/watch and returns within ~1s.
// Snapshot()/Get() are thread-safe and cheap (shared immutable objects).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "util/io/mutex.h"

namespace prometheus {
class Registry;
template <typename T>
class Family;
class Counter;
class Gauge;
}  // namespace prometheus

namespace aw::kube {

// One cached object. Immutable once published: never modify `doc`.
struct CachedObject {
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string resource_version;
  JsonPtr doc;  // the full object as the API server returned it
};
using ObjectPtr = std::shared_ptr<const CachedObject>;

class InformerHandler {
 public:
  virtual ~InformerHandler() = default;
  // Called on the informer thread; keep them short (queue work elsewhere). Never call Stop() here.
  virtual void OnUpsert(const ObjectPtr& obj) = 0;
  virtual void OnDelete(const ObjectPtr& last_known) = 0;
  virtual void OnSynced() {}
};

struct InformerOptions {
  std::string name = "informer";  // for logs and the metric label
  Resource resource;
  std::string namespace_;  // "" = all namespaces
  std::string label_selector;
  std::string field_selector;
  int64_t page_size = 500;
  std::chrono::seconds resync{0};
  std::chrono::milliseconds backoff_initial{200};
  std::chrono::milliseconds backoff_max{30000};
  int watch_timeout_seconds = 300;  // randomised in [t, 2t) per watch like client-go
};

class Informer {
 public:
  // `registry` may be null. Metrics: allocating_webhook_kube_watch_restarts_total{informer,reason},
  // allocating_webhook_kube_informer_objects{informer}.
  Informer(Client& client, InformerOptions opts, prometheus::Registry* registry = nullptr);
  virtual ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  void AddHandler(InformerHandler* h);  // before Start(); not owned; must outlive the informer
  void Start();
  void Stop();  // idempotent; joins the thread
  bool HasSynced() const { return synced_.load(); }
  // Waits until the first list was applied (or timeout / Stop). Returns HasSynced().
  bool WaitForSync(std::chrono::milliseconds timeout);
  std::vector<ObjectPtr> Snapshot() const EXCLUDES(mu_);
  ObjectPtr Get(const std::string& ns, const std::string& name) const EXCLUDES(mu_);
  // Every cached object with this name, whatever its namespace (one pass over the cache).
  std::vector<ObjectPtr> GetByName(const std::string& name) const EXCLUDES(mu_);

 private:
  void Run();
  bool Relist();  // returns false when stopping or on error
  enum class WatchEnd { kRewatch, kRelist, kError };
  WatchEnd WatchOnce(std::string* rv);
  void ApplyUpsert(JsonPtr doc);
  void ApplyDelete(const JsonPtr& doc);
  void ResyncAll();
  bool SleepFor(std::chrono::milliseconds d);  // false when stopping
  void CountRestart(const std::string& reason);

  Client& client_;
  InformerOptions opts_;
  std::vector<InformerHandler*> handlers_;
  mutable Mutex mu_;
  std::map<std::string, ObjectPtr> store_ GUARDED_BY(mu_);  // key ns/name
  std::atomic<bool> synced_{false};
  std::atomic<bool> stop_{false};
  // wait_cv_ wakes WaitForSync and SleepFor when synced_ or stop_ change (atomics, written under
  // wait_mu_ so that a waiter cannot miss the change between its test and its sleep).
  Mutex wait_mu_;
  CondVar wait_cv_;
  std::thread thread_;
  std::chrono::steady_clock::time_point last_resync_;
  std::string resume_rv_;
  Cancellation cancel_;  // aborts the in-flight list/watch on Stop()
  prometheus::Family<prometheus::Counter>* restarts_ = nullptr;
  prometheus::Gauge* objects_ = nullptr;
};

}  // namespace aw::kube
