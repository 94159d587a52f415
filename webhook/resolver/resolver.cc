#include "resolver/resolver.h"

#include <algorithm>
#include <unordered_map>

#include "contract/keys.h"
#include "policy/config.h"
#include "resolver/core/patches.h"
#include "util/duration.h"
#include "util/io/log.h"
#include "util/io/mutex.h"
#include "util/time_format.h"

namespace aw::resolver {

struct Resolver::ProbeDone {
  std::string key;
  ProbeObservation obs;
};

struct Resolver::PatchDone {
  std::string key;
  std::string resource_version;  // the version the patch tested
  Verdict verdict = Verdict::kWait;
  policy::OnTimeout action = policy::OnTimeout::kUnhealthy;
  std::optional<TimePoint> since;
  std::string ns;
  std::string fleet;           // label agones.dev/fleet ("" when none)
  std::string allocation;      // the allocation id the patch wrote or confirmed
  std::string bypass_outcome;  // for kBypassDeadline: the outcome written
  policy::OnUndelivered release_action = policy::OnUndelivered::kShutdown;  // for kRelease
  Status outcome;
  double patch_seconds = 0;   // time the API call took
  double queued_seconds = 0;  // time between the decision and the call
};

// What other threads hand to the loop: notifications (as keys added to the work queue), probe
// and patch completions (with their data), and the resync request. Guarded by `mu`.
struct Resolver::Inbox {
  Mutex mu;
  CondVar cv;                             // signalled when work arrives
  bool accepting GUARDED_BY(mu) = false;  // running or step mode
  bool stop GUARDED_BY(mu) = false;
  bool all GUARDED_BY(mu) = false;
  runtime::WorkQueueState queue GUARDED_BY(mu);  // keys to reconcile, now or at a due time
  std::vector<ProbeDone> probes GUARDED_BY(mu);
  std::vector<PatchDone> patches GUARDED_BY(mu);
  std::vector<std::shared_ptr<const GameServerView>> deleted GUARDED_BY(mu);  // last known views

  // When each queued key was queued (for workqueue_queue_duration_seconds).
  std::unordered_map<std::string, runtime::Clock::time_point> queued_at GUARDED_BY(mu);

  // Queues `key` at `now`; true when it was not queued already (workqueue_adds_total).
  bool Add(const std::string& key, runtime::Clock::time_point now) REQUIRES(mu) {
    const size_t before = queue.Ready();
    queue.Add(key);
    if (queue.Ready() == before) return false;
    queued_at.emplace(key, now);
    return true;
  }
  // Queues `key` for `due` (a retry: workqueue_retries_total counts it).
  void AddAfter(const std::string& key, runtime::Clock::time_point due) REQUIRES(mu) {
    queue.AddAfter(key, due);
    queued_at.emplace(key, due);
  }

  bool HasWork() const REQUIRES(mu) {
    return stop || all || queue.Ready() > 0 || !probes.empty() || !patches.empty() ||
           !deleted.empty();
  }
};

struct Resolver::Entry {
  std::string ns;
  std::string name;
  std::string allocation;
  TimePoint first_seen{};
  std::optional<ProbeObservation> last_probe;
  bool probe_in_flight = false;
  TimePoint next_probe{};
  bool patch_in_flight = false;
  std::string resolved_rv;  // our successful patch applied on top of this version
  std::string conflict_rv;  // our patch on this version was refused: wait for a newer view
  std::string seen_rv;      // the version last evaluated
  bool bypass = false;      // an Allocated server whose allocation bypassed the gate
  TimePoint retry_at{};
  std::chrono::milliseconds backoff{0};
};

namespace {

std::string Seconds(std::chrono::nanoseconds d) {
  if (d < std::chrono::nanoseconds::zero()) d = std::chrono::nanoseconds::zero();
  return util::FormatDuration(std::chrono::duration_cast<std::chrono::milliseconds>(d));
}

std::string Join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

// The work queue's time axis is the resolver's clock (WallClock, faked in tests): its time points
// carried as the same duration since the epoch. The queue never reads a clock itself.
runtime::Clock::time_point QueueTime(TimePoint t) {
  return runtime::Clock::time_point(
      std::chrono::duration_cast<runtime::Clock::duration>(t.time_since_epoch()));
}

TimePoint FromQueueTime(runtime::Clock::time_point t) {
  return TimePoint(std::chrono::duration_cast<TimePoint::duration>(t.time_since_epoch()));
}

// Whether the resolver has work on this server: it is Allocating, or Allocated with a bypass to
// record or resolve, or Allocated by the gateway and not delivered yet.
bool Watched(const GameServerView& gs) {
  return gs.state == keys::kStateAllocating || policy::BypassOf(gs) != policy::Bypass::kNone ||
         (gs.state == keys::kStateAllocated && AwaitsDelivery(gs));
}

std::pair<std::string, std::string> SplitKey(const std::string& key) {
  size_t slash = key.find('/');
  if (slash == std::string::npos) return {"", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

}  // namespace

Resolver::Resolver(ResolverOptions options, GameServerSource& source, Patcher& patcher,
                   EventRecorder& events, probe::Prober& prober, const WallClock& clock,
                   Executor& executor, Metrics* metrics)
    : options_(std::move(options)),
      source_(source),
      patcher_(patcher),
      events_(events),
      prober_(prober),
      clock_(clock),
      executor_(executor),
      metrics_(metrics),
      inbox_(std::make_shared<Inbox>()) {}

Resolver::~Resolver() {
  // Callbacks of probes and patches still in flight find the inbox closed (they hold it shared).
  MutexLock lock(inbox_->mu);
  inbox_->accepting = false;
  inbox_->stop = true;
}

void Resolver::Notify(const std::string& ns, const std::string& name) {
  MutexLock lock(inbox_->mu);
  if (!inbox_->accepting) return;
  const bool added = inbox_->Add(ns + "/" + name, QueueTime(clock_.Now()));
  if (added && metrics_) metrics_->CountQueueAdds(1);
  inbox_->cv.Signal();
}

void Resolver::NotifyAll() {
  MutexLock lock(inbox_->mu);
  if (!inbox_->accepting) return;
  inbox_->all = true;
  inbox_->cv.Signal();
}

void Resolver::NotifyDeleted(const std::string& ns, const std::string& name,
                             std::shared_ptr<const GameServerView> last_known) {
  MutexLock lock(inbox_->mu);
  if (!inbox_->accepting) return;
  if (last_known) inbox_->deleted.push_back(std::move(last_known));
  const bool added = inbox_->Add(ns + "/" + name, QueueTime(clock_.Now()));
  if (added && metrics_) metrics_->CountQueueAdds(1);
  inbox_->cv.Signal();
}

void Resolver::Reset() {
  entries_.clear();
  scaled_down_.clear();
  next_resync_ = TimePoint{};
  MutexLock lock(inbox_->mu);
  inbox_->queue.Clear();
  inbox_->queued_at.clear();
  inbox_->probes.clear();
  inbox_->patches.clear();
  inbox_->deleted.clear();
  inbox_->all = true;
  inbox_->stop = false;
  inbox_->accepting = true;
}

void Resolver::EnableStepMode() { Reset(); }

Status Resolver::Run(runtime::RunContext& ctx) {
  Loop(ctx.stop(), [&ctx] { ctx.Ready(); });
  return Status::Ok();
}

size_t Resolver::Tracked() const {
  size_t n = 0;
  for (const auto& [k, e] : entries_) {
    if (e.resolved_rv.empty() && !e.bypass) ++n;
  }
  return n;
}

std::optional<std::string> Resolver::Stalled() const {
  if (!looping_.load()) return std::nullopt;
  const auto beat = std::chrono::steady_clock::time_point(
      std::chrono::steady_clock::duration(heartbeat_ns_.load()));
  const auto age = std::chrono::steady_clock::now() - beat;
  if (age <= options_.stall_timeout) return std::nullopt;
  return "the resolver loop has not begun a pass for " +
         util::FormatDuration(std::chrono::duration_cast<std::chrono::milliseconds>(age)) +
         " (limit " + util::FormatDuration(options_.stall_timeout) + ")";
}

void Resolver::Loop(std::stop_token stop, const std::function<void()>& ready) {
  Reset();
  log::info("resolver started", {{"resync_period", util::FormatDuration(options_.resync_period)}});
  ready();
  looping_.store(true);
  for (;;) {
    heartbeat_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count());
    TimePoint next = Step();
    MutexLock lock(inbox_->mu);
    if (inbox_->stop || stop.stop_requested()) break;
    auto wait = next - clock_.Now();
    if (wait > std::chrono::seconds(1)) wait = std::chrono::seconds(1);
    if (wait > Clock::duration::zero()) {
      inbox_->cv.WaitFor(inbox_->mu, stop, wait,
                         [this]() REQUIRES(inbox_->mu) { return inbox_->HasWork(); });
    }
    if (inbox_->stop || stop.stop_requested()) break;
  }
  {
    MutexLock lock(inbox_->mu);
    inbox_->accepting = false;
    inbox_->stop = true;
  }
  looping_.store(false);
  entries_.clear();
  if (metrics_) {
    metrics_->SetAllocating(0);
    metrics_->SetBypassed(0);
  }
  log::info("resolver stopped");
}

TimePoint Resolver::Step() {
  TimePoint now = clock_.Now();
  bool all = false;
  std::vector<ProbeDone> probes;
  std::vector<PatchDone> patches;
  std::vector<std::shared_ptr<const GameServerView>> deleted;
  {
    MutexLock lock(inbox_->mu);
    all = inbox_->all;
    inbox_->all = false;
    probes.swap(inbox_->probes);
    patches.swap(inbox_->patches);
    deleted.swap(inbox_->deleted);
  }
  // A scale-down whose object went before the resolver saw it is recorded from the last known
  // object; either way the record is forgotten with the object.
  for (const auto& gs : deleted) {
    const std::string key = gs->Key();
    if (IsScaledDown(*gs)) RecordScaledDown(key, *gs, now);
    ForgetScaledDown(key);
  }
  // Completions update the server's state and queue its key; a resync queues every key.
  for (auto& p : patches) OnPatchDone(std::move(p), now);
  for (auto& p : probes) OnProbeDone(std::move(p));
  if (all || now >= next_resync_) {
    Resync();
    next_resync_ = now + options_.resync_period;
  }
  // Take every key ready now, then reconcile them: a key queued again during this pass (its own
  // requeue, a notification) waits for the next one, so a pass always ends.
  std::vector<std::string> ready;
  std::vector<double> waits;  // seconds each key was queued
  {
    MutexLock lock(inbox_->mu);
    const runtime::Clock::time_point qnow = QueueTime(now);
    inbox_->queue.PromoteDue(qnow);
    while (std::optional<std::string> key = inbox_->queue.Pop()) {
      auto it = inbox_->queued_at.find(*key);
      if (it != inbox_->queued_at.end()) {
        waits.push_back(std::max(0.0, std::chrono::duration<double>(qnow - it->second).count()));
        inbox_->queued_at.erase(it);
      }
      ready.push_back(std::move(*key));
    }
  }
  if (metrics_) {
    for (double w : waits) metrics_->ObserveQueueWait(w);
  }
  for (const auto& key : ready) {
    const auto started = std::chrono::steady_clock::now();
    std::optional<TimePoint> again = Reconcile(key, now);
    if (metrics_) {
      metrics_->ObserveReconcile(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
          again.has_value());
    }
    MutexLock lock(inbox_->mu);
    inbox_->queue.Done(key);
    if (again) inbox_->AddAfter(key, QueueTime(*again));
  }
  UpdateGauge();
  TimePoint next = next_resync_;
  MutexLock lock(inbox_->mu);
  if (metrics_) metrics_->SetQueueDepth(inbox_->queue.Ready());
  if (inbox_->queue.Ready() > 0) return now;
  if (auto due = inbox_->queue.NextDue()) next = std::min(next, FromQueueTime(*due));
  return next;
}

void Resolver::Resync() {
  std::vector<std::string> keys;
  for (const auto& gs : source_.List()) {
    if (gs) keys.push_back(gs->Key());
  }
  for (const auto& [key, allocation] : scaled_down_) keys.push_back(key);  // forgotten when gone
  for (const auto& [key, e] : entries_) keys.push_back(key);  // also those gone from the source
  const runtime::Clock::time_point qnow = QueueTime(clock_.Now());
  size_t added = 0;
  MutexLock lock(inbox_->mu);
  for (const auto& key : keys) added += inbox_->Add(key, qnow) ? 1 : 0;
  if (metrics_ && added > 0) metrics_->CountQueueAdds(added);
}

void Resolver::Enqueue(const std::string& key) {
  MutexLock lock(inbox_->mu);
  const bool added = inbox_->Add(key, QueueTime(clock_.Now()));
  if (added && metrics_) metrics_->CountQueueAdds(1);
}

void Resolver::Drop(const std::string& key, const char* why) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  if (it->second.resolved_rv.empty()) {
    log::info("resolver: dropped", {{"gameserver", key}, {"why", why}});
  }
  entries_.erase(it);
}

void Resolver::RecordScaledDown(const std::string& key, const GameServerView& gs, TimePoint now) {
  auto [it, inserted] = scaled_down_.try_emplace(key, gs.allocation);
  if (!inserted) {
    if (it->second == gs.allocation) return;  // recorded already
    it->second = gs.allocation;
  }
  const auto held = gs.since ? now - *gs.since : Clock::duration::zero();
  const double held_seconds = std::max(std::chrono::duration<double>(held).count(), 0.0);
  if (metrics_) {
    metrics_->CountScaledDown();
    metrics_->ObserveDuration(keys::kOutcomeScaledDown, held_seconds);
  }
  log::info("resolver: scaled down while Allocating",
            {{"gameserver", key},
             {"allocation", gs.allocation},
             {"allocating_seconds", std::to_string(held_seconds)}});
  std::string message =
      "Shut down by the Agones controller (scale-down or rolling update) " + Seconds(held) +
      " after entering Allocating, before it was confirmed playable (allocation " + gs.allocation +
      ", " + std::string(keys::kOnScaleDown) + ": Shutdown); no players had been sent to it";
  auto view = std::make_shared<GameServerView>(gs);
  EventRecorder& events = events_;
  executor_.Post([view, message = std::move(message), &events] {
    events.Record(*view, EventType::kNormal, "AllocatingScaledDown", message);
  });
}

void Resolver::ForgetScaledDown(const std::string& key) { scaled_down_.erase(key); }

std::optional<TimePoint> Resolver::Reconcile(const std::string& key, TimePoint now) {
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.patch_in_flight)
    return std::nullopt;  // requeued on completion
  auto [ns, name] = SplitKey(key);
  std::shared_ptr<const GameServerView> gs = source_.Get(ns, name);
  if (!gs) {
    ForgetScaledDown(key);
    Drop(key, "deleted");
    return std::nullopt;
  }
  if (IsScaledDown(*gs)) {
    // The webhook let the Agones controller's scale-down through (on-scale-down: Shutdown):
    // nothing is left to resolve, only the outcome to record.
    RecordScaledDown(key, *gs, now);
    entries_.erase(key);
    return std::nullopt;
  }
  if (it != entries_.end() && !it->second.resolved_rv.empty() &&
      gs->resource_version == it->second.resolved_rv) {
    return std::nullopt;  // the cache has not caught up with our own write yet
  }
  if (it == entries_.end()) {
    if (!gs->OptedIn() || gs->deleting || !Watched(*gs)) return std::nullopt;
    Entry fresh;
    fresh.ns = ns;
    fresh.name = name;
    fresh.allocation = gs->allocation;
    fresh.first_seen = now;
    it = entries_.emplace(key, std::move(fresh)).first;
  }
  Entry& e = it->second;
  e.bypass = policy::BypassOf(*gs) != policy::Bypass::kNone;
  if (!e.resolved_rv.empty() && !Watched(*gs)) {
    entries_.erase(it);  // our own write came back: done
    return std::nullopt;
  }
  if (e.allocation != gs->allocation || !e.resolved_rv.empty()) {
    // A new allocation cycle (or the object moved on after our write): start over.
    e.allocation = gs->allocation;
    e.first_seen = now;
    e.last_probe.reset();
    e.resolved_rv.clear();
    e.conflict_rv.clear();
    e.backoff = std::chrono::milliseconds(0);
    e.retry_at = TimePoint{};
    e.next_probe = TimePoint{};
  }

  policy::GateConfigResult parsed = ParseGateConfig(gs->annotations, options_.policy);
  if (!parsed.ok()) {
    log::debug("resolver: invalid gate annotations, using defaults",
               {{"gameserver", key}, {"error", parsed.ErrorText()}});
  }
  const policy::GateConfig& config = parsed.config;
  const ProbeObservation* last = e.last_probe ? &*e.last_probe : nullptr;
  Evaluation ev = Evaluate(*gs, config, last, now, e.first_seen, options_.undelivered_grace);

  switch (ev.verdict) {
    case Verdict::kIgnore:
    case Verdict::kScaledDown:  // recorded above, before any entry was made
      Drop(key, ev.reason.c_str());
      return std::nullopt;
    case Verdict::kPromote:
    case Verdict::kTimeOut:
    case Verdict::kRecordBypass:
    case Verdict::kConfirmBypass:
    case Verdict::kBypassDeadline:
    case Verdict::kRelease:
      if (!e.conflict_rv.empty() && gs->resource_version == e.conflict_rv && now < e.retry_at) {
        return e.retry_at;  // wait for a newer view (or the backoff)
      }
      if (e.conflict_rv.empty() && now < e.retry_at) return e.retry_at;
      DispatchPatch(e, key, *gs, ev, now);
      return std::nullopt;  // requeued when the patch completes
    case Verdict::kWait:
      break;
  }
  TimePoint due = ev.deadline;
  if (ev.release_at) due = std::min(due, *ev.release_at);  // the gateway's answer-by + grace
  const bool changed = gs->resource_version != e.seen_rv;
  e.seen_rv = gs->resource_version;
  if (ev.probe) {
    // The object just changed and the probe is all that is missing (e.g. the game server has
    // just confirmed): probe now rather than at the next period.
    const bool only_probe_missing =
        !config.require_annotation || !ReadinessAnnotationProblem(*gs).has_value();
    if (!e.probe_in_flight &&
        (now >= e.next_probe ||
         (changed && only_probe_missing && e.last_probe && !e.last_probe->result.ok()))) {
      StartProbe(e, key, *ev.probe, config.probe_period, now);
    }
    // While a probe is in flight its completion requeues the key (a probe can outlast its
    // period when the prober's queue is long); otherwise wake for the next probe.
    if (!e.probe_in_flight) due = std::min(due, e.next_probe);
  }
  return due;
}

void Resolver::StartProbe(Entry& e, const std::string& key, const probe::Target& target,
                          std::chrono::nanoseconds period, TimePoint now) {
  e.probe_in_flight = true;
  e.next_probe = now + std::chrono::duration_cast<Clock::duration>(period);
  std::weak_ptr<Inbox> weak = inbox_;
  probe::Target t = target;
  auto cap = std::chrono::duration_cast<std::chrono::milliseconds>(period * 3 / 4);
  t.timeout = std::max(std::chrono::milliseconds(1), std::min(options_.probe_timeout, cap));
  ProbeObservation obs{e.allocation, t, {}};
  prober_.Probe(t, [weak, key, obs](probe::Result r) mutable {
    auto inbox = weak.lock();
    if (!inbox) return;
    obs.result = std::move(r);
    MutexLock lock(inbox->mu);
    if (!inbox->accepting) return;
    inbox->probes.push_back(ProbeDone{key, std::move(obs)});
    inbox->cv.Signal();
  });
}

void Resolver::OnProbeDone(ProbeDone done) {
  if (metrics_) {
    metrics_->CountProbe(probe::TypeName(done.obs.target.type),
                         probe::StatusName(done.obs.result.status));
  }
  auto it = entries_.find(done.key);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  if (e.allocation != done.obs.allocation) return;  // for an earlier allocation
  e.probe_in_flight = false;
  log::debug("resolver: probe", {{"gameserver", done.key},
                                 {"target", probe::Describe(done.obs.target)},
                                 {"result", std::string(probe::StatusName(done.obs.result.status))},
                                 {"detail", done.obs.result.detail}});
  e.last_probe = std::move(done.obs);
  Enqueue(done.key);
}

void Resolver::DispatchPatch(Entry& e, const std::string& key, const GameServerView& gs,
                             const Evaluation& ev, TimePoint now) {
  e.patch_in_flight = true;
  bool promote = ev.verdict == Verdict::kPromote;
  std::string patch;
  std::string held = Seconds(now - gs.since.value_or(e.first_seen));
  std::string reason;
  std::string message;
  EventType type;
  PatchDone done;
  done.allocation = gs.allocation;
  if (ev.verdict == Verdict::kRelease) {
    patch = ReleasePatch(gs, ev.release_action);
    done.release_action = ev.release_action;
    type = EventType::kWarning;
    reason = "AllocatingUndelivered";
    message = "Allocated by the allocation gateway (answer-by " +
              std::string(gs.Annotation(keys::kAnswerBy).value_or("")) +
              ") and never delivered to a client (no " + std::string(keys::kDelivered) +
              "): nobody was told its address; " + std::string(keys::kOnUndelivered) +
              " moved it to " + std::string(policy::OnUndeliveredName(ev.release_action)) +
              " (allocation " + gs.allocation + ", state was " + gs.state + ")";
  } else if (ev.verdict == Verdict::kRecordBypass) {
    patch = RecordBypassPatch(gs, ev.bypass_allocation, ev.bypass_since_text);
    done.allocation = ev.bypass_allocation;
    type = EventType::kWarning;
    reason = "AllocatingBypassed";
    message = "Reached Allocated without passing the allocating gate (allocation " +
              ev.bypass_allocation +
              "): admission was skipped (webhook unreachable under failurePolicy Ignore) or "
              "failed open (the CRD lacks Allocating). Readiness is checked after the fact; until "
              "it is confirmed the server may not be playable";
  } else if (ev.verdict == Verdict::kConfirmBypass) {
    patch = ConfirmBypassPatch(gs);
    type = EventType::kNormal;
    reason = "AllocatingBypassConfirmed";
    message = "Bypassed allocation " + gs.allocation + " confirmed playable after the fact, " +
              held + " after it was allocated";
  } else if (ev.verdict == Verdict::kBypassDeadline) {
    patch = BypassDeadlinePatch(gs, *ev.bypass_action);
    done.bypass_outcome = std::string(ev.bypass_action->outcome);
    type = EventType::kWarning;
    reason = "AllocatingBypassUnconfirmed";
    message = "Bypassed allocation " + gs.allocation +
              " not confirmed playable within its deadline (" + held +
              "); left Allocated (players may be on it), outcome " + done.bypass_outcome +
              ". Checks that failed last: " + Join(ev.failed, "; ");
  } else if (promote) {
    patch = PromotePatch(gs);
    type = EventType::kNormal;
    reason = "AllocatingConfirmed";
    message = "Confirmed playable after " + held + " in Allocating (allocation " + gs.allocation +
              "); moved to Allocated";
  } else {
    patch = TimeoutPatch(gs, ev.action);
    type = EventType::kWarning;
    reason = "AllocatingTimedOut";
    message = "Not confirmed playable within its deadline (" + held +
              " in Allocating, allocation " + gs.allocation + "); on-timeout moved it to " +
              std::string(policy::OnTimeoutName(ev.action)) +
              ". Checks that failed last: " + Join(ev.failed, "; ");
  }
  done.key = key;
  done.ns = gs.namespace_;
  done.fleet = std::string(gs.Label("agones.dev/fleet").value_or(""));
  done.resource_version = gs.resource_version;
  done.verdict = ev.verdict;
  done.action = ev.action;
  done.since = gs.since ? gs.since : std::optional<TimePoint>(e.first_seen);
  std::weak_ptr<Inbox> weak = inbox_;
  auto view = std::make_shared<GameServerView>(gs);
  Patcher& patcher = patcher_;
  EventRecorder& events = events_;
  auto decided = std::chrono::steady_clock::now();
  executor_.Post([weak, view, patch = std::move(patch), type, reason = std::move(reason),
                  message = std::move(message), done = std::move(done), &patcher, &events,
                  decided]() mutable {
    auto start = std::chrono::steady_clock::now();
    done.queued_seconds = std::chrono::duration<double>(start - decided).count();
    // The patch is sent without holding a thread; its completion (on the Kubernetes client's I/O
    // thread, or inline with a blocking fake) records the Event and hands the result to the loop.
    patcher.PatchGameServerAsync(
        view->namespace_, view->name, patch,
        [weak, view, type, reason = std::move(reason), message = std::move(message),
         done = std::move(done), &events, start](Status outcome) mutable {
          done.outcome = std::move(outcome);
          done.patch_seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          if (done.outcome.ok()) events.Record(*view, type, reason, message);
          auto inbox = weak.lock();
          if (!inbox) return;
          MutexLock lock(inbox->mu);
          if (!inbox->accepting) return;
          inbox->patches.push_back(std::move(done));
          inbox->cv.Signal();
        });
  });
}

void Resolver::OnPatchDone(PatchDone done, TimePoint now) {
  if (metrics_ && !done.outcome.ok()) metrics_->CountReconcileError();
  auto it = entries_.find(done.key);
  const bool promote = done.verdict == Verdict::kPromote;
  const bool bypass = done.verdict == Verdict::kRecordBypass ||
                      done.verdict == Verdict::kConfirmBypass ||
                      done.verdict == Verdict::kBypassDeadline;
  const bool release = done.verdict == Verdict::kRelease;
  const std::string what(bypass || release ? VerdictName(done.verdict)
                         : promote         ? "promote"
                                           : "timeout");
  const PatchStatus status = PatchStatusOf(done.outcome);
  if (status == PatchStatus::kOk && release) {
    if (metrics_) metrics_->CountUndelivered(done.ns, done.fleet);
    log::warn("resolver: released a server the gateway allocated and never delivered",
              {{"gameserver", done.key},
               {"fleet", done.fleet},
               {"allocation", done.allocation},
               {"state", std::string(policy::OnUndeliveredName(done.release_action))}});
  } else if (status == PatchStatus::kOk && bypass) {
    double since = done.since ? std::chrono::duration<double>(now - *done.since).count() : 0;
    if (done.verdict == Verdict::kRecordBypass) {
      if (metrics_) metrics_->CountBypass(done.ns, done.fleet);
      log::warn("resolver: allocation bypassed the gate; checking readiness after the fact",
                {{"gameserver", done.key}, {"fleet", done.fleet}, {"allocation", done.allocation}});
    } else {
      const std::string outcome = done.verdict == Verdict::kConfirmBypass
                                      ? std::string(keys::kOutcomeConfirmed)
                                      : done.bypass_outcome;
      if (metrics_) metrics_->CountBypassResolved(outcome);
      log::info("resolver: bypassed allocation resolved",
                {{"gameserver", done.key},
                 {"allocation", done.allocation},
                 {"outcome", outcome},
                 {"allocated_seconds", std::to_string(std::max(since, 0.0))}});
    }
  } else if (status == PatchStatus::kOk) {
    double held = done.since ? std::chrono::duration<double>(now - *done.since).count() : 0;
    if (metrics_) {
      metrics_->ObserveDuration(promote ? keys::kOutcomeConfirmed : keys::kOutcomeTimedOut,
                                std::max(held, 0.0));
      if (promote)
        metrics_->CountPromotion();
      else
        metrics_->CountTimeout(policy::OnTimeoutName(done.action));
    }
    log::info(promote ? "resolver: promoted to Allocated" : "resolver: timed out",
              {{"gameserver", done.key},
               {"state", promote ? std::string(keys::kStateAllocated)
                                 : std::string(policy::OnTimeoutName(done.action))},
               {"allocating_seconds", std::to_string(held)},
               {"patch_seconds", std::to_string(done.patch_seconds)},
               {"queued_seconds", std::to_string(done.queued_seconds)}});
  }
  if (it == entries_.end()) return;
  Entry& e = it->second;
  e.patch_in_flight = false;
  switch (status) {
    case PatchStatus::kOk:
      e.resolved_rv = done.resource_version;
      e.conflict_rv.clear();
      e.backoff = std::chrono::milliseconds(0);
      break;
    case PatchStatus::kConflict:
      if (metrics_) metrics_->CountConflict();
      log::debug("resolver: conflict, re-deciding",
                 {{"gameserver", done.key}, {"action", what}, {"message", done.outcome.message()}});
      e.conflict_rv = done.resource_version;
      e.backoff = std::clamp(e.backoff * 2, options_.retry_initial, options_.retry_max);
      e.retry_at = now + e.backoff;
      break;
    case PatchStatus::kNotFound:
      return Drop(done.key, "deleted");
    case PatchStatus::kRejected:
    case PatchStatus::kRetry:
      if (metrics_) metrics_->CountPatchError(PatchStatusName(status));
      log::warn("resolver: patch failed, will retry",
                {{"gameserver", done.key},
                 {"action", what},
                 {"status", std::string(PatchStatusName(status))},
                 {"message", done.outcome.message()}});
      e.conflict_rv.clear();
      e.backoff = std::clamp(e.backoff * 2,
                             status == PatchStatus::kRejected
                                 ? std::max(options_.retry_initial, std::chrono::milliseconds(1000))
                                 : options_.retry_initial,
                             std::max(options_.retry_max, options_.retry_initial));
      e.retry_at = now + e.backoff;
      break;
  }
  Enqueue(done.key);
}

void Resolver::UpdateGauge() {
  if (!metrics_) return;
  metrics_->SetAllocating(Tracked());
  size_t bypassed = 0;
  for (const auto& [k, e] : entries_) bypassed += e.bypass ? 1 : 0;
  metrics_->SetBypassed(bypassed);
}

PatchStatus PatchStatusOf(const Status& status) {
  switch (status.code()) {
    case Status::Code::kOk:
      return PatchStatus::kOk;
    case Status::Code::kConflict:
      return PatchStatus::kConflict;
    case Status::Code::kNotFound:
      return PatchStatus::kNotFound;
    case Status::Code::kUnavailable:
    case Status::Code::kDeadlineExceeded:
    case Status::Code::kCancelled:
      return PatchStatus::kRetry;
    default:
      return PatchStatus::kRejected;
  }
}

std::string_view PatchStatusName(PatchStatus s) {
  switch (s) {
    case PatchStatus::kOk:
      return "ok";
    case PatchStatus::kConflict:
      return "conflict";
    case PatchStatus::kNotFound:
      return "not_found";
    case PatchStatus::kRejected:
      return "rejected";
    case PatchStatus::kRetry:
      return "retry";
  }
  return "unknown";
}

}  // namespace aw::resolver
