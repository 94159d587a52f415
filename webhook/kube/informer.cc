#include "kube/informer.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <random>
#include <set>

#include "kube/backoff.h"
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

Informer::Informer(Client& client, InformerOptions opts, prometheus::Registry* registry)
    : client_(client), opts_(std::move(opts)) {
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
  if (thread_.joinable()) return;
  stop_.store(false);
  cancel_.Reset();
  thread_ = std::thread([this] { Run(); });
}

void Informer::Stop() {
  {
    MutexLock lk(wait_mu_);
    stop_.store(true);
  }
  wait_cv_.SignalAll();
  cancel_.Cancel();
  if (thread_.joinable()) thread_.join();
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) {
  MutexLock lk(wait_mu_);
  wait_cv_.WaitFor(wait_mu_, timeout, [&] { return synced_.load() || stop_.load(); });
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

bool Informer::SleepFor(std::chrono::milliseconds d) {
  MutexLock lk(wait_mu_);
  wait_cv_.WaitFor(wait_mu_, d, [&] { return stop_.load(); });
  return !stop_.load();
}

void Informer::CountRestart(const std::string& reason) {
  if (restarts_) restarts_->Add({{"informer", opts_.name}, {"reason", reason}}).Increment();
}

void Informer::ApplyUpsert(JsonPtr doc) {
  ObjectPtr obj = MakeObject(std::move(doc));
  if (obj->name.empty()) return;
  std::string key = Key(obj->namespace_, obj->name);
  {
    MutexLock lk(mu_);
    auto it = store_.find(key);
    if (it != store_.end() && it->second->resource_version == obj->resource_version &&
        it->second->uid == obj->uid) {
      return;  // already known (e.g. re-list after a reconnect): not a change
    }
    store_[key] = obj;
    if (objects_) objects_->Set(static_cast<double>(store_.size()));
  }
  for (auto* h : handlers_) h->OnUpsert(obj);
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
    for (auto* h : handlers_) h->OnUpsert(obj);
  }
}

bool Informer::Relist() {
  ListOptions lo;
  lo.label_selector = opts_.label_selector;
  lo.field_selector = opts_.field_selector;
  lo.limit = opts_.page_size;
  lo.cancel = &cancel_;
  auto res = client_.ListAll(opts_.resource, opts_.namespace_, lo);
  if (!res) {
    if (!stop_.load()) {
      log::warn("kube: list failed", {{"informer", opts_.name}, {"error", res.error().ToString()}});
    }
    return false;
  }
  // Apply the difference: upserts for new/changed objects, deletes for vanished ones.
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
  resume_rv_ = res->resource_version;
  log::info("kube: listed", {{"informer", opts_.name},
                             {"objects", std::to_string(res->items.size())},
                             {"pages", std::to_string(res->pages)},
                             {"resourceVersion", resume_rv_}});
  for (auto* h : handlers_) h->OnSynced();
  {
    MutexLock lk(wait_mu_);
    synced_.store(true);
  }
  wait_cv_.SignalAll();
  return true;
}

Informer::WatchEnd Informer::WatchOnce(std::string* rv) {
  static thread_local std::mt19937 gen(std::random_device{}());
  WatchOptions wo;
  wo.label_selector = opts_.label_selector;
  wo.field_selector = opts_.field_selector;
  wo.resource_version = *rv;
  wo.allow_bookmarks = true;
  wo.cancel = &cancel_;
  int t = std::max(1, opts_.watch_timeout_seconds);
  wo.timeout_seconds = t + std::uniform_int_distribution<int>(0, t - 1 > 0 ? t - 1 : 0)(gen);
  bool got_event = false;
  std::string seen_rv;  // of the last event applied (a bookmark included)
  auto res = client_.Watch(opts_.resource, opts_.namespace_, wo, [&](WatchEvent& ev) {
    got_event = true;
    if (ev.object) {
      std::string v = MetaString(*ev.object, "resourceVersion");
      if (!v.empty()) seen_rv = std::move(v);
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
    if (opts_.resync.count() > 0 &&
        std::chrono::steady_clock::now() - last_resync_ >= opts_.resync) {
      last_resync_ = std::chrono::steady_clock::now();
      ResyncAll();
    }
    return !stop_.load();
  });
  if (res) {
    if (!res->empty()) *rv = *res;
    return WatchEnd::kRewatch;
  }
  // The events applied before a failure (a connection reset when the server restarts) stay
  // applied: the next watch resumes after them, as the header promises, not from where this one
  // started (the server would send them again, and each would be delivered twice).
  if (!seen_rv.empty()) *rv = seen_rv;
  const ApiError& e = res.error();
  if (e.cancelled || stop_.load()) return WatchEnd::kError;
  if (e.IsExpired()) {
    log::info("kube: watch expired; re-listing",
              {{"informer", opts_.name}, {"error", e.ToString()}});
    CountRestart("expired");
    return WatchEnd::kRelist;
  }
  log::warn("kube: watch failed", {{"informer", opts_.name}, {"error", e.ToString()}});
  CountRestart(e.IsTransport() ? "transport" : "error");
  (void)got_event;
  return WatchEnd::kError;
}

void Informer::Run() {
  Backoff backoff(opts_.backoff_initial, opts_.backoff_max, 0.2);
  bool need_list = true;
  std::string rv;
  last_resync_ = std::chrono::steady_clock::now();
  while (!stop_.load()) {
    if (need_list) {
      if (!Relist()) {
        auto d = backoff.Next();
        if (!SleepFor(d)) return;
        continue;
      }
      rv = resume_rv_;
      need_list = false;
    }
    auto started = std::chrono::steady_clock::now();
    WatchEnd end = WatchOnce(&rv);
    if (stop_.load()) return;
    if (opts_.resync.count() > 0 &&
        std::chrono::steady_clock::now() - last_resync_ >= opts_.resync) {
      last_resync_ = std::chrono::steady_clock::now();
      ResyncAll();
    }
    switch (end) {
      case WatchEnd::kRewatch:
        // A normal end (timeoutSeconds) resumes at once; a stream that ended immediately backs off.
        if (std::chrono::steady_clock::now() - started < std::chrono::seconds(1)) {
          if (!SleepFor(backoff.Next())) return;
        } else {
          backoff.Reset();
        }
        break;
      case WatchEnd::kRelist:
        need_list = true;
        break;
      case WatchEnd::kError:
        // Connection refused / server restarting: back off, then resume from rv (a 410 then
        // turns into a re-list).
        if (!SleepFor(backoff.Next())) return;
        break;
    }
  }
}

}  // namespace aw::kube
