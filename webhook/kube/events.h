// Kubernetes Events about GameServers (core/v1 Events), rate limited and aggregated.
//
// Promise: Record() never blocks and never fails the caller: it enqueues into a bounded queue
// (full => the event is dropped and allocating_webhook_kube_events_total{result="dropped"} counts
// it). They are sent one at a time, in order, under a token bucket (qps/burst), without a thread
// of the recorder's own: asynchronous Client calls (CreateAsync, PatchAsync) and, while the bucket
// is empty, a steady_timer, all on client.executor() (the Kubernetes I/O thread). A repeat of the
// same
// (object uid, type, reason, message) within `aggregate_window` bumps `count`/`lastTimestamp` of
// the existing Event (merge patch) instead of creating a new one, like kubectl describe shows
// "x5 over 2m". source.component is `component` ("allocating-webhook"); reportingController too.
#pragma once

#include <chrono>
#include <memory>
#include <string>

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
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;
  // Starts sending (what was recorded before is sent then). Idempotent.
  void Start();
  // Drops what is still queued and sends nothing more; returns at once (a call in flight ends on
  // the I/O thread, unreported). Idempotent.
  void Stop();
  // Any thread, the I/O thread included: takes a mutex briefly, never waits for I/O.
  void Record(const ObjectReference& obj, EventType type, std::string reason, std::string message);

 private:
  struct Core;  // the queue and the sender, shared with its pending handlers
  std::shared_ptr<Core> core_;
};

}  // namespace aw::kube
