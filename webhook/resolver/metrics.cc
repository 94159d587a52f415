#include "resolver/metrics.h"

#include <string>

#include "probe/core/probe.h"

namespace aw::resolver {

Metrics::Metrics(prometheus::Registry& registry) {
  allocating_ = &prometheus::BuildGauge()
                     .Name("allocating_webhook_allocating_servers")
                     .Help("GameServers currently held in Allocating (seen by the leader)")
                     .Register(registry)
                     .Add({});
  duration_ = &prometheus::BuildHistogram()
                   .Name("allocating_webhook_allocating_duration_seconds")
                   .Help("Time from entering Allocating to the resolver's outcome")
                   .Register(registry);
  probes_ = &prometheus::BuildCounter()
                 .Name("allocating_webhook_probes_total")
                 .Help("Readiness probes by type and result")
                 .Register(registry);
  promotions_ = &prometheus::BuildCounter()
                     .Name("allocating_webhook_resolver_promotions_total")
                     .Help("Allocating GameServers promoted to Allocated after confirmation")
                     .Register(registry)
                     .Add({});
  scaled_down_ = &prometheus::BuildCounter()
                      .Name("allocating_webhook_resolver_scaled_down_total")
                      .Help(
                          "Allocating GameServers shut down by an Agones scale-down or rolling "
                          "update before they were confirmed (outcome ScaledDown), as the "
                          "resolver recorded them")
                      .Register(registry)
                      .Add({});
  timeouts_ = &prometheus::BuildCounter()
                   .Name("allocating_webhook_resolver_timeouts_total")
                   .Help("Allocating GameServers resolved by their on-timeout action")
                   .Register(registry);
  conflicts_ = &prometheus::BuildCounter()
                    .Name("allocating_webhook_resolver_conflicts_total")
                    .Help("Resolver patches refused by optimistic concurrency (re-decided)")
                    .Register(registry)
                    .Add({});
  patch_errors_ = &prometheus::BuildCounter()
                       .Name("allocating_webhook_resolver_patch_errors_total")
                       .Help("Resolver patches that failed for another reason, by status")
                       .Register(registry);
  bypassed_ = &prometheus::BuildCounter()
                   .Name("allocating_webhook_bypassed_allocations_total")
                   .Help(
                       "Allocations of opted-in GameServers that reached Allocated without "
                       "passing the gate (admission unreachable), by namespace and fleet")
                   .Register(registry);
  bypass_resolved_ = &prometheus::BuildCounter()
                          .Name("allocating_webhook_bypass_resolutions_total")
                          .Help("Bypassed allocations resolved after the fact, by outcome")
                          .Register(registry);
  bypassed_servers_ = &prometheus::BuildGauge()
                           .Name("allocating_webhook_bypassed_servers")
                           .Help(
                               "Allocated GameServers whose bypass of the gate the leader is "
                               "recording or checking now")
                           .Register(registry)
                           .Add({});
  // As client-go and controller-runtime register them: a "name" / "controller" label, their
  // buckets (client-go: 10 ns .. 10 s by 10x; controller-runtime: 5 ms .. 60 s).
  const prometheus::Labels queue{{"name", "resolver"}};
  const prometheus::Labels controller{{"controller", "resolver"}};
  const prometheus::Histogram::BucketBoundaries queue_buckets{1e-8, 1e-7, 1e-6, 1e-5, 1e-4,
                                                              1e-3, 1e-2, 1e-1, 1,    10};
  const prometheus::Histogram::BucketBoundaries reconcile_buckets{
      0.005, 0.01, 0.025, 0.05, 0.1,  0.15, 0.2,  0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6,
      0.7,   0.8,  0.9,   1.0,  1.25, 1.5,  1.75, 2.0,  2.5, 3.0,  3.5, 4.0,  4.5, 5,
      6,     7,    8,     9,    10,   15,   20,   25,   30,  40,   50,  60};
  queue_depth_ = &prometheus::BuildGauge()
                      .Name("workqueue_depth")
                      .Help("Current depth of workqueue")
                      .Register(registry)
                      .Add(queue);
  queue_adds_ = &prometheus::BuildCounter()
                     .Name("workqueue_adds_total")
                     .Help("Total number of adds handled by workqueue")
                     .Register(registry)
                     .Add(queue);
  queue_duration_ = &prometheus::BuildHistogram()
                         .Name("workqueue_queue_duration_seconds")
                         .Help(
                             "How long in seconds an item stays in workqueue before being "
                             "requested")
                         .Register(registry)
                         .Add(queue, queue_buckets);
  work_duration_ = &prometheus::BuildHistogram()
                        .Name("workqueue_work_duration_seconds")
                        .Help("How long in seconds processing an item from workqueue takes")
                        .Register(registry)
                        .Add(queue, queue_buckets);
  retries_ = &prometheus::BuildCounter()
                  .Name("workqueue_retries_total")
                  .Help("Total number of retries handled by workqueue")
                  .Register(registry)
                  .Add(queue);
  auto& reconciles = prometheus::BuildCounter()
                         .Name("controller_runtime_reconcile_total")
                         .Help("Total number of reconciliations per controller")
                         .Register(registry);
  reconcile_success_ = &reconciles.Add({{"controller", "resolver"}, {"result", "success"}});
  reconcile_requeue_after_ =
      &reconciles.Add({{"controller", "resolver"}, {"result", "requeue_after"}});
  reconcile_error_ = &reconciles.Add({{"controller", "resolver"}, {"result", "error"}});
  reconcile_errors_ = &prometheus::BuildCounter()
                           .Name("controller_runtime_reconcile_errors_total")
                           .Help("Total number of reconciliation errors per controller")
                           .Register(registry)
                           .Add(controller);
  reconcile_time_ = &prometheus::BuildHistogram()
                         .Name("controller_runtime_reconcile_time_seconds")
                         .Help("Length of time per reconciliation per controller")
                         .Register(registry)
                         .Add(controller, reconcile_buckets);
  undelivered_ = &prometheus::BuildCounter()
                      .Name("allocating_webhook_undelivered_total")
                      .Help(
                          "GameServers the allocation gateway allocated and never delivered, "
                          "released by the resolver (outcome Undelivered), by namespace and "
                          "fleet")
                      .Register(registry);
  undelivered_all_ = &prometheus::BuildCounter()
                          .Name("allocating_webhook_undelivered_releases_total")
                          .Help(
                              "GameServers the allocation gateway allocated and never "
                              "delivered, released by the resolver (outcome Undelivered)")
                          .Register(registry)
                          .Add({});
  // Every label value known in advance exists from start-up at 0, so rate() and the dashboard see
  // the series before the first event.
  for (const char* action : {"Unhealthy", "Allocated", "Shutdown"})
    timeouts_->Add({{"action", action}});
  for (const char* status : {"rejected", "retry"}) patch_errors_->Add({{"status", status}});
  for (probe::Type type : {probe::Type::kHttp, probe::Type::kTcp, probe::Type::kUdp}) {
    for (probe::Status status : {probe::Status::kSuccess, probe::Status::kFailure,
                                 probe::Status::kTimeout, probe::Status::kError}) {
      probes_->Add({{"type", std::string(probe::TypeName(type))},
                    {"result", std::string(probe::StatusName(status))}});
    }
  }
  for (const char* o : {"Confirmed", "Unconfirmed", "TimedOut"}) {
    bypass_resolved_->Add({{"outcome", o}});
  }
  for (const char* o : {"Confirmed", "TimedOut"}) {
    duration_->Add({{"outcome", o}},
                   prometheus::Histogram::BucketBoundaries{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
                                                           60, 120, 300, 600});
  }
}

void Metrics::ObserveDuration(std::string_view outcome, double seconds) {
  duration_
      ->Add({{"outcome", std::string(outcome)}},
            prometheus::Histogram::BucketBoundaries{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
                                                    120, 300, 600})
      .Observe(seconds);
}

void Metrics::CountProbe(std::string_view type, std::string_view result) {
  probes_->Add({{"type", std::string(type)}, {"result", std::string(result)}}).Increment();
}

void Metrics::CountTimeout(std::string_view action) {
  timeouts_->Add({{"action", std::string(action)}}).Increment();
}

void Metrics::CountPatchError(std::string_view status) {
  patch_errors_->Add({{"status", std::string(status)}}).Increment();
}

void Metrics::CountBypass(std::string_view ns, std::string_view fleet) {
  bypassed_->Add({{"namespace", std::string(ns)}, {"fleet", std::string(fleet)}}).Increment();
}

void Metrics::CountUndelivered(std::string_view ns, std::string_view fleet) {
  undelivered_->Add({{"namespace", std::string(ns)}, {"fleet", std::string(fleet)}}).Increment();
  undelivered_all_->Increment();
}

void Metrics::CountBypassResolved(std::string_view outcome) {
  bypass_resolved_->Add({{"outcome", std::string(outcome)}}).Increment();
}

void Metrics::ObserveReconcile(double seconds, bool requeue_after) {
  work_duration_->Observe(seconds);
  reconcile_time_->Observe(seconds);
  if (requeue_after) {
    reconcile_requeue_after_->Increment();
    retries_->Increment();
  } else {
    reconcile_success_->Increment();
  }
}

void Metrics::CountReconcileError() {
  reconcile_error_->Increment();
  reconcile_errors_->Increment();
}

}  // namespace aw::resolver
