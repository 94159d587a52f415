#include "kube/leader_election.h"

#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <optional>
#include <random>

#include "kube/core/lease_logic.h"
#include "util/io/log.h"

namespace aw::kube {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string ValidateLeaderElectionConfig(const LeaderElectionConfig& c) {
  if (c.identity.empty()) return "leader election identity must not be empty";
  if (c.name.empty() || c.namespace_.empty())
    return "leader election lease name and namespace must not be empty";
  if (c.retry_period.count() <= 0) return "--retry-period must be > 0";
  if (c.lease_duration <= c.renew_deadline)
    return "--lease-duration must be greater than --renew-deadline";
  if (c.renew_deadline.count() <=
      static_cast<int64_t>(1.2 * static_cast<double>(c.retry_period.count()))) {
    return "--renew-deadline must be greater than 1.2 x --retry-period";
  }
  if (c.lease_duration < std::chrono::seconds(1)) return "--lease-duration must be at least 1s";
  return {};
}

// The state machine. Every field below `mu` is touched only on the executor (one thread: the
// Kubernetes I/O thread), by the handlers, which hold a shared_ptr to it; the fields under `mu`
// are what Stop() and the readers on other threads share with it.
struct LeaderElector::Core {
  Core(Client& c, const LeaderElectionConfig& cfg, const LeaderCallbacks& cb,
       prometheus::Gauge* gauge, prometheus::Counter* transitions)
      : client(c),
        cfg(cfg),
        cb(cb),
        gauge(gauge),
        transitions(transitions),
        timer(c.executor()),
        gen(std::random_device{}()) {}

  Client& client;
  const LeaderElectionConfig cfg;
  const LeaderCallbacks cb;
  prometheus::Gauge* const gauge;
  prometheus::Counter* const transitions;

  std::atomic<bool> leading{false};
  mutable Mutex mu;
  CondVar cv;  // signalled when finished
  bool stop_requested GUARDED_BY(mu) = false;
  bool finished GUARDED_BY(mu) = false;  // no more callbacks, no more writes
  std::string last_leader GUARDED_BY(mu);
  // Held while a callback runs; Stop() clears callbacks_on under it when it gives up waiting, so
  // no callback runs after Stop() returned.
  Mutex cb_mu;
  bool callbacks_on GUARDED_BY(cb_mu) = true;

  // Executor only.
  boost::asio::steady_timer timer;
  std::mt19937 gen;
  bool stopping = false;         // the executor saw the stop request
  bool round_in_flight = false;  // a Get/Create/Update of a round is outstanding
  std::optional<LeaseRecord> observed;
  Clock::time_point observed_time{};
  Clock::time_point last_renew{};
  JsonPtr held;  // the Lease as last written by us (for the release)

  std::string Lease() const { return cfg.namespace_ + "/" + cfg.name; }

  milliseconds CallTimeout() const {
    return std::clamp<milliseconds>(cfg.retry_period * 2, milliseconds(1000),
                                    std::min<milliseconds>(cfg.renew_deadline, milliseconds(5000)));
  }

  void Call(const std::function<void()>& f) EXCLUDES(cb_mu) {
    MutexLock lk(cb_mu);
    if (callbacks_on && f) f();
  }

  void SetLeading(bool now_leading) {
    if (leading.exchange(now_leading) == now_leading) return;
    if (gauge) gauge->Set(now_leading ? 1 : 0);
    if (transitions) transitions->Increment();
    if (now_leading) {
      log::info("leader election: started leading",
                {{"lease", Lease()}, {"identity", cfg.identity}});
      Call(cb.on_started_leading);
    } else {
      log::warn("leader election: stopped leading",
                {{"lease", Lease()}, {"identity", cfg.identity}});
      held.reset();  // a lease we no longer lead on is not ours to release
      Call(cb.on_stopped_leading);
    }
  }

  void ObserveLeader(const std::string& holder) {
    bool changed = false;
    {
      MutexLock lk(mu);
      if (holder != last_leader) {
        last_leader = holder;
        changed = true;
      }
    }
    if (!changed) return;
    log::info("leader election: observed leader",
              {{"lease", Lease()}, {"leader", holder.empty() ? "<none>" : holder}});
    if (cb.on_new_leader) Call([&] { cb.on_new_leader(holder); });
  }

  void Schedule(milliseconds d, const std::shared_ptr<Core>& self) {
    timer.expires_after(d);
    timer.async_wait([self](const boost::system::error_code& ec) {
      if (ec || self->stopping) return;
      self->Round(self);
    });
  }

  // One acquire-or-renew round: GET, then (unless someone else holds a valid lease) POST or PUT.
  void Round(const std::shared_ptr<Core>& self) {
    round_in_flight = true;
    client.GetAsync(
        kLeases, cfg.namespace_, cfg.name,
        [self](Result<JsonPtr> got) { self->OnGot(self, std::move(got)); }, CallTimeout());
  }

  void OnGot(const std::shared_ptr<Core>& self, Result<JsonPtr> got) {
    if (stopping) return RoundDone(self, false);
    auto now = Clock::now();
    std::optional<LeaseRecord> current;
    JsonPtr doc;
    if (!got) {
      if (!got.error().IsNotFound()) {
        log::warn("leader election: cannot read the lease",
                  {{"lease", Lease()}, {"error", got.error().ToString()}});
        return RoundDone(self, false);
      }
    } else {
      doc = *got;
      current = LeaseRecordFromObject(*doc);
      if (!observed || !(*observed == *current)) {
        observed = current;
        observed_time = now;
      }
      ObserveLeader(current->holder_identity);
    }
    LeaseAction action = DecideLease({current, cfg.identity, observed_time, now});
    if (action == LeaseAction::kWait) return RoundDone(self, false);
    int secs = static_cast<int>(std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::seconds>(cfg.lease_duration).count()));
    LeaseRecord next = NextLeaseRecord(action, current, cfg.identity, secs,
                                       FormatMicroTime(std::chrono::system_clock::now()));
    auto written = [self, next](Result<JsonPtr> res) {
      self->OnWritten(self, next, std::move(res));
    };
    if (action == LeaseAction::kCreate) {
      rapidjson::Document d(rapidjson::kObjectType);
      auto& a = d.GetAllocator();
      d.AddMember("apiVersion", "coordination.k8s.io/v1", a);
      d.AddMember("kind", "Lease", a);
      rapidjson::Value md(rapidjson::kObjectType);
      md.AddMember("name", rapidjson::Value(cfg.name.c_str(), a), a);
      md.AddMember("namespace", rapidjson::Value(cfg.namespace_.c_str(), a), a);
      d.AddMember("metadata", md, a);
      WriteLeaseRecord(next, &d);
      client.CreateAsync(kLeases, cfg.namespace_, ToJson(d), std::move(written), CallTimeout());
    } else {
      WriteLeaseRecord(next, doc.get());
      client.UpdateAsync(kLeases, cfg.namespace_, cfg.name, ToJson(*doc), std::move(written),
                         CallTimeout());
    }
  }

  void OnWritten(const std::shared_ptr<Core>& self, const LeaseRecord& next, Result<JsonPtr> res) {
    if (!res) {
      const ApiError& e = res.error();
      if (!e.IsConflict() && !e.IsAlreadyExists() && !stopping) {
        log::warn("leader election: cannot write the lease",
                  {{"lease", Lease()}, {"error", e.ToString()}});
      }
      return RoundDone(self, false);
    }
    observed = next;
    observed_time = Clock::now();
    held = *res;  // also while stopping: the release writes over the latest version
    ObserveLeader(cfg.identity);
    RoundDone(self, true);
  }

  // Where every round ends: the transitions of client-go's acquire and renew loops, then the
  // next round's timer, or (after a stop request) the end.
  void RoundDone(const std::shared_ptr<Core>& self, bool ok) {
    round_in_flight = false;
    if (stopping) return Finish(self);
    if (ok) {
      last_renew = Clock::now();
      SetLeading(true);
      return Schedule(cfg.retry_period, self);
    }
    if (leading.load()) {
      if (observed && !observed->holder_identity.empty() &&
          observed->holder_identity != cfg.identity) {
        log::warn("leader election: another replica holds the lease",
                  {{"identity", cfg.identity}, {"leader", observed->holder_identity}});
        SetLeading(false);
        return Round(self);  // a candidate again, at once
      }
      if (Clock::now() - last_renew >= cfg.renew_deadline) {
        log::warn("leader election: failed to renew within the renew deadline",
                  {{"identity", cfg.identity}});
        SetLeading(false);
        return Round(self);
      }
      return Schedule(cfg.retry_period, self);
    }
    // client-go: JitterUntil(retryPeriod, 1.2): wait retry * [1, 2.2).
    std::uniform_real_distribution<double> jitter(0.0, 1.2);
    return Schedule(milliseconds(static_cast<int64_t>(
                        static_cast<double>(cfg.retry_period.count()) * (1.0 + jitter(gen)))),
                    self);
  }

  // On the executor, once Stop() asked.
  // The leader's work stops first (at once, even with a round in flight), then the lease is
  // handed over once no round is outstanding.
  void OnStop(const std::shared_ptr<Core>& self) {
    if (stopping) return;
    stopping = true;
    timer.cancel();
    bool release = leading.load();
    JsonPtr lease = held;
    SetLeading(false);
    if (release) held = lease;
    if (!round_in_flight) Finish(self);  // else RoundDone finishes
  }

  // Hands the lease over (one update) when we hold it, then reports finished.
  void Finish(const std::shared_ptr<Core>& self) {
    SetLeading(false);  // a round that acquired while stopping
    if (!held) return MarkFinished();
    LeaseRecord cur = LeaseRecordFromObject(*held);
    if (cur.holder_identity != cfg.identity) return MarkFinished();
    WriteLeaseRecord(ReleasedLeaseRecord(cur, FormatMicroTime(std::chrono::system_clock::now())),
                     held.get());
    client.UpdateAsync(
        kLeases, cfg.namespace_, cfg.name, ToJson(*held),
        [self](Result<JsonPtr> r) {
          if (r) {
            log::info("leader election: released the lease",
                      {{"lease", self->Lease()}, {"identity", self->cfg.identity}});
          } else {
            log::warn("leader election: could not release the lease",
                      {{"error", r.error().ToString()}});
          }
          self->MarkFinished();
        },
        milliseconds(1000));
  }

  void MarkFinished() {
    MutexLock lk(mu);
    finished = true;
    cv.SignalAll();
  }
};

LeaderElector::LeaderElector(Client& client, LeaderElectionConfig cfg, LeaderCallbacks cb,
                             prometheus::Registry* registry)
    : client_(client), cfg_(std::move(cfg)), cb_(std::move(cb)) {
  if (registry) {
    gauge_ = &prometheus::BuildGauge()
                  .Name("allocating_webhook_leader")
                  .Help("1 while this replica holds the leader-election Lease")
                  .Register(*registry)
                  .Add({});
    transitions_ = &prometheus::BuildCounter()
                        .Name("allocating_webhook_leader_transitions_total")
                        .Help("Times this replica started or stopped leading")
                        .Register(*registry)
                        .Add({});
  }
}

LeaderElector::~LeaderElector() { Stop(); }

void LeaderElector::Start() {
  std::shared_ptr<Core> core;
  {
    MutexLock lk(mu_);
    if (core_) {
      MutexLock ck(core_->mu);
      if (!core_->stop_requested) return;  // running
    }
    core_ = std::make_shared<Core>(client_, cfg_, cb_, gauge_, transitions_);
    core = core_;
  }
  log::info("leader election: starting",
            {{"lease", cfg_.namespace_ + "/" + cfg_.name}, {"identity", cfg_.identity}});
  boost::asio::post(core->timer.get_executor(), [core] {
    if (!core->stopping) core->Round(core);
  });
}

void LeaderElector::Stop() {
  std::shared_ptr<Core> core;
  {
    MutexLock lk(mu_);
    core = core_;
  }
  if (!core) return;
  bool first = false;
  {
    MutexLock lk(core->mu);
    first = !core->stop_requested;
    core->stop_requested = true;
  }
  if (first) boost::asio::post(core->timer.get_executor(), [core] { core->OnStop(core); });
  // A round in flight (at most its call timeout) and then the release (1 s).
  bool done = false;
  {
    MutexLock lk(core->mu);
    done = core->cv.WaitFor(core->mu, core->CallTimeout() + milliseconds(1500),
                            [&]() REQUIRES(core->mu) { return core->finished; });
  }
  if (!done) {
    log::warn("leader election: stop did not finish in time; abandoning the lease release",
              {{"lease", cfg_.namespace_ + "/" + cfg_.name}});
    MutexLock lk(core->cb_mu);
    core->callbacks_on = false;
  }
}

bool LeaderElector::IsLeader() const {
  MutexLock lk(mu_);
  return core_ && core_->leading.load();
}

std::string LeaderElector::CurrentLeader() const {
  std::shared_ptr<Core> core;
  {
    MutexLock lk(mu_);
    core = core_;
  }
  if (!core) return {};
  MutexLock lk(core->mu);
  return core->last_leader;
}

}  // namespace aw::kube
