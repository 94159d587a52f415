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
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

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
  void Start() EXCLUDES(mu_);
  void Stop() EXCLUDES(mu_);
  // Called by leader election (or once with true when leader election is off).
  void SetLeader(bool leader) EXCLUDES(mu_);
  bool Accepts() const { return accepts_.load(); }

 private:
  void OnUpsert(const ObjectPtr& obj) override;
  void OnDelete(const ObjectPtr& last_known) override;
  void Evaluate(const ObjectPtr& obj);
  void Publish(bool accepts, const std::string& why) EXCLUDES(publish_mu_);
  void RunRepairs() EXCLUDES(mu_);
  bool TryRepair();  // one attempt cycle; false when it should be retried later

  Client& client_;
  CrdGuardOptions opts_;
  contract::AtomicCrdReadiness& readiness_;
  std::unique_ptr<Informer> informer_;
  std::atomic<bool> accepts_{false};
  std::atomic<bool> leader_{false};
  std::atomic<bool> known_{false};
  Mutex publish_mu_;  // orders publications from the informer and repair threads
  bool published_once_ GUARDED_BY(publish_mu_) = false;
  Mutex mu_;
  CondVar cv_;  // wakes the repair thread: a change (dirty_) or stop
  bool dirty_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  bool forbidden_logged_ = false;  // repair thread only
  std::thread repair_thread_;      // started by Start, joined by Stop (the owner's thread)
  prometheus::Gauge* gauge_ = nullptr;
  prometheus::Counter* repairs_ok_ = nullptr;
  prometheus::Counter* repairs_failed_ = nullptr;
};

}  // namespace aw::kube
