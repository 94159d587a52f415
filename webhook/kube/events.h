// Kubernetes Events about GameServers (core/v1 Events), rate limited and aggregated.
//
// Promise: Record() never blocks and never fails the caller: it enqueues into a bounded queue
// (full => the event is dropped and allocating_webhook_kube_events_dropped_total counts it). A
// background thread sends them under a token bucket (qps/burst). A repeat of the same
// (object uid, type, reason, message) within `aggregate_window` bumps `count`/`lastTimestamp` of
// the existing Event (merge patch) instead of creating a new one, like kubectl describe shows
// "x5 over 2m". source.component is `component` ("allocating-webhook"); reportingController too.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "kube/client.h"
#include "util/io/mutex.h"

namespace prometheus {
class Registry;
class Counter;
}  // namespace prometheus

namespace aw::kube {

enum class EventType { kNormal, kWarning };

struct ObjectReference {
  std::string api_version = "agones.dev/v1";
  std::string kind = "GameServer";
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string resource_version;
};

// Reference to a cached object (GameServer unless told otherwise).
ObjectReference RefFor(const rapidjson::Value& obj, std::string api_version = "agones.dev/v1",
                       std::string kind = "GameServer");

struct EventRecorderOptions {
  std::string component = "allocating-webhook";
  std::string host;  // source.host / reportingInstance (pod name); optional
  double qps = 5.0;
  double burst = 25.0;
  size_t queue_size = 1000;
  std::chrono::seconds aggregate_window{600};
};

// Pure token bucket (time is passed in). Exposed for tests.
class TokenBucket {
 public:
  TokenBucket(double qps, double burst) : qps_(qps), burst_(burst), tokens_(burst) {}
  // Takes a token at time `now` if available; otherwise returns false and sets *wait.
  bool TryTake(std::chrono::steady_clock::time_point now, std::chrono::milliseconds* wait);

 private:
  double qps_, burst_, tokens_;
  std::chrono::steady_clock::time_point last_{};
  bool started_ = false;
};

class EventRecorder {
 public:
  EventRecorder(Client& client, EventRecorderOptions opts, prometheus::Registry* registry);
  ~EventRecorder();
  void Start() EXCLUDES(mu_);
  void Stop() EXCLUDES(mu_);  // drops what is still queued; returns promptly
  void Record(const ObjectReference& obj, EventType type, std::string reason, std::string message)
      EXCLUDES(mu_);

 private:
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
  void Run() EXCLUDES(mu_);
  void Send(const Pending& p);  // on the recorder's thread, without mu_

  Client& client_;
  EventRecorderOptions opts_;
  Mutex mu_;
  CondVar cv_;  // signalled on Record and Stop
  std::deque<Pending> queue_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;                // started by Start, joined by Stop (the owner's thread)
  std::map<std::string, Seen> seen_;  // aggregation key -> existing event (recorder's thread only)
  prometheus::Counter* sent_ = nullptr;
  prometheus::Counter* dropped_ = nullptr;
  prometheus::Counter* failed_ = nullptr;
};

}  // namespace aw::kube
