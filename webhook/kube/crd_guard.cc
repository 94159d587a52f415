#include "kube/crd_guard.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "kube/backoff.h"
#include "util/io/log.h"

namespace aw::kube {

CrdGuard::CrdGuard(Client& client, CrdGuardOptions opts, contract::AtomicCrdReadiness& readiness,
                   prometheus::Registry* registry)
    : client_(client), opts_(std::move(opts)), readiness_(readiness) {
  InformerOptions io;
  io.name = "crd";
  io.resource = kCustomResourceDefinitions;
  io.field_selector = "metadata.name=" + opts_.crd_name;
  io.backoff_max = std::chrono::seconds(10);
  informer_ = std::make_unique<Informer>(client_, io, registry);
  informer_->AddHandler(this);
  if (registry) {
    gauge_ = &prometheus::BuildGauge()
                  .Name("allocating_webhook_crd_accepts_allocating")
                  .Help(
                      "1 while the GameServer CRD's status.state enum lists Allocating (as seen by "
                      "the CRD guard)")
                  .Register(*registry)
                  .Add({});
    auto& fam = prometheus::BuildCounter()
                    .Name("allocating_webhook_crd_repairs_total")
                    .Help("CRD guard patches adding Allocating to the enum, by result")
                    .Register(*registry);
    repairs_ok_ = &fam.Add({{"result", "ok"}});
    repairs_failed_ = &fam.Add({{"result", "error"}});
  }
}

CrdGuard::~CrdGuard() { Stop(); }

void CrdGuard::Start() {
  Publish(false, "starting: CRD not read yet");
  {
    MutexLock lk(mu_);
    if (repair_thread_.joinable()) return;
    stop_ = false;
    repair_thread_ = std::thread([this] { RunRepairs(); });
  }
  informer_->Start();
}

void CrdGuard::Stop() {
  {
    MutexLock lk(mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  informer_->Stop();
  if (repair_thread_.joinable()) repair_thread_.join();
}

void CrdGuard::SetLeader(bool leader) {
  leader_.store(leader);
  {
    MutexLock lk(mu_);
    dirty_ = true;
  }
  cv_.SignalAll();
}

void CrdGuard::Publish(bool accepts, const std::string& why) {
  // Called from the informer thread and the repair thread.
  MutexLock lk(publish_mu_);
  bool prev = accepts_.exchange(accepts);
  readiness_.Set(accepts);
  if (gauge_) gauge_->Set(accepts ? 1 : 0);
  if (prev != accepts || !published_once_) {
    published_once_ = true;
    if (accepts) {
      log::info("crd guard: CRD accepts the Allocating state; webhook rewrites enabled",
                {{"crd", opts_.crd_name}, {"detail", why}});
    } else {
      log::warn(
          "crd guard: CRD does not accept the Allocating state; webhook fails open (allocations "
          "stay Allocated)",
          {{"crd", opts_.crd_name}, {"detail", why}});
    }
  }
}

void CrdGuard::Evaluate(const ObjectPtr& obj) {
  CrdEnumCheck c = CheckStateEnum(*obj->doc, opts_.value);
  known_.store(true);
  Publish(c.accepts, c.summary);
  if (!c.accepts) {
    {
      MutexLock lk(mu_);
      dirty_ = true;
    }
    cv_.SignalAll();
  }
}

void CrdGuard::OnUpsert(const ObjectPtr& obj) {
  if (obj->name != opts_.crd_name) return;
  Evaluate(obj);
}

void CrdGuard::OnDelete(const ObjectPtr& last_known) {
  if (last_known->name != opts_.crd_name) return;
  known_.store(false);
  Publish(false, "CRD deleted");
}

bool CrdGuard::TryRepair() {
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto cur = client_.Get(kCustomResourceDefinitions, "", opts_.crd_name);
    if (!cur) {
      if (cur.error().IsNotFound()) {
        known_.store(false);
        Publish(false, "CRD not found");
        return true;  // nothing to repair until it appears (the watch will tell us)
      }
      log::warn("crd guard: cannot read the CRD",
                {{"crd", opts_.crd_name}, {"error", cur.error().ToString()}});
      return false;
    }
    CrdEnumCheck c = CheckStateEnum(**cur, opts_.value);
    if (c.accepts) {
      Publish(true, c.summary);
      return true;
    }
    std::string patch = BuildEnumPatch(c, opts_.value);
    if (patch.empty()) return true;  // e.g. no served version: nothing we can do
    auto r = client_.Patch(kCustomResourceDefinitions, "", opts_.crd_name, PatchType::kJson, patch);
    if (r) {
      CrdEnumCheck after = CheckStateEnum(**r, opts_.value);
      if (repairs_ok_) repairs_ok_->Increment();
      log::info("crd guard: added Allocating to the GameServer CRD's status.state enum",
                {{"crd", opts_.crd_name}, {"detail", after.summary}});
      Publish(after.accepts, after.summary);
      return true;
    }
    const ApiError& e = r.error();
    if (repairs_failed_) repairs_failed_->Increment();
    if (e.IsForbidden()) {
      if (!forbidden_logged_) {
        forbidden_logged_ = true;
        log::error(
            "crd guard: not allowed to patch the GameServer CRD (RBAC); add Allocating to its "
            "status.state enum by hand or grant 'patch' on customresourcedefinitions/" +
                opts_.crd_name + "; the webhook fails open until then",
            {{"crd", opts_.crd_name}, {"error", e.ToString()}});
      }
      return true;  // do not hammer; the next CRD change or leadership change retries
    }
    if (e.IsConflict() || e.IsInvalid()) {
      // The enum changed under us (the test op failed) or a resourceVersion conflict: re-read.
      log::info("crd guard: CRD changed during repair; retrying", {{"error", e.ToString()}});
      continue;
    }
    log::warn("crd guard: patching the CRD failed",
              {{"crd", opts_.crd_name}, {"error", e.ToString()}});
    return false;
  }
  return false;
}

void CrdGuard::RunRepairs() {
  using Clock = std::chrono::steady_clock;
  Backoff backoff(std::chrono::milliseconds(500), std::chrono::seconds(30));
  auto last_warn = Clock::now() - std::chrono::minutes(2);
  auto next_attempt = Clock::now();
  std::chrono::milliseconds wait = std::chrono::seconds(5);
  while (true) {
    bool woke_by_change = false;
    {
      MutexLock lk(mu_);
      cv_.WaitFor(mu_, wait, [&]() REQUIRES(mu_) { return stop_ || dirty_; });
      if (stop_) return;
      woke_by_change = dirty_;
      dirty_ = false;
    }
    wait = std::chrono::seconds(5);
    if (accepts_.load()) {
      backoff.Reset();
      continue;
    }
    auto now = Clock::now();
    if (known_.load() && now - last_warn >= std::chrono::minutes(1)) {
      last_warn = now;
      log::warn("crd guard: failing open: the GameServer CRD does not accept Allocating",
                {{"crd", opts_.crd_name},
                 {"leader", leader_.load() ? "true" : "false"},
                 {"manage_crd", opts_.manage ? "true" : "false"}});
    }
    if (!opts_.manage || !leader_.load() || !known_.load() || client_.IsShutdown()) continue;
    // After a failure, wait for the backoff (or for a change of the CRD / leadership).
    if (!woke_by_change && now < next_attempt) continue;
    bool forbidden_before = forbidden_logged_;
    if (TryRepair()) {
      backoff.Reset();
      // Forbidden: retry only on a change, or every 5 minutes (RBAC may be fixed).
      next_attempt = forbidden_logged_ && !accepts_.load() ? now + std::chrono::minutes(5) : now;
      (void)forbidden_before;
    } else {
      auto d = backoff.Next();
      next_attempt = now + d;
      wait = d;
    }
  }
}

}  // namespace aw::kube
