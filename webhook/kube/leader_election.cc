#include "kube/leader_election.h"

#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <random>

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
  if (thread_.joinable()) return;
  stop_.store(false);
  log::info("leader election: starting",
            {{"lease", cfg_.namespace_ + "/" + cfg_.name}, {"identity", cfg_.identity}});
  thread_ = std::thread([this] { Run(); });
}

void LeaderElector::Stop() {
  {
    MutexLock lk(mu_);
    stop_.store(true);
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

std::string LeaderElector::CurrentLeader() const {
  MutexLock lk(leader_mu_);
  return last_leader_;
}

bool LeaderElector::Sleep(milliseconds d) {
  MutexLock lk(mu_);
  cv_.WaitFor(mu_, d, [&] { return stop_.load(); });
  return !stop_.load();
}

void LeaderElector::SetLeading(bool leading) {
  if (leading_.exchange(leading) == leading) return;
  if (gauge_) gauge_->Set(leading ? 1 : 0);
  if (transitions_) transitions_->Increment();
  if (leading) {
    log::info("leader election: started leading",
              {{"lease", cfg_.namespace_ + "/" + cfg_.name}, {"identity", cfg_.identity}});
    if (cb_.on_started_leading) cb_.on_started_leading();
  } else {
    log::warn("leader election: stopped leading",
              {{"lease", cfg_.namespace_ + "/" + cfg_.name}, {"identity", cfg_.identity}});
    if (cb_.on_stopped_leading) cb_.on_stopped_leading();
  }
}

bool LeaderElector::TryAcquireOrRenew() {
  auto call_timeout =
      std::clamp<milliseconds>(cfg_.retry_period * 2, milliseconds(1000),
                               std::min<milliseconds>(cfg_.renew_deadline, milliseconds(5000)));
  auto got = client_.Get(kLeases, cfg_.namespace_, cfg_.name, call_timeout);
  auto now = Clock::now();
  std::optional<LeaseRecord> current;
  JsonPtr doc;
  if (!got) {
    if (!got.error().IsNotFound()) {
      if (!stop_.load()) {
        log::warn(
            "leader election: cannot read the lease",
            {{"lease", cfg_.namespace_ + "/" + cfg_.name}, {"error", got.error().ToString()}});
      }
      return false;
    }
  } else {
    doc = *got;
    current = LeaseRecordFromObject(*doc);
    if (!observed_ || !(*observed_ == *current)) {
      observed_ = current;
      observed_time_ = now;
    }
    std::string holder = current->holder_identity;
    bool changed = false;
    {
      MutexLock lk(leader_mu_);
      if (holder != last_leader_) {
        last_leader_ = holder;
        changed = true;
      }
    }
    if (changed) {
      log::info("leader election: observed leader",
                {{"lease", cfg_.namespace_ + "/" + cfg_.name},
                 {"leader", holder.empty() ? "<none>" : holder}});
      if (cb_.on_new_leader) cb_.on_new_leader(holder);
    }
  }
  LeaseAction action = DecideLease({current, cfg_.identity, observed_time_, now});
  if (action == LeaseAction::kWait) return false;
  int secs = static_cast<int>(std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(cfg_.lease_duration).count()));
  LeaseRecord next = NextLeaseRecord(action, current, cfg_.identity, secs,
                                     FormatMicroTime(std::chrono::system_clock::now()));
  Result<JsonPtr> res = ApiError{};
  if (action == LeaseAction::kCreate) {
    rapidjson::Document d(rapidjson::kObjectType);
    auto& a = d.GetAllocator();
    d.AddMember("apiVersion", "coordination.k8s.io/v1", a);
    d.AddMember("kind", "Lease", a);
    rapidjson::Value md(rapidjson::kObjectType);
    md.AddMember("name", rapidjson::Value(cfg_.name.c_str(), a), a);
    md.AddMember("namespace", rapidjson::Value(cfg_.namespace_.c_str(), a), a);
    d.AddMember("metadata", md, a);
    WriteLeaseRecord(next, &d);
    res = client_.Create(kLeases, cfg_.namespace_, ToJson(d), call_timeout);
  } else {
    WriteLeaseRecord(next, doc.get());
    res = client_.Update(kLeases, cfg_.namespace_, cfg_.name, ToJson(*doc), {}, call_timeout);
  }
  if (!res) {
    const ApiError& e = res.error();
    if (!e.IsConflict() && !e.IsAlreadyExists() && !stop_.load()) {
      log::warn("leader election: cannot write the lease",
                {{"lease", cfg_.namespace_ + "/" + cfg_.name}, {"error", e.ToString()}});
    }
    return false;
  }
  observed_ = next;
  observed_time_ = Clock::now();
  {
    MutexLock lk(leader_mu_);
    if (last_leader_ != cfg_.identity) {
      last_leader_ = cfg_.identity;
      if (cb_.on_new_leader) cb_.on_new_leader(cfg_.identity);
    }
  }
  return true;
}

void LeaderElector::Release() {
  auto got = client_.Get(kLeases, cfg_.namespace_, cfg_.name, milliseconds(1000));
  if (!got) return;
  LeaseRecord cur = LeaseRecordFromObject(**got);
  if (cur.holder_identity != cfg_.identity) return;
  WriteLeaseRecord(ReleasedLeaseRecord(cur, FormatMicroTime(std::chrono::system_clock::now())),
                   got->get());
  auto r =
      client_.Update(kLeases, cfg_.namespace_, cfg_.name, ToJson(**got), {}, milliseconds(1000));
  if (r) {
    log::info("leader election: released the lease",
              {{"lease", cfg_.namespace_ + "/" + cfg_.name}, {"identity", cfg_.identity}});
  } else {
    log::warn("leader election: could not release the lease", {{"error", r.error().ToString()}});
  }
}

void LeaderElector::Run() {
  std::mt19937 gen(std::random_device{}());
  std::uniform_real_distribution<double> jitter(0.0, 1.2);
  while (!stop_.load()) {
    if (!TryAcquireOrRenew()) {
      // client-go: JitterUntil(retryPeriod, 1.2): wait retry * [1, 2.2).
      auto d = milliseconds(static_cast<int64_t>(static_cast<double>(cfg_.retry_period.count()) *
                                                 (1.0 + jitter(gen))));
      if (!Sleep(d)) break;
      continue;
    }
    SetLeading(true);
    auto last_renew = Clock::now();
    while (Sleep(cfg_.retry_period)) {
      if (TryAcquireOrRenew()) {
        last_renew = Clock::now();
        continue;
      }
      if (stop_.load()) break;
      if (observed_ && !observed_->holder_identity.empty() &&
          observed_->holder_identity != cfg_.identity) {
        log::warn("leader election: another replica holds the lease",
                  {{"identity", cfg_.identity}, {"leader", observed_->holder_identity}});
        SetLeading(false);
        break;
      }
      if (Clock::now() - last_renew >= cfg_.renew_deadline) {
        log::warn("leader election: failed to renew within the renew deadline",
                  {{"identity", cfg_.identity}});
        SetLeading(false);
        break;
      }
    }
    if (stop_.load()) break;
  }
  if (leading_.load()) {
    // Stop the leader's work first, then hand the lease over.
    SetLeading(false);
    Release();
  }
}

}  // namespace aw::kube
