// Leader election on a coordination.k8s.io/v1 Lease, with client-go semantics.
//
// Promise: candidates try to acquire or renew every retry_period. A lease held by someone else is
// considered valid until lease_duration after THIS process last saw the record change (local
// monotonic clock; no trust in other clocks). Taking over increments leaseTransitions; acquireTime
// and renewTime are written in RFC 3339 micro format. The leader that cannot renew within
// renew_deadline stops leading. Stop() while leading releases the lease (holderIdentity cleared,
// leaseDurationSeconds 1) so another replica takes over at its next retry. on_started_leading /
// on_stopped_leading run on the elector thread, in order, never concurrently; keep them short.
// Gauge allocating_webhook_leader (1 while leading) and a log line on every transition.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "kube/client.h"
#include "kube/core/lease_logic.h"
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
  void Start();
  void Stop() EXCLUDES(mu_);  // releases the lease if leading; idempotent; returns within ~1s
  bool IsLeader() const { return leading_.load(); }
  std::string CurrentLeader() const EXCLUDES(leader_mu_);

 private:
  void Run();
  bool TryAcquireOrRenew() EXCLUDES(leader_mu_);
  void Release();
  void SetLeading(bool leading);
  bool Sleep(std::chrono::milliseconds d) EXCLUDES(mu_);

  Client& client_;
  LeaderElectionConfig cfg_;
  LeaderCallbacks cb_;
  std::atomic<bool> leading_{false};
  std::atomic<bool> stop_{false};
  // cv_ wakes Sleep when stop_ (an atomic, written under mu_ so a sleeper cannot miss it) is set.
  Mutex mu_;
  CondVar cv_;
  std::thread thread_;
  // The elector's thread only: the last lease observed and when.
  std::optional<LeaseRecord> observed_;
  std::string observed_rv_;
  std::chrono::steady_clock::time_point observed_time_{};
  mutable Mutex leader_mu_;
  std::string last_leader_ GUARDED_BY(leader_mu_);
  prometheus::Gauge* gauge_ = nullptr;
  prometheus::Counter* transitions_ = nullptr;
};

}  // namespace aw::kube
