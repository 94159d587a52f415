// The resolver's Prometheus metrics, registered on the shared registry.
//
// Promise: families are registered once per registry; every method is thread-safe.
//   allocating_webhook_allocating_servers                      gauge: servers held Allocating
//   allocating_webhook_allocating_duration_seconds{outcome}    histogram: Allocating -> outcome
//   allocating_webhook_probes_total{type,result}               counter: every type (http, tcp,
//       udp) x result (success, failure, timeout, error) exists from start-up at 0
//   allocating_webhook_resolver_promotions_total               counter
//   allocating_webhook_resolver_timeouts_total{action}         counter
//   allocating_webhook_resolver_scaled_down_total              counter
//   allocating_webhook_resolver_conflicts_total                counter
//   allocating_webhook_resolver_patch_errors_total{status}     counter
//   allocating_webhook_bypassed_allocations_total{namespace,fleet}  counter: allocations of
//       opted-in servers that reached Allocated without passing the gate (admission unreachable);
//       its series appear with the first bypass of a fleet
//   allocating_webhook_bypassed_servers                        gauge: Allocated servers whose
//       bypass the leader is recording or checking now (exists from start-up)
//   allocating_webhook_bypass_resolutions_total{outcome}       counter: bypassed allocations
//       confirmed after the fact (Confirmed) or not by their deadline (Unconfirmed, TimedOut)
// The work queue and reconcile metrics, named as client-go's workqueue and controller-runtime
// name them (name="resolver" / controller="resolver"), so their dashboards and alerts apply:
//   workqueue_depth{name}                           gauge: keys ready to reconcile
//   workqueue_adds_total{name}                      counter: keys queued (not already queued)
//   workqueue_queue_duration_seconds{name}          histogram: queued -> taken by the loop
//   workqueue_work_duration_seconds{name}           histogram: one Reconcile call
//   workqueue_retries_total{name}                   counter: keys queued again after a pass
//       (Reconcile asked to look again later: the next probe, a deadline, a backoff)
//   controller_runtime_reconcile_total{controller,result}   counter: result = success (nothing
//       more to do until an event), requeue_after (look again at a time), error (a write the
//       reconcile dispatched failed; it is counted when the write's answer arrives)
//   controller_runtime_reconcile_errors_total{controller}   counter: those errors
//   controller_runtime_reconcile_time_seconds{controller}   histogram: one Reconcile call
//   allocating_webhook_undelivered_total{namespace,fleet}      counter: servers the allocation
//       gateway allocated and never delivered, released by the resolver (outcome Undelivered);
//       its series appear with the first release of a fleet
//   allocating_webhook_undelivered_releases_total              counter: the same, all fleets
//       (exists from start-up, for alerts and the dashboard)
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <string_view>

namespace aw::resolver {

class Metrics {
 public:
  explicit Metrics(prometheus::Registry& registry);

  void SetAllocating(size_t n) { allocating_->Set(static_cast<double>(n)); }
  void ObserveDuration(std::string_view outcome, double seconds);
  void CountProbe(std::string_view type, std::string_view result);
  void CountPromotion() { promotions_->Increment(); }
  void CountScaledDown() { scaled_down_->Increment(); }
  void CountTimeout(std::string_view action);
  void CountConflict() { conflicts_->Increment(); }
  void CountPatchError(std::string_view status);
  void CountBypass(std::string_view ns, std::string_view fleet);
  void CountBypassResolved(std::string_view outcome);
  void SetBypassed(size_t n) { bypassed_servers_->Set(static_cast<double>(n)); }
  void CountUndelivered(std::string_view ns, std::string_view fleet);

  void SetQueueDepth(size_t n) { queue_depth_->Set(static_cast<double>(n)); }
  void CountQueueAdds(size_t n) { queue_adds_->Increment(static_cast<double>(n)); }
  void ObserveQueueWait(double seconds) { queue_duration_->Observe(seconds); }
  // One Reconcile call: its duration and result ("success" or "requeue_after").
  void ObserveReconcile(double seconds, bool requeue_after);
  // A write a reconcile dispatched failed.
  void CountReconcileError();

 private:
  prometheus::Gauge* allocating_;
  prometheus::Family<prometheus::Histogram>* duration_;
  prometheus::Family<prometheus::Counter>* probes_;
  prometheus::Counter* promotions_;
  prometheus::Counter* scaled_down_;
  prometheus::Family<prometheus::Counter>* timeouts_;
  prometheus::Counter* conflicts_;
  prometheus::Family<prometheus::Counter>* patch_errors_;
  prometheus::Family<prometheus::Counter>* bypassed_;
  prometheus::Family<prometheus::Counter>* bypass_resolved_;
  prometheus::Gauge* bypassed_servers_;
  prometheus::Gauge* queue_depth_;
  prometheus::Counter* queue_adds_;
  prometheus::Histogram* queue_duration_;
  prometheus::Histogram* work_duration_;
  prometheus::Counter* retries_;
  prometheus::Counter* reconcile_success_;
  prometheus::Counter* reconcile_requeue_after_;
  prometheus::Counter* reconcile_error_;
  prometheus::Counter* reconcile_errors_;
  prometheus::Histogram* reconcile_time_;
  prometheus::Family<prometheus::Counter>* undelivered_;
  prometheus::Counter* undelivered_all_;
};

}  // namespace aw::resolver
