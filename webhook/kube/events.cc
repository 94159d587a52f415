#include "kube/events.h"

#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <rapidjson/document.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <map>
#include <random>

#include "kube/core/lease_logic.h"
#include "util/io/log.h"
#include "util/io/mutex.h"
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

struct EventRecorder::Core {
  struct Pending {
    ObjectReference obj;
    EventType type;
    std::string reason, message;
    std::chrono::system_clock::time_point when;
  };
  struct Seen {
    std::string event_name, event_ns;
    int count = 1;
    std::string first_ts;
    std::chrono::steady_clock::time_point last;
  };

  Core(Client& c, EventRecorderOptions o)
      : client(c),
        opts(std::move(o)),
        executor(c.executor()),
        timer(executor),
        bucket(opts.qps, opts.burst),
        gen(std::random_device{}()) {}

  Client& client;
  const EventRecorderOptions opts;
  boost::asio::any_io_executor executor;
  prometheus::Counter* sent = nullptr;
  prometheus::Counter* dropped = nullptr;
  prometheus::Counter* failed = nullptr;

  Mutex mu;
  std::deque<Pending> queue GUARDED_BY(mu);
  bool started GUARDED_BY(mu) = false;
  bool stop GUARDED_BY(mu) = false;
  // A Pump is posted, waiting on the timer or a call is in flight: exactly one chain sends.
  bool pumping GUARDED_BY(mu) = false;

  // The executor's only (one chain at a time).
  boost::asio::steady_timer timer;
  TokenBucket bucket;
  std::map<std::string, Seen> seen;  // aggregation key -> existing event
  std::mt19937_64 gen;

  bool Stopped() EXCLUDES(mu) {
    MutexLock lk(mu);
    return stop;
  }

  // Starts the chain unless one runs. REQUIRES the caller to have just seen work queued.
  void Kick(const std::shared_ptr<Core>& self) REQUIRES(mu) {
    if (pumping || !started || stop) return;
    pumping = true;
    boost::asio::post(executor, [self] { self->Pump(self); });
  }

  // Sends the next queued event when the bucket has a token; otherwise waits for one on the timer.
  void Pump(const std::shared_ptr<Core>& self) EXCLUDES(mu) {
    Pending p;
    {
      MutexLock lk(mu);
      if (stop || queue.empty()) {
        pumping = false;
        return;
      }
      std::chrono::milliseconds wait{0};
      if (!bucket.TryTake(std::chrono::steady_clock::now(), &wait)) {
        timer.expires_after(wait);
        timer.async_wait([self](const boost::system::error_code&) { self->Pump(self); });
        return;
      }
      p = std::move(queue.front());
      queue.pop_front();
    }
    Send(self, std::move(p));
  }

  // After a call: the next one, posted (a fake transport answers inline; no recursion).
  void Next(const std::shared_ptr<Core>& self) {
    boost::asio::post(executor, [self] { self->Pump(self); });
  }

  void Send(const std::shared_ptr<Core>& self, Pending p) {
    const char* type = p.type == EventType::kWarning ? "Warning" : "Normal";
    std::string key = fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}", p.obj.namespace_, p.obj.name,
                                  p.obj.uid, type, p.reason, p.message);
    auto now_steady = std::chrono::steady_clock::now();
    // Forget old aggregation entries.
    for (auto it = seen.begin(); it != seen.end();) {
      if (now_steady - it->second.last > opts.aggregate_window) {
        it = seen.erase(it);
      } else {
        ++it;
      }
    }
    auto it = seen.find(key);
    if (it == seen.end()) return Create(self, std::move(p), std::move(key));
    const Seen& s = it->second;
    std::string now_s = util::FormatRfc3339(p.when, util::Rfc3339Precision::kSeconds);
    std::string patch = fmt::format(R"({{"count":{},"lastTimestamp":"{}"}})", s.count + 1, now_s);
    auto shared = std::make_shared<Pending>(std::move(p));
    client.PatchAsync(kEvents, s.event_ns, s.event_name, PatchType::kMerge, patch,
                      [self, shared, key](Result<JsonPtr> r) {
                        if (self->Stopped()) return self->Next(self);  // Pump ends the chain
                        auto it = self->seen.find(key);
                        if (r) {
                          if (it != self->seen.end()) {
                            ++it->second.count;
                            it->second.last = std::chrono::steady_clock::now();
                          }
                          if (self->sent) self->sent->Increment();
                          return self->Next(self);
                        }
                        // The event expired or was deleted: create a new one.
                        if (it != self->seen.end()) self->seen.erase(it);
                        self->Create(self, std::move(*shared), key);
                      });
  }

  void Create(const std::shared_ptr<Core>& self, Pending p, std::string key) {
    const char* type = p.type == EventType::kWarning ? "Warning" : "Normal";
    std::string now_s = util::FormatRfc3339(p.when, util::Rfc3339Precision::kSeconds);
    std::string ns = p.obj.namespace_.empty() ? "default" : p.obj.namespace_;
    std::string name = fmt::format("{}.{:x}", p.obj.name.empty() ? "object" : p.obj.name,
                                   gen() & 0xffffffffffffULL);
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
    Set(&src, "component", opts.component, a);
    if (!opts.host.empty()) Set(&src, "host", opts.host, a);
    d.AddMember("source", src, a);
    Set(&d, "firstTimestamp", now_s, a);
    Set(&d, "lastTimestamp", now_s, a);
    d.AddMember("count", 1, a);
    Set(&d, "reportingComponent", opts.component, a);
    if (!opts.host.empty()) Set(&d, "reportingInstance", opts.host, a);
    client.CreateAsync(
        kEvents, ns, ToJson(d),
        [self, key = std::move(key), name, ns, now_s, object = ns + "/" + p.obj.name,
         reason = p.reason](Result<JsonPtr> r) {
          if (self->Stopped()) return self->Next(self);  // Pump ends the chain
          if (!r) {
            if (self->failed) self->failed->Increment();
            log::warn("kube: could not record event",
                      {{"object", object}, {"reason", reason}, {"error", r.error().ToString()}});
          } else {
            if (self->sent) self->sent->Increment();
            self->seen[key] = Seen{name, ns, 1, now_s, std::chrono::steady_clock::now()};
          }
          self->Next(self);
        });
  }
};

EventRecorder::EventRecorder(Client& client, EventRecorderOptions opts,
                             prometheus::Registry* registry)
    : core_(std::make_shared<Core>(client, std::move(opts))) {
  if (registry) {
    auto& fam = prometheus::BuildCounter()
                    .Name("allocating_webhook_kube_events_total")
                    .Help(
                        "Kubernetes Events by result (sent, aggregated into an existing event, "
                        "dropped, failed)")
                    .Register(*registry);
    core_->sent = &fam.Add({{"result", "sent"}});
    core_->dropped = &fam.Add({{"result", "dropped"}});
    core_->failed = &fam.Add({{"result", "failed"}});
  }
}

EventRecorder::~EventRecorder() { Stop(); }

void EventRecorder::Start() {
  MutexLock lk(core_->mu);
  if (core_->started && !core_->stop) return;
  core_->started = true;
  core_->stop = false;
  if (!core_->queue.empty()) core_->Kick(core_);
}

void EventRecorder::Stop() {
  {
    MutexLock lk(core_->mu);
    if (core_->stop) return;
    core_->stop = true;
    core_->queue.clear();
  }
  // A chain waiting on the timer ends now (on the executor, which owns the timer).
  auto core = core_;
  boost::asio::post(core->executor, [core] { core->timer.cancel(); });
}

void EventRecorder::Record(const ObjectReference& obj, EventType type, std::string reason,
                           std::string message) {
  if (message.size() > 1024) message.resize(1024);
  MutexLock lk(core_->mu);
  if (core_->stop || core_->queue.size() >= core_->opts.queue_size) {
    if (core_->dropped) core_->dropped->Increment();
    return;
  }
  core_->queue.push_back(Core::Pending{obj, type, std::move(reason), std::move(message),
                                       std::chrono::system_clock::now()});
  core_->Kick(core_);
}

}  // namespace aw::kube
