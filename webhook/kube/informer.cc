#include "kube/informer.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <random>
#include <set>
#include <utility>

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
  for (const auto& [k, v] : store_) out.push_back(v);
  return out;
}

ObjectPtr Informer::Get(const std::string& ns, const std::string& name) const {
  MutexLock lk(mu_);
  auto it = store_.find(Key(ns, name));
  return it == store_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> Informer::GetByName(const std::string& name) const {
  MutexLock lk(mu_);
  std::vector<ObjectPtr> out;
  for (const auto& [k, v] : store_) {
    if (v->name == name) out.push_back(v);
  }
  return out;
}

void Informer::CountRestart(const std::string& reason) {
  if (restarts_) restarts_->Add({{"informer", opts_.name}, {"reason", reason}}).Increment();
}

void Informer::ApplyUpsert(JsonPtr doc) {
  ObjectPtr obj = MakeObject(std::move(doc));
  if (obj->name.empty()) return;
  std::string key = Key(obj->namespace_, obj->name);
  ObjectPtr old;
  {
    MutexLock lk(mu_);
    auto it = store_.find(key);
    if (it != store_.end()) {
      if (it->second->resource_version == obj->resource_version && it->second->uid == obj->uid) {
        return;  // already known (e.g. re-list after a reconnect): not a change
      }
      old = it->second;
    }
    store_[key] = obj;
    if (objects_) objects_->Set(static_cast<double>(store_.size()));
  }
  for (auto* h : handlers_) {
    if (old) {
      h->OnUpdate(old, obj);
    } else {
      h->OnAdd(obj);
    }
  }
}

void Informer::ApplyDelete(const JsonPtr& doc) {
  std::string key = Key(MetaString(*doc, "namespace"), MetaString(*doc, "name"));
  ObjectPtr last;
  {
    MutexLock lk(mu_);
    auto it = store_.find(key);
    if (it == store_.end()) return;
    last = it->second;
    store_.erase(it);
    if (objects_) objects_->Set(static_cast<double>(store_.size()));
  }
  // Deliver the final state the server reported when we have it.
  ObjectPtr final_obj = MakeObject(doc);
  for (auto* h : handlers_) h->OnDelete(final_obj->name.empty() ? last : final_obj);
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
  client_.ListAllAsync(
      opts_.resource, opts_.namespace_, lo, Step(core, [this, core](Result<ListResult> res) {
        // With a fake transport's DoAsync the answer may come inline: continue
        // from a fresh step on the I/O thread either way.
        boost::asio::post(core->ex, Step(core, [this, core, res = std::move(res)]() mutable {
                            OnListed(core, std::move(res));
                          }));
      }));
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
    seen.insert(Key(MetaString(*item, "namespace"), MetaString(*item, "name")));
    ApplyUpsert(item);
  }
  std::vector<ObjectPtr> gone;
  {
    MutexLock lk(mu_);
    for (const auto& [k, v] : store_) {
      if (!seen.count(k)) gone.push_back(v);
    }
  }
  for (const auto& g : gone) ApplyDelete(g->doc);
  rv_ = res->resource_version;
  log::info("kube: listed", {{"informer", opts_.name},
                             {"objects", std::to_string(res->items.size())},
                             {"pages", std::to_string(res->pages)},
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
  if (ev.object) {
    std::string v = MetaString(*ev.object, "resourceVersion");
    if (!v.empty()) seen_rv_ = std::move(v);
  }
  switch (ev.type) {
    case WatchEvent::Type::kAdded:
    case WatchEvent::Type::kModified:
      ApplyUpsert(ev.object);
      break;
    case WatchEvent::Type::kDeleted:
      ApplyDelete(ev.object);
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
    if (!res->empty()) rv_ = *res;
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
