// The Buffer autoscaling webhook as a component of the binary: its flag, the HTTPS route's
// handler with its metrics, and the watch of opted-in GameServers that feeds the per-fleet counts.
//
// Promise:
//   - RegisterAutoscaleFlags binds --autoscale-buffer (bool, default false): serve
//     POST /autoscale/buffer... (endpoint.h) on the admission port.
//   - AutoscaleEndpoint::Serve(request) answers one HTTP request per HandleBufferReview from the
//     counts in memory (no API call), counts it in
//       allocating_webhook_autoscale_reviews_total{result="scaled|unknown_fleet|bad_request|unavailable"}
//     and sets allocating_webhook_autoscale_desired_replicas{namespace,fleet} to the replicas
//     answered for a fleet that has opted-in GameServers; ForgetFleet drops that series (a fleet
//     whose last server went away), so the series follow the fleets in the cluster, not the
//     names that requests carry. One log line per review: debug when answered, warn when refused.
//     Thread-safe (called on the admission server's io threads).
//   - GameServerCountsFeed is the informer handler that keeps the endpoint's FleetCounts equal to
//     an informer over the opted-in GameServers of every namespace: every upsert and delete,
//     MarkSynced at the first full list. The binary adds it to the resolver's GameServer cache when
//     that cache watches every namespace (one LIST+WATCH of those objects per process); it must
//     outlive the informer it is added to.
//   - GameServerCountsWatch (when the resolver's cache cannot serve: no resolver, or
//     --resolver-namespace set) is a runtime::Runnable ("autoscale-gameservers") that runs an
//     Informer of its own over the opted-in GameServers of every namespace (the resolver's
//     selector, `allocating.agones.dev/enabled=true`; metric label
//     informer="autoscale-gameservers") and keeps the endpoint's FleetCounts equal to it: every
//     upsert and delete, MarkSynced at the first full list. It runs on every replica (not
//     leader-only) and reports Ready once the informer is started (reviews get 503 until the list
//     arrives). Run returns OK when asked to stop.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "autoscale/endpoint.h"
#include "autoscale/io/fleet_counts.h"
#include "kube/informer.h"
#include "runtime/manager.h"
#include "server/connection_server.h"
#include "util/flags.h"
#include "util/io/mutex.h"

namespace aw::autoscale {

struct AutoscaleFlags {
  bool buffer = false;
};

void RegisterAutoscaleFlags(flags::FlagSet& fs, AutoscaleFlags* f);

class AutoscaleEndpoint {
 public:
  explicit AutoscaleEndpoint(prometheus::Registry& registry);

  server::HttpResponse Serve(const server::HttpRequest& req);

  FleetCounts& counts() { return counts_; }
  void ForgetFleet(const std::string& ns, const std::string& fleet);

 private:
  FleetCounts counts_;
  prometheus::Family<prometheus::Counter>& reviews_;
  std::array<prometheus::Counter*, 4> by_result_{};
  prometheus::Family<prometheus::Gauge>& desired_;
  Mutex gauges_mu_;
  std::map<std::string, prometheus::Gauge*> gauges_ GUARDED_BY(gauges_mu_);  // "<ns>/<fleet>"
};

class GameServerCountsFeed final : public kube::InformerHandler {
 public:
  explicit GameServerCountsFeed(AutoscaleEndpoint& endpoint) : endpoint_(endpoint) {}
  void OnAdd(const kube::ObjectPtr& obj) override { Upsert(obj); }
  void OnUpdate(const kube::ObjectPtr&, const kube::ObjectPtr& obj) override { Upsert(obj); }
  void OnDelete(const kube::ObjectPtr& last_known) override;
  void OnSynced() override;

 private:
  void Upsert(const kube::ObjectPtr& obj);
  AutoscaleEndpoint& endpoint_;
};

class GameServerCountsWatch final : public runtime::Runnable {
 public:
  GameServerCountsWatch(kube::Client& client, AutoscaleEndpoint& endpoint,
                        prometheus::Registry* registry);
  ~GameServerCountsWatch() override;

  std::string Name() const override { return "autoscale-gameservers"; }
  Status Run(runtime::RunContext& ctx) override;

 private:
  GameServerCountsFeed feed_;
  kube::Informer informer_;
};

}  // namespace aw::autoscale
