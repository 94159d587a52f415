// Leader election on a coordination.k8s.io/v1 Lease, with client-go semantics.
//
// Promise: candidates try to acquire or renew every retry_period. A lease held by someone else is
// considered valid until lease_duration after THIS process last saw the record change (local
// monotonic clock; no trust in other clocks). Taking over increments leaseTransitions; acquireTime
// and renewTime are written in RFC 3339 micro format. The leader that cannot renew within
// renew_deadline stops leading (and keeps trying to acquire, as a candidate). Stop() while leading
// stops leading, then releases the lease (one asynchronous update: holderIdentity cleared,
// leaseDurationSeconds 1) so another replica takes over at its next retry; Stop() waits for that
// update (1 s timeout), after the round in flight if any (its call timeout: 2 x retry_period
// within [1 s, min(renew_deadline, 5 s)]), then gives up with a warning and no callback runs later.
// The elector holds no thread: its rounds are asynchronous Client calls (GetAsync, CreateAsync,
// UpdateAsync) and a steady_timer on client.executor(), the Kubernetes I/O thread. So
// on_started_leading / on_stopped_leading / on_new_leader run on that I/O thread, in order, never
// concurrently: they must not block (no wait for a Client call's answer or other work).
// Gauge allocating_webhook_leader (1 while leading) and a log line on every transition.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "kube/client.h"
#include "util/io/mutex.h"

namespace prometheus {
class Registry;
class Gauge;
class Counter;
}  // namespace prometheus

namespace aw::kube {

struct LeaderElectionConfig {
  std::string namespace_ = "allocating-system";
  std::string name = "allocating-webhook";
  std::string identity;
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
};

// Returns "" when valid, else a message (client-go: lease > renew deadline > retry*1.2, > 0).
std::string ValidateLeaderElectionConfig(const LeaderElectionConfig& c);

struct LeaderCallbacks {
  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& identity)> on_new_leader;  // optional
};

class LeaderElector {
 public:
  LeaderElector(Client& client, LeaderElectionConfig cfg, LeaderCallbacks cb,
                prometheus::Registry* registry);
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Schedules the first round on the I/O executor and returns. Idempotent while running.
  void Start() EXCLUDES(mu_);
  // Stops the rounds; if leading, stops leading (callback, at once) and releases the lease. Waits
  // for that on the I/O thread (bounded, see above). Idempotent. Never call it on the I/O thread.
  void Stop() EXCLUDES(mu_);
  bool IsLeader() const EXCLUDES(mu_);
  std::string CurrentLeader() const EXCLUDES(mu_);

 private:
  struct Core;  // the state machine, shared with its pending handlers

  Client& client_;
  LeaderElectionConfig cfg_;
  LeaderCallbacks cb_;
  prometheus::Gauge* gauge_ = nullptr;
  prometheus::Counter* transitions_ = nullptr;
  mutable Mutex mu_;
  std::shared_ptr<Core> core_ GUARDED_BY(mu_);  // the current run (kept after Stop for reads)
};

}  // namespace aw::kube
