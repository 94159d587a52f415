#include "kube/crd_guard.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "kube/backoff.h"
#include "util/io/log.h"

namespace aw::kube {

using Clock = std::chrono::steady_clock;

// The repair's state, shared with its callbacks: after Stop() they find `stopped` and touch
// nothing else (an answer still in flight only drops its reference).
struct CrdGuard::Core {
  explicit Core(boost::asio::any_io_executor executor) : ex(executor), timer(executor) {}
  boost::asio::any_io_executor ex;
  // I/O thread only:
  boost::asio::steady_timer timer;
  Backoff backoff{std::chrono::milliseconds(500), std::chrono::seconds(30)};
  Clock::time_point last_warn = Clock::now() - std::chrono::minutes(2);
  Clock::time_point next_attempt = Clock::now();
  bool in_flight = false;  // a repair chain is running; Wake() then only sets `dirty`
  bool dirty = false;
  bool forbidden_logged = false;

  bool Enter() EXCLUDES(mu) {
    MutexLock lk(mu);
    if (stopped) return false;
    ++running;
    return true;
  }
  void Exit() EXCLUDES(mu) {
    {
      MutexLock lk(mu);
      --running;
    }
    cv.SignalAll();
  }
  // Marks the core stopped and waits (bounded) until no callback runs.
  bool StopAndWait(std::chrono::milliseconds timeout) EXCLUDES(mu) {
    MutexLock lk(mu);
    stopped = true;
    return cv.WaitFor(mu, timeout, [&]() REQUIRES(mu) { return running == 0; });
  }

  Mutex mu;
  CondVar cv;
  bool stopped GUARDED_BY(mu) = false;
  int running GUARDED_BY(mu) = 0;
};

template <typename F>
auto CrdGuard::Guarded(const std::shared_ptr<Core>& core, F f) {
  return [core, f = std::move(f)](auto&&... args) mutable {
    if (!core->Enter()) return;
    f(std::forward<decltype(args)>(args)...);
    core->Exit();
  };
}

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
  std::shared_ptr<Core> core;
  {
    MutexLock lk(core_mu_);
    if (core_) return;
    core_ = core = std::make_shared<Core>(client_.executor());
  }
  // The first periodic check comes after 5 s, unless a change wakes the guard first.
  boost::asio::post(core->ex, Guarded(core, [this, core] {
                      if (!core->in_flight) Arm(core, std::chrono::seconds(5));
                    }));
  informer_->Start();
}

void CrdGuard::Stop() {
  informer_->Stop();
  std::shared_ptr<Core> core;
  {
    MutexLock lk(core_mu_);
    core = std::move(core_);
    core_ = nullptr;
  }
  if (!core) return;
  if (!core->StopAndWait(std::chrono::seconds(10))) {
    log::error("crd guard: a callback still runs 10s after Stop()", {{"crd", opts_.crd_name}});
  }
  boost::asio::post(core->ex, [core] { core->timer.cancel(); });
}

void CrdGuard::SetLeader(bool leader) {
  leader_.store(leader);
  Wake(true);
}

void CrdGuard::Wake(bool change) {
  std::shared_ptr<Core> core;
  {
    MutexLock lk(core_mu_);
    core = core_;
  }
  if (!core) return;
  boost::asio::post(core->ex, Guarded(core, [this, core, change] {
                      if (core->in_flight) {
                        core->dirty = core->dirty || change;
                        return;
                      }
                      core->timer.cancel();
                      Tick(core, change);
                    }));
}

void CrdGuard::Arm(const std::shared_ptr<Core>& core, std::chrono::milliseconds wait) {
  core->timer.expires_after(wait);
  core->timer.async_wait(Guarded(core, [this, core](boost::system::error_code ec) {
    if (ec || core->in_flight) return;  // cancelled: a Wake() ticks instead
    Tick(core, false);
  }));
}

void CrdGuard::Publish(bool accepts, const std::string& why) {
  // Called from Start() and on the I/O thread (the informer's handlers, the repair's callbacks).
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
  if (!c.accepts) Wake(true);
}

void CrdGuard::OnAdd(const ObjectPtr& obj) {
  if (obj->name != opts_.crd_name) return;
  Evaluate(obj);
}

void CrdGuard::OnUpdate(const ObjectPtr&, const ObjectPtr& obj) { OnAdd(obj); }

void CrdGuard::OnDelete(const ObjectPtr& last_known) {
  if (last_known->name != opts_.crd_name) return;
  known_.store(false);
  Publish(false, "CRD deleted");
}

void CrdGuard::TryRepair(const std::shared_ptr<Core>& core, int attempt,
                         std::function<void(bool)> done) {
  if (attempt >= 5) return done(false);
  client_.GetAsync(
      kCustomResourceDefinitions, "", opts_.crd_name,
      Guarded(core, [this, core, attempt, done](Result<JsonPtr> cur) {
        if (!cur) {
          if (cur.error().IsNotFound()) {
            known_.store(false);
            Publish(false, "CRD not found");
            return done(true);  // nothing to repair until it appears (the watch will tell us)
          }
          log::warn("crd guard: cannot read the CRD",
                    {{"crd", opts_.crd_name}, {"error", cur.error().ToString()}});
          return done(false);
        }
        CrdEnumCheck c = CheckStateEnum(**cur, opts_.value);
        if (c.accepts) {
          Publish(true, c.summary);
          return done(true);
        }
        std::string patch = BuildEnumPatch(c, opts_.value);
        if (patch.empty()) return done(true);  // e.g. no served version: nothing we can do
        client_.PatchAsync(
            kCustomResourceDefinitions, "", opts_.crd_name, PatchType::kJson, patch,
            Guarded(core, [this, core, attempt, done](Result<JsonPtr> r) {
              if (r) {
                CrdEnumCheck after = CheckStateEnum(**r, opts_.value);
                if (repairs_ok_) repairs_ok_->Increment();
                log::info("crd guard: added Allocating to the GameServer CRD's status.state enum",
                          {{"crd", opts_.crd_name}, {"detail", after.summary}});
                Publish(after.accepts, after.summary);
                return done(true);
              }
              const ApiError& e = r.error();
              if (repairs_failed_) repairs_failed_->Increment();
              if (e.IsForbidden()) {
                if (!core->forbidden_logged) {
                  core->forbidden_logged = true;
                  log::error(
                      "crd guard: not allowed to patch the GameServer CRD (RBAC); add Allocating "
                      "to its status.state enum by hand or grant 'patch' on "
                      "customresourcedefinitions/" +
                          opts_.crd_name + "; the webhook fails open until then",
                      {{"crd", opts_.crd_name}, {"error", e.ToString()}});
                }
                return done(true);  // do not hammer; the next CRD/leadership change retries
              }
              if (e.IsConflict() || e.IsInvalid()) {
                // The enum changed under us (the test op failed) or a resourceVersion
                // conflict: re-read.
                log::info("crd guard: CRD changed during repair; retrying",
                          {{"error", e.ToString()}});
                return TryRepair(core, attempt + 1, done);
              }
              log::warn("crd guard: patching the CRD failed",
                        {{"crd", opts_.crd_name}, {"error", e.ToString()}});
              done(false);
            }));
      }));
}

void CrdGuard::Tick(const std::shared_ptr<Core>& core, bool woke_by_change) {
  std::chrono::milliseconds wait = std::chrono::seconds(5);
  if (accepts_.load()) {
    core->backoff.Reset();
    return Arm(core, wait);
  }
  auto now = Clock::now();
  if (known_.load() && now - core->last_warn >= std::chrono::minutes(1)) {
    core->last_warn = now;
    log::warn("crd guard: failing open: the GameServer CRD does not accept Allocating",
              {{"crd", opts_.crd_name},
               {"leader", leader_.load() ? "true" : "false"},
               {"manage_crd", opts_.manage ? "true" : "false"}});
  }
  if (!opts_.manage || !leader_.load() || !known_.load() || client_.IsShutdown()) {
    return Arm(core, wait);
  }
  // After a failure, wait for the backoff (or for a change of the CRD / leadership).
  if (!woke_by_change && now < core->next_attempt) return Arm(core, wait);
  core->in_flight = true;
  core->dirty = false;
  TryRepair(core, 0, [this, core, now](bool ok) {
    core->in_flight = false;
    std::chrono::milliseconds next_wait = std::chrono::seconds(5);
    if (ok) {
      core->backoff.Reset();
      // Forbidden: retry only on a change, or every 5 minutes (RBAC may be fixed).
      core->next_attempt =
          core->forbidden_logged && !accepts_.load() ? now + std::chrono::minutes(5) : now;
    } else {
      auto d = core->backoff.Next();
      core->next_attempt = now + d;
      next_wait = d;
    }
    if (core->dirty) {
      core->dirty = false;
      return Tick(core, true);
    }
    Arm(core, next_wait);
  });
}

}  // namespace aw::kube
