// The resolver's Prometheus metrics, registered on the shared registry.
//
// Promise: families are registered once per registry; every method is thread-safe.
//   allocating_webhook_allocating_servers                      gauge: servers held Allocating
//   allocating_webhook_allocating_duration_seconds{outcome}    histogram: Allocating -> outcome
//   allocating_webhook_probes_total{type,result}               counter
//   allocating_webhook_resolver_promotions_total               counter
//   allocating_webhook_resolver_timeouts_total{action}         counter
//   allocating_webhook_resolver_scaled_down_total              counter
//   allocating_webhook_resolver_conflicts_total                counter
//   allocating_webhook_resolver_patch_errors_total{status}     counter
#pragma once

#include <string_view>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

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

 private:
  prometheus::Gauge* allocating_;
  prometheus::Family<prometheus::Histogram>* duration_;
  prometheus::Family<prometheus::Counter>* probes_;
  prometheus::Counter* promotions_;
  prometheus::Counter* scaled_down_;
  prometheus::Family<prometheus::Counter>* timeouts_;
  prometheus::Counter* conflicts_;
  prometheus::Family<prometheus::Counter>* patch_errors_;
};

}  // namespace aw::resolver
