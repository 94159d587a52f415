#include "admission/io/metrics.h"

#include <string>

#include "contract/keys.h"

namespace aw::admission {

const prometheus::Histogram::BucketBoundaries& AdmissionLatencyBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1};
  return kBuckets;
}

AdmissionMetrics::AdmissionMetrics(prometheus::Registry& registry)
    : requests_(
          prometheus::BuildCounter()
              .Name("allocating_webhook_admission_requests_total")
              .Help("Admission requests by route and outcome (allowed, rewritten, denied, error)")
              .Register(registry)),
      duration_(prometheus::BuildHistogram()
                    .Name("allocating_webhook_admission_duration_seconds")
                    .Help("Time to answer an admission request, from the body read to the decision")
                    .Register(registry)),
      fail_open_(prometheus::BuildCounter()
                     .Name("allocating_webhook_fail_open_total")
                     .Help("Updates allowed unchanged only because the GameServer CRD does not "
                           "(yet) accept the Allocating state")
                     .Register(registry)),
      http_errors_(prometheus::BuildCounter()
                       .Name("allocating_webhook_http_errors_total")
                       .Help("Non-200 HTTP answers on the admission port, by status code")
                       .Register(registry)),
      in_flight_(prometheus::BuildGauge()
                     .Name("allocating_webhook_admission_in_flight")
                     .Help("Admission requests being handled right now")
                     .Register(registry)
                     .Add({})),
      neutralised_(prometheus::BuildCounter()
                       .Name("allocating_webhook_neutralised_keys_total")
                       .Help("Keys that a writer may not set (project-owned annotations, the "
                             "readiness annotation, the opt-in label of an Allocating server), "
                             "reverted instead of denying the update")
                       .Register(registry)),
      shutdown_held_(prometheus::BuildCounter()
                         .Name("allocating_webhook_shutdown_held_total")
                         .Help("Shutdowns of an Allocating GameServer by the Agones controller "
                               "that were not applied (on-scale-down: Hold)")
                         .Register(registry)
                         .Add({})),
      shutdown_deferred_(prometheus::BuildCounter()
                             .Name("allocating_webhook_shutdown_deferred_total")
                             .Help("Held Shutdowns applied when the GameServer left the allocation "
                                   "cycle (deferred scale-down)")
                             .Register(registry)
                             .Add({})),
      scaled_down_(prometheus::BuildCounter()
                       .Name("allocating_webhook_scaled_down_total")
                       .Help("Shutdowns of an Allocating GameServer by the Agones controller that "
                             "were applied, abandoning an unconfirmed allocation (on-scale-down: "
                             "Shutdown; outcome ScaledDown)")
                       .Register(registry)
                       .Add({})) {
  for (std::string_view key : {keys::kSince, keys::kAllocation, keys::kConfirmed, keys::kOutcome,
                               keys::kShutdownRequested, keys::kSdkReady, keys::kEnabledLabel}) {
    neutralised_series_.emplace(std::string(key), &neutralised_.Add({{"key", std::string(key)}}));
  }
  const admission::Outcome outcomes[kOutcomes] = {
      admission::Outcome::kAllowed, admission::Outcome::kRewritten, admission::Outcome::kDenied,
      admission::Outcome::kError};
  for (admission::Route route : admission::AllRoutes()) {
    auto r = static_cast<size_t>(route);
    std::string route_name(admission::RouteName(route));
    for (size_t o = 0; o < kOutcomes; ++o) {
      request_series_[r][o] = &requests_.Add(
          {{"route", route_name}, {"outcome", std::string(admission::OutcomeName(outcomes[o]))}});
    }
    duration_series_[r] = &duration_.Add({{"route", route_name}}, AdmissionLatencyBuckets());
    fail_open_series_[r] = &fail_open_.Add({{"route", route_name}});
  }
  // The answers a client can provoke exist at 0 from start-up (others appear when first sent).
  for (int code : {400, 404, 405, 408, 413, 414, 415, 431, 500}) {
    http_error_series_.emplace(code, &http_errors_.Add({{"code", std::to_string(code)}}));
  }
}

void AdmissionMetrics::Record(admission::Route route, admission::Outcome outcome, bool fail_open,
                              std::chrono::nanoseconds latency) {
  auto r = static_cast<size_t>(route);
  auto o = static_cast<size_t>(outcome);
  if (r >= kRoutes || o >= kOutcomes || request_series_[r][o] == nullptr) return;
  request_series_[r][o]->Increment();
  duration_series_[r]->Observe(std::chrono::duration<double>(latency).count());
  if (fail_open) fail_open_series_[r]->Increment();
}

void AdmissionMetrics::Neutralised(std::string_view key) {
  // Only the pre-created keys: the decision never reports others, and a label value per arbitrary
  // key would let a writer grow the series set.
  auto it = neutralised_series_.find(key);
  if (it != neutralised_series_.end()) it->second->Increment();
}

void AdmissionMetrics::HttpError(int code) {
  MutexLock lock(http_errors_mu_);
  auto it = http_error_series_.find(code);
  if (it == http_error_series_.end()) {
    it =
        http_error_series_.emplace(code, &http_errors_.Add({{"code", std::to_string(code)}})).first;
  }
  it->second->Increment();
}

}  // namespace aw::admission
