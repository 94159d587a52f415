// The resolver: a reconciler that holds every opted-in Allocating GameServer until it is confirmed
// playable (promotion to Allocated) or its deadline passes (the on-timeout action). It also
// watches opted-in servers that reached Allocated without passing the gate (admission
// unreachable): it records the bypass, then confirms it after the fact or records its deadline
// outcome, never changing their state (policy::BypassOf, evaluate.h).
//
// Promise:
//   - Keys ("namespace/name") go through a controller work queue (runtime::WorkQueueState): a
//     notification from the GameServer cache adds the key, a probe or patch completion records its
//     result and adds the key, the periodic resync adds every key, and Reconcile(key) answers when
//     to look again (next probe, deadline, end of a backoff), which becomes a delayed add. One loop
//     thread drains the queue and owns all per-server state, so one key is reconciled at a time.
//   - Decisions come from Evaluate() (evaluate.h); writes are the patches in patches.h, applied
//     started through the Executor and sent asynchronously (Patcher::PatchGameServerAsync: no
//     thread waits for a patch), at most one in flight per server.
//   - Conflicts are re-decided on the next view of the object (or after a short backoff); a server
//     deleted or moved out of Allocating by someone else is dropped; a view with the
//     resourceVersion the resolver already resolved is ignored, so nothing is promoted twice.
//   - A server the Agones controller shut down while Allocating (the webhook let the scale-down
//     through: state Shutdown, outcome ScaledDown) is recorded once per allocation, from its
//     update or, when the object went before the resolver saw it, from the deletion's last known
//     object (NotifyDeleted): a Normal Event AllocatingScaledDown, a metric and a log line.
//   - No state outlives a run: each Run() (e.g. a new leader) rebuilds everything from the
//     source, and servers whose deadline already passed are resolved at once.
//   - Run(ctx) is the loop as a runtime::Runnable body, on the manager's thread (the resolver has
//     no thread of its own).
//   - Step() runs one pass without a thread (for tests with fake ports and a fake clock).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "policy/policy.h"
#include "probe/prober.h"
#include "resolver/core/evaluate.h"
#include "resolver/core/ports.h"
#include "resolver/metrics.h"
#include "runtime/core/work_queue_state.h"
#include "runtime/manager.h"
#include "util/status.h"

namespace aw::resolver {

struct ResolverOptions {
  policy::Policy policy;
  std::chrono::milliseconds resync_period{30000};  // full re-evaluation from the source
  std::chrono::milliseconds retry_initial{100};    // after a conflict or a failed patch
  std::chrono::milliseconds retry_max{5000};
  // Per-probe timeout; each probe also ends within 3/4 of its server's probe period.
  std::chrono::milliseconds probe_timeout{200};
  // Stalled() reports the loop wedged when it has not begun a pass for this long (a healthy loop
  // begins one at least every second).
  std::chrono::milliseconds stall_timeout{std::chrono::seconds(60)};
  // How long after a gated server's answer-by the gateway's delivery mark may still come before
  // the server is released as undelivered (evaluate.h, DeliveryOf).
  std::chrono::nanoseconds undelivered_grace = kDefaultUndeliveredGrace;
};

class Resolver {
 public:
  Resolver(ResolverOptions options, GameServerSource& source, Patcher& patcher,
           EventRecorder& events, probe::Prober& prober, const WallClock& clock, Executor& executor,
           Metrics* metrics = nullptr);
  ~Resolver();
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;

  // Thread-safe; cheap; ignored while the resolver is not running (unless in step mode).
  void Notify(const std::string& ns, const std::string& name);
  void NotifyAll();
  // A server was deleted; `last_known` is its last state (may be nullptr). Thread-safe.
  void NotifyDeleted(const std::string& ns, const std::string& name,
                     std::shared_ptr<const GameServerView> last_known);

  // Runs the loop on the calling thread until ctx.stop() (reports Ready once accepting
  // notifications); returns OK. Not concurrently with another Run().
  Status Run(runtime::RunContext& ctx);

  // Step mode (tests): enables notifications without a thread, then Step() runs one pass
  // (inbox, resync when due, due timers) and returns when the loop next wants to run.
  void EnableStepMode();
  TimePoint Step();

  // Servers currently tracked as Allocating (not yet resolved). Loop thread / step mode only.
  size_t Tracked() const;

  // The liveness signal: nullopt while the loop is not running (not leading) or began a pass
  // within options.stall_timeout; otherwise why it is considered wedged. Thread-safe. A wedged
  // loop fails /healthz, so the kubelet restarts the replica and the Lease passes to another.
  std::optional<std::string> Stalled() const;

 private:
  struct Inbox;
  struct ProbeDone;
  struct PatchDone;
  struct Entry;

  // The loop: `ready` is called once notifications are accepted.
  void Loop(std::stop_token stop, const std::function<void()>& ready);
  void Reset();
  // Queues every key the source lists and every key tracked (to notice deletions).
  void Resync();
  void Enqueue(const std::string& key);
  // The reconciler: decides for one server from its cached view, its probe state and the policy;
  // may start a probe or dispatch a patch (whose completion queues the key again). Returns when
  // to look again (the next probe, the deadline, the end of a backoff), or nullopt when only an
  // event can change the answer (a completion, a notification, the resync).
  std::optional<TimePoint> Reconcile(const std::string& key, TimePoint now);
  void OnProbeDone(ProbeDone done);
  void OnPatchDone(PatchDone done, TimePoint now);
  void StartProbe(Entry& e, const std::string& key, const probe::Target& target,
                  std::chrono::nanoseconds period, TimePoint now);
  void DispatchPatch(Entry& e, const std::string& key, const GameServerView& gs,
                     const Evaluation& ev, TimePoint now);
  void Drop(const std::string& key, const char* why);
  // Records a scale-down of an Allocating server (Event, metric, log) unless already recorded
  // for this allocation.
  void RecordScaledDown(const std::string& key, const GameServerView& gs, TimePoint now);
  // Forgets what was recorded for a server that is gone.
  void ForgetScaledDown(const std::string& key);
  void UpdateGauge();

  ResolverOptions options_;
  GameServerSource& source_;
  Patcher& patcher_;
  EventRecorder& events_;
  probe::Prober& prober_;
  const WallClock& clock_;
  Executor& executor_;
  Metrics* metrics_;

  std::shared_ptr<Inbox> inbox_;
  // The loop's heartbeat: steady-clock nanoseconds at the start of its latest pass, and whether
  // the loop runs at all (written by the loop, read by Stalled() from the health server's thread).
  std::atomic<int64_t> heartbeat_ns_{0};
  std::atomic<bool> looping_{false};

  // Loop-thread state (the work queue is in the inbox: other threads add keys to it).
  std::map<std::string, Entry> entries_;
  // Scale-downs recorded: key -> allocation id (so each is recorded once).
  std::map<std::string, std::string> scaled_down_;
  TimePoint next_resync_{};
};

// The production Executor: runs each task at once on the posting thread. The resolver's tasks
// only start an asynchronous patch or queue an Event (neither blocks), so no thread is needed.
class InlineExecutor final : public Executor {
 public:
  void Post(std::function<void()> task) override { task(); }
};

}  // namespace aw::resolver
