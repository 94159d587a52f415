// The CRD guard: keeps the GameServer CRD's status.state enum accepting "Allocating" and tells
// the webhook, live, whether it does.
//
// Promise: every replica watches customresourcedefinitions/<crd_name> (list+watch with a
// fieldSelector on metadata.name) and publishes CheckStateEnum().accepts to the
// AtomicCrdReadiness and the gauge allocating_webhook_crd_accepts_allocating on every change
// (false while the CRD is unknown or deleted: the webhook then fails open). Only while
// SetLeader(true) and `manage` is on, a lacking enum is repaired with a JSON patch guarded by a
// `test` of the current enum, re-read and retried on conflict/test failure, with backoff on other
// errors. A 403 (RBAC) is logged once, clearly; the guard keeps watching and failing open. While
// the CRD does not accept the state, a warning is logged at most once a minute.
// It holds no thread: its informer and its repair (asynchronous Get/Patch calls chained by their
// callbacks, and a steady_timer for the backoff and the periodic re-check) run on the client's I/O
// executor. SetLeader() may be called from any thread (it only posts). Stop(), not from the I/O
// thread, stops the informer, cancels the timer and returns once no callback of the guard runs;
// an answer still in flight is then dropped unread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "contract/crd_state.h"
#include "kube/core/crd_enum.h"
#include "kube/informer.h"
#include "util/io/mutex.h"

namespace prometheus {
class Registry;
class Gauge;
class Counter;
}  // namespace prometheus

namespace aw::kube {

struct CrdGuardOptions {
  std::string crd_name = "gameservers.agones.dev";
  bool manage = true;  // --manage-crd
  std::string value = "Allocating";
};

class CrdGuard final : private InformerHandler {
 public:
  CrdGuard(Client& client, CrdGuardOptions opts, contract::AtomicCrdReadiness& readiness,
           prometheus::Registry* registry);
  ~CrdGuard() override;
  void Start() EXCLUDES(core_mu_);
  void Stop() EXCLUDES(core_mu_);
  // Called by leader election (or once with true when leader election is off).
  void SetLeader(bool leader) EXCLUDES(core_mu_);
  bool Accepts() const { return accepts_.load(); }

 private:
  struct Core;
  void OnAdd(const ObjectPtr& obj) override;
  void OnUpdate(const ObjectPtr& old, const ObjectPtr& obj) override;
  void OnDelete(const ObjectPtr& last_known) override;
  void Evaluate(const ObjectPtr& obj);
  void Publish(bool accepts, const std::string& why) EXCLUDES(publish_mu_);
  // Asks for a re-check on the I/O thread: `change` = the CRD or the leadership changed.
  void Wake(bool change) EXCLUDES(core_mu_);
  // I/O thread only: the old repair loop's body, then the timer for the next check.
  void Tick(const std::shared_ptr<Core>& core, bool woke_by_change);
  void Arm(const std::shared_ptr<Core>& core, std::chrono::milliseconds wait);
  // One attempt cycle (up to 5 re-reads on conflict); done(false) when it should be retried later.
  void TryRepair(const std::shared_ptr<Core>& core, int attempt, std::function<void(bool)> done);
  // Wraps a callback of the I/O thread: runs it only while the guard runs (Stop() waits for it).
  template <typename F>
  auto Guarded(const std::shared_ptr<Core>& core, F f);

  Client& client_;
  CrdGuardOptions opts_;
  contract::AtomicCrdReadiness& readiness_;
  std::unique_ptr<Informer> informer_;
  std::atomic<bool> accepts_{false};
  std::atomic<bool> leader_{false};
  std::atomic<bool> known_{false};
  Mutex publish_mu_;  // orders publications from Start() and the I/O thread
  bool published_once_ GUARDED_BY(publish_mu_) = false;
  Mutex core_mu_;
  std::shared_ptr<Core> core_ GUARDED_BY(core_mu_);  // while started
  prometheus::Gauge* gauge_ = nullptr;
  prometheus::Counter* repairs_ok_ = nullptr;
  prometheus::Counter* repairs_failed_ = nullptr;
};

}  // namespace aw::kube
