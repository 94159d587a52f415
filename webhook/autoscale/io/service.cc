#include "autoscale/io/service.h"

#include <condition_variable>
#include <stop_token>

#include "kube/gameserver_cache.h"
#include "util/io/log.h"
#include "util/io/mutex.h"

namespace aw::autoscale {
namespace {

constexpr std::array<ReviewResult, 4> kResults = {
    ReviewResult::kScaled, ReviewResult::kUnknownFleet, ReviewResult::kBadRequest,
    ReviewResult::kUnavailable};

kube::InformerOptions WatchOptions() {
  kube::InformerOptions o = kube::GameServerCacheOptions("");
  o.name = "autoscale-gameservers";
  return o;
}

}  // namespace

void RegisterAutoscaleFlags(flags::FlagSet& fs, AutoscaleFlags* f) {
  fs.Bool("autoscale-buffer", &f->buffer,
          "Serve Agones' Buffer autoscaling policy with Allocating GameServers counted as "
          "allocated, as a FleetAutoscaler Webhook endpoint on the admission port "
          "(POST /autoscale/buffer/bufferSize=N/minReplicas=N/maxReplicas=N; needs a Kubernetes "
          "config: it watches the opted-in GameServers)");
}

AutoscaleEndpoint::AutoscaleEndpoint(prometheus::Registry& registry)
    : reviews_(prometheus::BuildCounter()
                   .Name("allocating_webhook_autoscale_reviews_total")
                   .Help("FleetAutoscaleReviews answered on /autoscale/buffer, by result "
                         "(scaled, unknown_fleet, bad_request, unavailable)")
                   .Register(registry)),
      desired_(prometheus::BuildGauge()
                   .Name("allocating_webhook_autoscale_desired_replicas")
                   .Help("Replicas last answered to a FleetAutoscaleReview, by fleet")
                   .Register(registry)) {
  for (size_t i = 0; i < kResults.size(); ++i) {
    by_result_[i] = &reviews_.Add({{"result", std::string(ResultName(kResults[i]))}});
  }
}

server::HttpResponse AutoscaleEndpoint::Serve(const server::HttpRequest& req) {
  ReviewAnswer a =
      HandleBufferReview(ReviewHttpRequest{req.method, req.path, req.query, req.content_type,
                                           req.body, req.body_too_large},
                         counts_);
  by_result_[static_cast<size_t>(a.result)]->Increment();
  if (a.result == ReviewResult::kScaled && a.servers > 0) {
    const std::string key = a.namespace_ + "/" + a.fleet;
    MutexLock lock(gauges_mu_);
    auto it = gauges_.find(key);
    if (it == gauges_.end()) {
      it = gauges_.emplace(key, &desired_.Add({{"namespace", a.namespace_}, {"fleet", a.fleet}}))
               .first;
    }
    it->second->Set(static_cast<double>(a.replicas));
  }
  if (a.status == 200) {
    if (log::Enabled(log::Level::kDebug)) {
      log::debug("autoscale review answered", {{"uid", a.uid},
                                               {"namespace", a.namespace_},
                                               {"fleet", a.fleet},
                                               {"result", std::string(ResultName(a.result))},
                                               {"replicas", std::to_string(a.replicas)},
                                               {"allocated", std::to_string(a.allocated)},
                                               {"allocating", std::to_string(a.allocating)},
                                               {"limited", a.limited ? "true" : "false"}});
    }
  } else {
    log::warn("autoscale review refused", {{"status", std::to_string(a.status)},
                                           {"uid", a.uid},
                                           {"namespace", a.namespace_},
                                           {"fleet", a.fleet},
                                           {"reason", a.message}});
  }
  server::HttpResponse res{a.status, std::move(a.content_type), std::move(a.body), {}};
  if (!a.allow.empty()) res.headers.emplace_back("Allow", a.allow);
  return res;
}

void AutoscaleEndpoint::ForgetFleet(const std::string& ns, const std::string& fleet) {
  MutexLock lock(gauges_mu_);
  auto it = gauges_.find(ns + "/" + fleet);
  if (it == gauges_.end()) return;
  desired_.Remove(it->second);
  gauges_.erase(it);
}

GameServerCountsWatch::GameServerCountsWatch(kube::Client& client, AutoscaleEndpoint& endpoint,
                                             prometheus::Registry* registry)
    : feed_(endpoint), informer_(client, WatchOptions(), registry) {
  informer_.AddHandler(&feed_);
}

GameServerCountsWatch::~GameServerCountsWatch() { informer_.Stop(); }

Status GameServerCountsWatch::Run(runtime::RunContext& ctx) {
  informer_.Start();
  ctx.Ready();
  Mutex mu;
  CondVar cv;
  MutexLock lock(mu);
  std::stop_token stop = ctx.stop();
  cv.Wait(mu, stop, [] { return false; });
  informer_.Stop();
  return Status::Ok();
}

void GameServerCountsFeed::Upsert(const kube::ObjectPtr& obj) {
  endpoint_.counts().Upsert(obj->namespace_, obj->name, FactsOf(*obj));
}

void GameServerCountsFeed::OnDelete(const kube::ObjectPtr& last_known) {
  FleetCounts& counts = endpoint_.counts();
  const GameServerFacts facts = FactsOf(*last_known);
  counts.Remove(last_known->namespace_, last_known->name);
  if (!facts.fleet.empty() && counts.Lookup(last_known->namespace_, facts.fleet).servers == 0) {
    endpoint_.ForgetFleet(last_known->namespace_, facts.fleet);
  }
}

void GameServerCountsFeed::OnSynced() { endpoint_.counts().MarkSynced(); }

}  // namespace aw::autoscale
