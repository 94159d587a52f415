#include "kube/events.h"

#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <rapidjson/document.h>

#include <random>

#include "kube/core/lease_logic.h"
#include "util/io/log.h"
#include "util/time_format.h"

namespace aw::kube {
namespace {

void Set(rapidjson::Value* obj, const char* key, const std::string& v,
         rapidjson::Document::AllocatorType& a) {
  obj->AddMember(rapidjson::Value(key, a),
                 rapidjson::Value(v.c_str(), static_cast<rapidjson::SizeType>(v.size()), a), a);
}

}  // namespace

ObjectReference RefFor(const rapidjson::Value& obj, std::string api_version, std::string kind) {
  ObjectReference r;
  r.api_version = std::move(api_version);
  r.kind = std::move(kind);
  r.namespace_ = MetaString(obj, "namespace");
  r.name = MetaString(obj, "name");
  r.uid = MetaString(obj, "uid");
  r.resource_version = MetaString(obj, "resourceVersion");
  return r;
}

bool TokenBucket::TryTake(std::chrono::steady_clock::time_point now,
                          std::chrono::milliseconds* wait) {
  if (!started_) {
    started_ = true;
    last_ = now;
  }
  double elapsed = std::chrono::duration<double>(now - last_).count();
  if (elapsed > 0) {
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    return true;
  }
  double need = (1.0 - tokens_) / (qps_ > 0 ? qps_ : 1e-9);
  *wait = std::chrono::milliseconds(static_cast<int64_t>(need * 1000.0) + 1);
  return false;
}

EventRecorder::EventRecorder(Client& client, EventRecorderOptions opts,
                             prometheus::Registry* registry)
    : client_(client), opts_(std::move(opts)) {
  if (registry) {
    auto& fam = prometheus::BuildCounter()
                    .Name("allocating_webhook_kube_events_total")
                    .Help(
                        "Kubernetes Events by result (sent, aggregated into an existing event, "
                        "dropped, failed)")
                    .Register(*registry);
    sent_ = &fam.Add({{"result", "sent"}});
    dropped_ = &fam.Add({{"result", "dropped"}});
    failed_ = &fam.Add({{"result", "failed"}});
  }
}

EventRecorder::~EventRecorder() { Stop(); }

void EventRecorder::Start() {
  MutexLock lk(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void EventRecorder::Stop() {
  {
    MutexLock lk(mu_);
    stop_ = true;
    queue_.clear();
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void EventRecorder::Record(const ObjectReference& obj, EventType type, std::string reason,
                           std::string message) {
  if (message.size() > 1024) message.resize(1024);
  {
    MutexLock lk(mu_);
    if (stop_ || queue_.size() >= opts_.queue_size) {
      if (dropped_) dropped_->Increment();
      return;
    }
    queue_.push_back(Pending{obj, type, std::move(reason), std::move(message),
                             std::chrono::system_clock::now()});
  }
  cv_.Signal();
}

void EventRecorder::Run() {
  TokenBucket bucket(opts_.qps, opts_.burst);
  while (true) {
    Pending p;
    {
      MutexLock lk(mu_);
      cv_.Wait(mu_, [&]() REQUIRES(mu_) { return stop_ || !queue_.empty(); });
      if (stop_) return;
      std::chrono::milliseconds wait{0};
      while (!bucket.TryTake(std::chrono::steady_clock::now(), &wait)) {
        cv_.WaitFor(mu_, wait, [&]() REQUIRES(mu_) { return stop_; });
        if (stop_) return;
      }
      p = std::move(queue_.front());
      queue_.pop_front();
    }
    Send(p);
  }
}

void EventRecorder::Send(const Pending& p) {
  const char* type = p.type == EventType::kWarning ? "Warning" : "Normal";
  std::string key = fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}", p.obj.namespace_, p.obj.name,
                                p.obj.uid, type, p.reason, p.message);
  auto now_steady = std::chrono::steady_clock::now();
  std::string now_s = util::FormatRfc3339(p.when, util::Rfc3339Precision::kSeconds);
  // Forget old aggregation entries.
  for (auto it = seen_.begin(); it != seen_.end();) {
    if (now_steady - it->second.last > opts_.aggregate_window) {
      it = seen_.erase(it);
    } else {
      ++it;
    }
  }
  std::string ns = p.obj.namespace_.empty() ? "default" : p.obj.namespace_;
  auto it = seen_.find(key);
  if (it != seen_.end()) {
    Seen& s = it->second;
    std::string patch = fmt::format(R"({{"count":{},"lastTimestamp":"{}"}})", s.count + 1, now_s);
    auto r = client_.Patch(kEvents, s.event_ns, s.event_name, PatchType::kMerge, patch);
    if (r) {
      ++s.count;
      s.last = now_steady;
      if (sent_) sent_->Increment();
      return;
    }
    seen_.erase(it);  // the event expired or was deleted: create a new one
  }
  static thread_local std::mt19937_64 gen(std::random_device{}());
  std::string name =
      fmt::format("{}.{:x}", p.obj.name.empty() ? "object" : p.obj.name, gen() & 0xffffffffffffULL);
  rapidjson::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  Set(&d, "apiVersion", "v1", a);
  Set(&d, "kind", "Event", a);
  rapidjson::Value md(rapidjson::kObjectType);
  Set(&md, "name", name, a);
  Set(&md, "namespace", ns, a);
  d.AddMember("metadata", md, a);
  rapidjson::Value io(rapidjson::kObjectType);
  Set(&io, "apiVersion", p.obj.api_version, a);
  Set(&io, "kind", p.obj.kind, a);
  Set(&io, "namespace", p.obj.namespace_, a);
  Set(&io, "name", p.obj.name, a);
  if (!p.obj.uid.empty()) Set(&io, "uid", p.obj.uid, a);
  if (!p.obj.resource_version.empty()) Set(&io, "resourceVersion", p.obj.resource_version, a);
  d.AddMember("involvedObject", io, a);
  Set(&d, "reason", p.reason, a);
  Set(&d, "message", p.message, a);
  Set(&d, "type", type, a);
  rapidjson::Value src(rapidjson::kObjectType);
  Set(&src, "component", opts_.component, a);
  if (!opts_.host.empty()) Set(&src, "host", opts_.host, a);
  d.AddMember("source", src, a);
  Set(&d, "firstTimestamp", now_s, a);
  Set(&d, "lastTimestamp", now_s, a);
  d.AddMember("count", 1, a);
  Set(&d, "reportingComponent", opts_.component, a);
  if (!opts_.host.empty()) Set(&d, "reportingInstance", opts_.host, a);
  auto r = client_.Create(kEvents, ns, ToJson(d));
  if (!r) {
    if (failed_) failed_->Increment();
    log::warn(
        "kube: could not record event",
        {{"object", ns + "/" + p.obj.name}, {"reason", p.reason}, {"error", r.error().ToString()}});
    return;
  }
  if (sent_) sent_->Increment();
  seen_[key] = Seen{name, ns, 1, now_s, now_steady};
}

}  // namespace aw::kube
