// Counters whose label values are known in advance exist from start-up at 0 (Prometheus' advice),
// so a dashboard panel or a rate() over them is not empty before the first event: the resolver's
// probes by type and result, the gateway's retries by reason, attempts by result and abandoned
// requests by phase. Checked on a fresh registry, before any probe or request.
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <boost/asio/io_context.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gateway/io/allocator_client.h"
#include "gateway/io/gateway.h"
#include "gateway/io/waiters.h"
#include "resolver/metrics.h"

namespace aw {
namespace {

using Labels = std::map<std::string, std::string>;

// The value of counter `name` with exactly `labels`, or nullopt when that series does not exist.
std::optional<double> CounterValue(prometheus::Registry& registry, const std::string& name,
                                   const Labels& labels) {
  for (const auto& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const auto& metric : family.metric) {
      Labels got;
      for (const auto& l : metric.label) got[l.name] = l.value;
      if (got == labels) return metric.counter.value;
    }
  }
  return std::nullopt;
}

TEST(MetricsAtStartup, ResolverProbesByTypeAndResult) {
  prometheus::Registry registry;
  resolver::Metrics metrics(registry);
  for (const char* type : {"http", "tcp", "udp"}) {
    for (const char* result : {"success", "failure", "timeout", "error"}) {
      const auto v = CounterValue(registry, "allocating_webhook_probes_total",
                                  {{"type", type}, {"result", result}});
      ASSERT_TRUE(v.has_value()) << "no series type=" << type << " result=" << result;
      EXPECT_EQ(*v, 0) << type << " " << result;
    }
  }
  // A probe counts on the same series (no second one with other labels).
  metrics.CountProbe("udp", "timeout");
  EXPECT_EQ(CounterValue(registry, "allocating_webhook_probes_total",
                         {{"type", "udp"}, {"result", "timeout"}}),
            1);
}

TEST(MetricsAtStartup, GatewayRetriesAttemptsAndAbandoned) {
  prometheus::Registry registry;
  gateway::AllocatorClient allocator(gateway::AllocatorOptions{});
  gateway::WaiterRegistry::Lookup lookup = [](const std::string&) {
    return std::vector<kube::ObjectPtr>{};
  };
  gateway::WaiterRegistry waiters(lookup);
  boost::asio::io_context ioc;  // the calls' strands (none is made here)
  gateway::Gateway gw(gateway::GatewayOptions{}, allocator, waiters, lookup, registry,
                      ioc.get_executor());

  for (const char* reason : {"timed_out", "deleted", "unhealthy", "shutdown", "error",
                             "reallocated", "other", "delivery_mark", "duplicate_key"}) {
    const auto v = CounterValue(registry, "allocating_gateway_retries_total", {{"reason", reason}});
    ASSERT_TRUE(v.has_value()) << "no series reason=" << reason;
    EXPECT_EQ(*v, 0) << reason;
  }
  for (const char* result : {"allocated", "joined", "idempotent", "queued_past_deadline",
                             "unavailable", "bad_answer", "remote"}) {
    const auto v =
        CounterValue(registry, "allocating_gateway_attempts_total", {{"result", result}});
    ASSERT_TRUE(v.has_value()) << "no series result=" << result;
    EXPECT_EQ(*v, 0) << result;
  }
  for (const char* phase : {"waiting", "allocating"}) {
    const auto v = CounterValue(registry, "allocating_gateway_abandoned_total", {{"phase", phase}});
    ASSERT_TRUE(v.has_value()) << "no series phase=" << phase;
    EXPECT_EQ(*v, 0) << phase;
  }
}

}  // namespace
}  // namespace aw
