// A watch-backed cache of one kind of object (client-go "informer" semantics, simplified).
//
// Promise: after Start(), the informer lists the objects (paginated), then watches from the list's
// resourceVersion with bookmarks, and keeps an in-memory copy keyed by namespace/name. It holds no
// thread: it is a state machine of asynchronous calls (Client::ListAllAsync, WatchAsync) and a
// steady_timer on the client's I/O executor. Handlers see each change exactly once, in order, on
// that I/O thread, so they MUST NOT block (no waiting for a Client call's answer, no waiting on
// I/O, no join: the answers need that very thread); queue longer work elsewhere:
//   OnAdd(obj)          object new (ADDED, or found on a re-list)
//   OnUpdate(old, obj)  its resourceVersion changed (MODIFIED, or changed on a re-list); old is
//                       the cached copy it replaces. A resync re-delivers OnUpdate(obj, obj).
//   OnDelete(obj)       object gone (DELETED, or missing from a re-list); obj: the last known copy
//   OnSynced()          a full (re)list was applied: the cache equals the server at that point
// When the watch expires (410 as HTTP status or as an ERROR event), the server restarts, or the
// connection drops, the informer re-watches from the resourceVersion of the last event applied or
// re-lists and delivers only the difference (no lost and no duplicated state). Reconnects wait a
// capped exponential backoff with jitter (a timer). Every `resync` period (0 = off) each cached
// object is re-delivered (a safety net; checked when an event or bookmark arrives or the watch
// restarts, so its precision is about a minute: keep precise timers elsewhere). Stop(), from any
// thread but the I/O thread (never from a handler), cancels the in-flight list/watch and the
// timer and waits (at most ~10 s) until no callback of this informer runs or is pending.
// Snapshot()/Get()/WaitForSync() are thread-safe and cheap (shared immutable objects).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kube/backoff.h"
#include "kube/client.h"
#include "policy/gameserver.h"
#include "util/io/mutex.h"

namespace prometheus {
class Registry;
template <typename T>
class Family;
class Counter;
class Gauge;
}  // namespace prometheus

namespace aw::kube {

// One cached object. Immutable once published.
//   - InformerOptions::decode == kDocument: the identity fields (namespace_, name, uid,
//     resource_version) and `doc`, the whole object as the API server returned it.
//   - kGameServer: the compact GameServer record (policy::GameServerView: every field the
//     resolver, the gateway, the autoscaler's counts and the metrics read), decoded from the
//     list/watch bytes without a document (policy/gameserver_stream.h); `doc` is null.
//     managedFields, spec and every other field are never stored: a write that needs more of the
//     object reads it from the API server.
struct CachedObject : policy::GameServerView {
  JsonPtr doc;
};
using ObjectPtr = std::shared_ptr<const CachedObject>;

class InformerHandler {
 public:
  virtual ~InformerHandler() = default;
  // Called on the client's I/O thread: never block there (queue work elsewhere), never call
  // Stop() here.
  virtual void OnAdd(const ObjectPtr& obj) = 0;
  // `old` is the cached copy `obj` replaces (the same object for a resync).
  virtual void OnUpdate(const ObjectPtr& old, const ObjectPtr& obj) = 0;
  virtual void OnDelete(const ObjectPtr& last_known) = 0;
  virtual void OnSynced() {}
};

struct InformerOptions {
  std::string name = "informer";  // for logs and the metric label
  // How objects are decoded and kept (CachedObject): kGameServer pages the list one page at a
  // time, applying each page as it comes, and watches raw (a line that is not a GameServer event
  // is skipped, counted and logged, and the next regular end of the watch re-lists instead of
  // resuming, so that the skipped change is not missed for long).
  enum class Decode { kDocument, kGameServer };
  Decode decode = Decode::kDocument;
  Resource resource;
  std::string namespace_;  // "" = all namespaces
  std::string label_selector;
  std::string field_selector;
  int64_t page_size = 500;
  std::chrono::seconds resync{0};
  // A failed list or watch is retried after 200 ms, doubling, at most every 10 s (±20%): after an
  // API server outage of any length the cache asks again within ~10 s of its return (with
  // client-go's 30 s cap, up to 30 s), at the cost of one request per 10 s per informer while it
  // is down.
  std::chrono::milliseconds backoff_initial{200};
  std::chrono::milliseconds backoff_max{10000};
  int watch_timeout_seconds = 300;  // randomised in [t, 2t) per watch like client-go
  // kGameServer: a watch event longer than this is skipped (etcd stores objects up to 1.5 MiB).
  size_t max_event_bytes = 16 * 1024 * 1024;
};

class Informer {
 public:
  // `registry` may be null. Metrics: allocating_webhook_kube_watch_restarts_total{informer,reason},
  // allocating_webhook_kube_informer_objects{informer}, allocating_webhook_kube_informer_bytes
  // {informer} (kGameServer; 0 for kDocument), allocating_webhook_kube_watch_events_skipped_total
  // {informer,reason} (reason: undecodable, oversized, not_a_gameserver; at 0 from the start).
  Informer(Client& client, InformerOptions opts, prometheus::Registry* registry = nullptr);
  virtual ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  void AddHandler(InformerHandler* h);  // before Start(); not owned; must outlive the informer
  void Start();
  // Idempotent; cancels the in-flight call and the timer and waits (bounded) for their callbacks.
  // Not from the I/O thread (a handler): it would wait for itself.
  void Stop();
  bool HasSynced() const { return synced_.load(); }
  // Waits until the first list was applied (or timeout / Stop). Returns HasSynced().
  bool WaitForSync(std::chrono::milliseconds timeout);
  std::vector<ObjectPtr> Snapshot() const EXCLUDES(mu_);
  ObjectPtr Get(const std::string& ns, const std::string& name) const EXCLUDES(mu_);
  // Every cached object with this name, whatever its namespace (one pass over the cache).
  std::vector<ObjectPtr> GetByName(const std::string& name) const EXCLUDES(mu_);
  // Objects held and (kGameServer) their estimated bytes: records, strings and index.
  size_t Size() const EXCLUDES(mu_);
  size_t Bytes() const EXCLUDES(mu_);

 private:
  // What the in-flight calls' and the timer's callbacks share with the informer: they outlive it
  // only as far as a Stop() that timed out, and then find `stopped` and touch nothing else.
  struct Core;
  // Runs `f` on the I/O thread as one pending step of `core` unless it has stopped.
  template <typename F>
  auto Step(const std::shared_ptr<Core>& core, F f);
  void List(const std::shared_ptr<Core>& core);
  void OnListed(const std::shared_ptr<Core>& core, Result<ListResult> res);
  // kGameServer: one page applied as it comes; the list's end deletes what no page held.
  void OnPage(const ListPage& page);
  void OnPagesDone(const std::shared_ptr<Core>& core, Result<std::string> res);
  // The end of a (re)list, both modes: OnSynced, WaitForSync, then the watch.
  void Synced(const std::shared_ptr<Core>& core, size_t objects, int pages);
  ObjectPtr Decode(std::string_view json, const char* where);
  void Skip(const std::string& reason, std::string_view why);
  void Watch(const std::shared_ptr<Core>& core);
  bool OnEvent(WatchEvent& ev);
  void OnWatchEnd(const std::shared_ptr<Core>& core, Result<std::string> res);
  // Waits `d` on the timer, then runs `next` (unless stopped).
  void After(const std::shared_ptr<Core>& core, std::chrono::milliseconds d,
             void (Informer::*next)(const std::shared_ptr<Core>&));
  // Returns false when the object has no name (skipped).
  bool ApplyUpsert(ObjectPtr obj);
  void ApplyDelete(const ObjectPtr& obj);
  size_t BytesOf(const CachedObject& o) const;
  void ResyncAll();
  void MaybeResync();
  void CountRestart(const std::string& reason);

  Client& client_;
  InformerOptions opts_;
  std::vector<InformerHandler*> handlers_;
  mutable Mutex mu_;
  struct Slot {
    ObjectPtr obj;
    uint64_t list = 0;  // the list attempt that last held it (kGameServer's re-list)
  };
  std::map<std::string, Slot> store_ GUARDED_BY(mu_);  // key ns/name
  size_t bytes_ GUARDED_BY(mu_) = 0;
  std::atomic<bool> synced_{false};
  // wait_cv_ wakes WaitForSync when synced_ changes or the informer stops (written under wait_mu_
  // so that a waiter cannot miss the change between its test and its sleep).
  Mutex wait_mu_;
  CondVar wait_cv_;
  bool stopped_ GUARDED_BY(wait_mu_) = false;
  Mutex core_mu_;
  std::shared_ptr<Core> core_ GUARDED_BY(core_mu_);  // of the current run; null when stopped
  // I/O thread only (one step runs at a time):
  Backoff backoff_;
  std::chrono::steady_clock::time_point last_resync_;
  std::chrono::steady_clock::time_point watch_started_;
  std::string rv_;       // where the next watch starts
  std::string seen_rv_;  // of the last event the current watch applied (a bookmark included)
  uint64_t list_ = 0;    // the current list attempt (kGameServer)
  size_t listed_ = 0;    // objects its pages held
  int pages_ = 0;
  bool relist_ = false;  // a watch event was skipped: re-list at the watch's next end
  prometheus::Family<prometheus::Counter>* restarts_ = nullptr;
  prometheus::Gauge* objects_ = nullptr;
  prometheus::Gauge* bytes_gauge_ = nullptr;
  prometheus::Family<prometheus::Counter>* skipped_ = nullptr;
};

}  // namespace aw::kube
