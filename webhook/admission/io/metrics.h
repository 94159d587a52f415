// AdmissionMetrics: the admission listener's Prometheus series, registered on the shared registry.
//
// Promise: every (route, outcome) and route series exists from the start (zero-valued), so
// dashboards and alerts see them before the first request; recording is lock-free (pointers to
// pre-created series, no label lookups per request).
//   allocating_webhook_admission_requests_total{route,outcome}   outcome:
//   allowed|rewritten|denied|error allocating_webhook_admission_duration_seconds{route} histogram,
//   sub-millisecond buckets allocating_webhook_admission_in_flight                       gauge
//   allocating_webhook_fail_open_total{route}                    allowed only because the CRD lacks
//   Allocating allocating_webhook_http_errors_total{code}                   non-200 answers on the
//   admission port allocating_webhook_neutralised_keys_total{key}               keys a writer may
//   not set, reverted
//                                                                 instead of denying (forged keys
//                                                                 in an allocation's metadata)
//   allocating_webhook_shutdown_held_total                       Agones controller Shutdowns of an
//                                                                 Allocating server not applied
//                                                                 (on-scale-down: Hold)
//   allocating_webhook_scaled_down_total                         Agones controller Shutdowns of an
//                                                                 Allocating server applied
//                                                                 (on-scale-down: Shutdown)
//   allocating_webhook_shutdown_deferred_total                   held Shutdowns applied when the
//                                                                 server left the cycle
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "admission/handler.h"
#include "util/io/mutex.h"

namespace aw::admission {

class AdmissionMetrics {
 public:
  explicit AdmissionMetrics(prometheus::Registry& registry);

  void Record(admission::Route route, admission::Outcome outcome, bool fail_open,
              std::chrono::nanoseconds latency);
  void HttpError(int code);
  // One per key that a decision neutralised (Decision::neutralised).
  void Neutralised(std::string_view key);
  void ShutdownHeld() { shutdown_held_.Increment(); }
  void ShutdownDeferred() { shutdown_deferred_.Increment(); }
  void ScaledDown() { scaled_down_.Increment(); }
  prometheus::Gauge& in_flight() { return in_flight_; }

 private:
  static constexpr size_t kRoutes = 5;
  static constexpr size_t kOutcomes = 4;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& duration_;
  prometheus::Family<prometheus::Counter>& fail_open_;
  prometheus::Family<prometheus::Counter>& http_errors_;
  prometheus::Gauge& in_flight_;
  prometheus::Family<prometheus::Counter>& neutralised_;
  prometheus::Counter& shutdown_held_;
  prometheus::Counter& shutdown_deferred_;
  prometheus::Counter& scaled_down_;
  std::map<std::string, prometheus::Counter*, std::less<>> neutralised_series_;  // pre-created
  std::array<std::array<prometheus::Counter*, kOutcomes>, kRoutes> request_series_{};
  std::array<prometheus::Histogram*, kRoutes> duration_series_{};
  std::array<prometheus::Counter*, kRoutes> fail_open_series_{};
  Mutex http_errors_mu_;
  std::map<int, prometheus::Counter*> http_error_series_ GUARDED_BY(http_errors_mu_);
};

// Histogram buckets, in seconds: sub-millisecond resolution where admission latency lives.
const prometheus::Histogram::BucketBoundaries& AdmissionLatencyBuckets();

}  // namespace aw::admission
