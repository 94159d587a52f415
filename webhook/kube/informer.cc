#include "kube/informer.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <random>
#include <set>
#include <utility>

#include "policy/gameserver_stream.h"
#include "util/io/log.h"

namespace aw::kube {
namespace {

std::string Key(const std::string& ns, const std::string& name) { return ns + "/" + name; }

ObjectPtr MakeObject(JsonPtr doc) {
  auto o = std::make_shared<CachedObject>();
  o->namespace_ = MetaString(*doc, "namespace");
  o->name = MetaString(*doc, "name");
  o->uid = MetaString(*doc, "uid");
  o->resource_version = MetaString(*doc, "resourceVersion");
  o->doc = std::move(doc);
  return o;
}

// The store's overhead for one entry beyond the record and its strings: the std::map node (its
// links, the key string, the slot) and make_shared's control block, each block with malloc's own
// ~16 bytes. bench/cache-scale prints this estimate next to the measured RSS per server.
constexpr size_t kEntryOverhead = (32 + sizeof(std::string) + 24 + 16) + (16 + 16);

}  // namespace

struct Informer::Core {
  explicit Core(boost::asio::any_io_executor executor) : ex(executor), timer(executor) {}
  boost::asio::any_io_executor ex;
  boost::asio::steady_timer timer;  // I/O thread only
  Cancellation cancel;              // aborts the in-flight list/watch on Stop()

  bool Stopped() EXCLUDES(mu) {
    MutexLock lk(mu);
    return stopped;
  }
  void Issue() EXCLUDES(mu) {
    MutexLock lk(mu);
    ++pending;
  }
  void Finish() EXCLUDES(mu) {
    {
      MutexLock lk(mu);
      --pending;
    }
    cv.SignalAll();
  }
  void MarkStopped() EXCLUDES(mu) {
    MutexLock lk(mu);
    stopped = true;
  }
  bool WaitIdle(std::chrono::milliseconds timeout) EXCLUDES(mu) {
    MutexLock lk(mu);
    return cv.WaitFor(mu, timeout, [&]() REQUIRES(mu) { return pending == 0; });
  }

  Mutex mu;
  CondVar cv;
  bool stopped GUARDED_BY(mu) = false;
  int pending GUARDED_BY(mu) = 0;  // steps issued (a call, the timer, a post) and not yet run
};

template <typename F>
auto Informer::Step(const std::shared_ptr<Core>& core, F f) {
  core->Issue();
  return [core, f = std::move(f)](auto&&... args) mutable {
    if (!core->Stopped()) f(std::forward<decltype(args)>(args)...);
    core->Finish();
  };
}

Informer::Informer(Client& client, InformerOptions opts, prometheus::Registry* registry)
    : client_(client),
      opts_(std::move(opts)),
      backoff_(opts_.backoff_initial, opts_.backoff_max, 0.2) {
  if (registry) {
    restarts_ = &prometheus::BuildCounter()
                     .Name("allocating_webhook_kube_watch_restarts_total")
                     .Help("Watch streams restarted, by informer and reason (expired = re-list)")
                     .Register(*registry);
    objects_ = &prometheus::BuildGauge()
                    .Name("allocating_webhook_kube_informer_objects")
                    .Help("Objects held by each watch cache")
                    .Register(*registry)
                    .Add({{"informer", opts_.name}});
    bytes_gauge_ = &prometheus::BuildGauge()
                        .Name("allocating_webhook_kube_informer_bytes")
                        .Help("Estimated bytes held by each watch cache (records, strings, index)")
                        .Register(*registry)
                        .Add({{"informer", opts_.name}});
    skipped_ = &prometheus::BuildCounter()
                    .Name("allocating_webhook_kube_watch_events_skipped_total")
                    .Help(
                        "Watch events and list items skipped as not decodable, by informer and "
                        "reason")
                    .Register(*registry);
    for (const char* r : {"undecodable", "oversized", "not_a_gameserver"})
      skipped_->Add({{"informer", opts_.name}, {"reason", r}});
  }
}

Informer::~Informer() { Stop(); }

void Informer::AddHandler(InformerHandler* h) { handlers_.push_back(h); }

void Informer::Start() {
  std::shared_ptr<Core> core;
  {
    MutexLock lk(core_mu_);
    if (core_) return;
    core_ = core = std::make_shared<Core>(client_.executor());
  }
  {
    MutexLock lk(wait_mu_);
    stopped_ = false;
  }
  boost::asio::post(core->ex, Step(core, [this, core] {
                      backoff_.Reset();
                      last_resync_ = std::chrono::steady_clock::now();
                      List(core);
                    }));
}

void Informer::Stop() {
  std::shared_ptr<Core> core;
  {
    MutexLock lk(core_mu_);
    core = std::move(core_);
    core_ = nullptr;
  }
  {
    MutexLock lk(wait_mu_);
    stopped_ = true;
  }
  wait_cv_.SignalAll();
  if (!core) return;
  core->MarkStopped();
  core->cancel.Cancel();
  boost::asio::post(core->ex, [core] { core->timer.cancel(); });
  if (!core->WaitIdle(std::chrono::seconds(10))) {
    log::error("kube: informer callbacks still pending 10s after Stop()",
               {{"informer", opts_.name}});
  }
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) {
  MutexLock lk(wait_mu_);
  wait_cv_.WaitFor(wait_mu_, timeout,
                   [&]() REQUIRES(wait_mu_) { return synced_.load() || stopped_; });
  return synced_.load();
}

std::vector<ObjectPtr> Informer::Snapshot() const {
  MutexLock lk(mu_);
  std::vector<ObjectPtr> out;
  out.reserve(store_.size());
  for (const auto& [k, v] : store_) out.push_back(v.obj);
  return out;
}

ObjectPtr Informer::Get(const std::string& ns, const std::string& name) const {
  MutexLock lk(mu_);
  auto it = store_.find(Key(ns, name));
  return it == store_.end() ? nullptr : it->second.obj;
}

std::vector<ObjectPtr> Informer::GetByName(const std::string& name) const {
  MutexLock lk(mu_);
  std::vector<ObjectPtr> out;
  for (const auto& [k, v] : store_) {
    if (v.obj->name == name) out.push_back(v.obj);
  }
  return out;
}

size_t Informer::Size() const {
  MutexLock lk(mu_);
  return store_.size();
}

size_t Informer::Bytes() const {
  MutexLock lk(mu_);
  return bytes_;
}

size_t Informer::BytesOf(const CachedObject& o) const {
  if (opts_.decode != InformerOptions::Decode::kGameServer) return 0;
  size_t key = o.namespace_.size() + 1 + o.name.size();
  return sizeof(CachedObject) + o.HeapBytes() + kEntryOverhead + (key > 15 ? key + 1 : 0);
}

ObjectPtr Informer::Decode(std::string_view json, const char* where) {
  auto o = std::make_shared<CachedObject>();
  if (Status s = policy::DecodeGameServer(json, o.get()); !s.ok()) {
    Skip("undecodable", std::string(where) + ": " + s.message());
    return nullptr;
  }
  return o;
}

void Informer::Skip(const std::string& reason, std::string_view why) {
  if (skipped_) skipped_->Add({{"informer", opts_.name}, {"reason", reason}}).Increment();
  log::warn(
      "kube: skipped an object that is not a decodable GameServer",
      {{"informer", opts_.name}, {"reason", reason}, {"error", std::string(why.substr(0, 300))}});
}

void Informer::CountRestart(const std::string& reason) {
  if (restarts_) restarts_->Add({{"informer", opts_.name}, {"reason", reason}}).Increment();
}

bool Informer::ApplyUpsert(ObjectPtr obj) {
  if (obj->name.empty()) return false;
  std::string key = Key(obj->namespace_, obj->name);
  ObjectPtr old;
  {
    MutexLock lk(mu_);
    auto [it, inserted] = store_.try_emplace(std::move(key));
    Slot& slot = it->second;
    slot.list = list_;
    if (!inserted) {
      if (slot.obj->resource_version == obj->resource_version && slot.obj->uid == obj->uid) {
        return true;  // already known (e.g. re-list after a reconnect): not a change
      }
      old = slot.obj;
      bytes_ -= BytesOf(*old);
    }
    bytes_ += BytesOf(*obj);
    slot.obj = obj;
    if (objects_) objects_->Set(static_cast<double>(store_.size()));
    if (bytes_gauge_) bytes_gauge_->Set(static_cast<double>(bytes_));
  }
  for (auto* h : handlers_) {
    if (old) {
      h->OnUpdate(old, obj);
    } else {
      h->OnAdd(obj);
    }
  }
  return true;
}

void Informer::ApplyDelete(const ObjectPtr& obj) {
  std::string key = Key(obj->namespace_, obj->name);
  ObjectPtr last;
  {
    MutexLock lk(mu_);
    auto it = store_.find(key);
    if (it == store_.end()) return;
    last = it->second.obj;
    bytes_ -= BytesOf(*last);
    store_.erase(it);
    if (objects_) objects_->Set(static_cast<double>(store_.size()));
    if (bytes_gauge_) bytes_gauge_->Set(static_cast<double>(bytes_));
  }
  // Deliver the final state the server reported when we have it.
  for (auto* h : handlers_) h->OnDelete(obj->name.empty() ? last : obj);
}

void Informer::ResyncAll() {
  for (const auto& obj : Snapshot()) {
    for (auto* h : handlers_) h->OnUpdate(obj, obj);
  }
}

void Informer::MaybeResync() {
  if (opts_.resync.count() > 0 && std::chrono::steady_clock::now() - last_resync_ >= opts_.resync) {
    last_resync_ = std::chrono::steady_clock::now();
    ResyncAll();
  }
}

void Informer::After(const std::shared_ptr<Core>& core, std::chrono::milliseconds d,
                     void (Informer::*next)(const std::shared_ptr<Core>&)) {
  core->timer.expires_after(d);
  core->timer.async_wait(Step(core, [this, core, next](boost::system::error_code ec) {
    if (!ec) (this->*next)(core);
  }));
}

void Informer::List(const std::shared_ptr<Core>& core) {
  ListOptions lo;
  lo.label_selector = opts_.label_selector;
  lo.field_selector = opts_.field_selector;
  lo.limit = opts_.page_size;
  lo.cancel = &core->cancel;
  if (opts_.decode == InformerOptions::Decode::kGameServer) {
    // The page handler runs while the call is pending (its `done` is a step): a Stop() waits.
    client_.ListPagesAsync(
        opts_.resource, opts_.namespace_, lo,
        [this, core](const ListPage& page) {
          if (!core->Stopped()) OnPage(page);
        },
        Step(core, [this, core](Result<std::string> res) {
          boost::asio::post(core->ex, Step(core, [this, core, res = std::move(res)]() mutable {
                              OnPagesDone(core, std::move(res));
                            }));
        }));
    return;
  }
  client_.ListAllAsync(
      opts_.resource, opts_.namespace_, lo, Step(core, [this, core](Result<ListResult> res) {
        // With a fake transport's DoAsync the answer may come inline: continue
        // from a fresh step on the I/O thread either way.
        boost::asio::post(core->ex, Step(core, [this, core, res = std::move(res)]() mutable {
                            OnListed(core, std::move(res));
                          }));
      }));
}

void Informer::OnPage(const ListPage& page) {
  if (page.first) {
    // A new attempt (the first, or a restart after an expired continue token): what earlier
    // pages held no longer counts as seen.
    ++list_;
    listed_ = 0;
    pages_ = 0;
  }
  ++pages_;
  for (size_t i = 0; i < page.non_object_items; ++i)
    Skip("not_a_gameserver", "a list item is not an object");
  for (std::string_view item : *page.items) {
    ObjectPtr obj = Decode(item, "list item");
    if (!obj) continue;
    if (ApplyUpsert(std::move(obj))) {
      ++listed_;
    } else {
      Skip("not_a_gameserver", "a list item has no metadata.name");
    }
  }
}

void Informer::OnPagesDone(const std::shared_ptr<Core>& core, Result<std::string> res) {
  if (!res) {
    log::warn("kube: list failed", {{"informer", opts_.name}, {"error", res.error().ToString()}});
    After(core, backoff_.Next(), &Informer::List);
    return;
  }
  // What no page of this attempt held is gone (deleted while the watch was down).
  std::vector<ObjectPtr> gone;
  {
    MutexLock lk(mu_);
    for (const auto& [k, v] : store_) {
      if (v.list != list_) gone.push_back(v.obj);
    }
  }
  for (const auto& g : gone) ApplyDelete(g);
  rv_ = std::move(*res);
  relist_ = false;
  Synced(core, listed_, pages_);
}

void Informer::OnListed(const std::shared_ptr<Core>& core, Result<ListResult> res) {
  if (!res) {
    log::warn("kube: list failed", {{"informer", opts_.name}, {"error", res.error().ToString()}});
    After(core, backoff_.Next(), &Informer::List);
    return;
  }
  // Apply the difference: adds/updates for new/changed objects, deletes for vanished ones.
  std::set<std::string> seen;
  for (auto& item : res->items) {
    ObjectPtr obj = MakeObject(item);
    seen.insert(Key(obj->namespace_, obj->name));
    ApplyUpsert(std::move(obj));
  }
  std::vector<ObjectPtr> gone;
  {
    MutexLock lk(mu_);
    for (const auto& [k, v] : store_) {
      if (!seen.count(k)) gone.push_back(v.obj);
    }
  }
  for (const auto& g : gone) ApplyDelete(g);
  rv_ = res->resource_version;
  Synced(core, res->items.size(), res->pages);
}

void Informer::Synced(const std::shared_ptr<Core>& core, size_t objects, int pages) {
  log::info("kube: listed", {{"informer", opts_.name},
                             {"objects", std::to_string(objects)},
                             {"pages", std::to_string(pages)},
                             {"resourceVersion", rv_}});
  for (auto* h : handlers_) h->OnSynced();
  {
    MutexLock lk(wait_mu_);
    synced_.store(true);
  }
  wait_cv_.SignalAll();
  Watch(core);
}

void Informer::Watch(const std::shared_ptr<Core>& core) {
  static thread_local std::mt19937 gen(std::random_device{}());
  WatchOptions wo;
  wo.label_selector = opts_.label_selector;
  wo.field_selector = opts_.field_selector;
  wo.resource_version = rv_;
  wo.allow_bookmarks = true;
  wo.cancel = &core->cancel;
  if (opts_.decode == InformerOptions::Decode::kGameServer) {
    wo.raw = true;
    wo.max_event_bytes = opts_.max_event_bytes;
    wo.on_skipped = [this, core](std::string_view why) {
      if (core->Stopped()) return;
      Skip(why.find("size limit") != std::string_view::npos ? "oversized" : "undecodable", why);
      relist_ = true;
    };
  }
  int t = std::max(1, opts_.watch_timeout_seconds);
  wo.timeout_seconds = t + std::uniform_int_distribution<int>(0, t - 1 > 0 ? t - 1 : 0)(gen);
  watch_started_ = std::chrono::steady_clock::now();
  seen_rv_.clear();
  client_.WatchAsync(
      opts_.resource, opts_.namespace_, wo,
      // Runs while the watch is pending: a Stop() waits for it.
      [this, core](WatchEvent& ev) { return !core->Stopped() && OnEvent(ev); },
      Step(core, [this, core](Result<std::string> res) { OnWatchEnd(core, std::move(res)); }));
}

bool Informer::OnEvent(WatchEvent& ev) {
  ObjectPtr obj;
  if (ev.object) {
    obj = MakeObject(ev.object);
  } else if (!ev.object_json.empty()) {
    obj = Decode(ev.object_json, "watch event");
    if (!obj) {
      relist_ = true;
      return true;
    }
  }
  if (obj && !obj->resource_version.empty()) seen_rv_ = obj->resource_version;
  switch (ev.type) {
    case WatchEvent::Type::kAdded:
    case WatchEvent::Type::kModified:
      if (obj && !ApplyUpsert(obj) && opts_.decode == InformerOptions::Decode::kGameServer) {
        Skip("not_a_gameserver", "a watch event's object has no metadata.name");
        relist_ = true;
      }
      break;
    case WatchEvent::Type::kDeleted:
      if (obj) ApplyDelete(obj);
      break;
    case WatchEvent::Type::kBookmark:
    case WatchEvent::Type::kError:
      break;
  }
  MaybeResync();
  return true;
}

void Informer::OnWatchEnd(const std::shared_ptr<Core>& core, Result<std::string> res) {
  enum class End { kRewatch, kRelist, kError } end = End::kRewatch;
  if (res) {
    // The last event applied (a raw watch's result is where it started) or the decoder's.
    if (!seen_rv_.empty()) {
      rv_ = seen_rv_;
    } else if (!res->empty()) {
      rv_ = *res;
    }
    if (relist_) {
      log::info("kube: re-listing after skipped watch events", {{"informer", opts_.name}});
      end = End::kRelist;
    }
  } else {
    // The events applied before a failure (a connection reset when the server restarts) stay
    // applied: the next watch resumes after them, as the header promises, not from where this one
    // started (the server would send them again, and each would be delivered twice).
    if (!seen_rv_.empty()) rv_ = seen_rv_;
    const ApiError& e = res.error();
    end = End::kError;
    if (e.cancelled) {
      // Shutdown(): the next attempts fail fast, after the backoff, until Stop().
    } else if (e.IsExpired()) {
      log::info("kube: watch expired; re-listing",
                {{"informer", opts_.name}, {"error", e.ToString()}});
      CountRestart("expired");
      end = End::kRelist;
    } else {
      log::warn("kube: watch failed", {{"informer", opts_.name}, {"error", e.ToString()}});
      CountRestart(e.IsTransport() ? "transport" : "error");
    }
  }
  MaybeResync();
  switch (end) {
    case End::kRewatch:
      // A normal end (timeoutSeconds) resumes at once; a stream that ended immediately backs off.
      if (std::chrono::steady_clock::now() - watch_started_ < std::chrono::seconds(1)) {
        After(core, backoff_.Next(), &Informer::Watch);
      } else {
        backoff_.Reset();
        Watch(core);
      }
      break;
    case End::kRelist:
      List(core);
      break;
    case End::kError:
      // Connection refused / server restarting: back off, then resume from rv_ (a 410 then
      // turns into a re-list).
      After(core, backoff_.Next(), &Informer::Watch);
      break;
  }
}

}  // namespace aw::kube
