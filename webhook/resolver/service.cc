#include "resolver/service.h"

#include <prometheus/registry.h>

#include "kube/gameserver_cache.h"
#include "probe/prober.h"
#include "resolver/kube_adapters.h"
#include "resolver/metrics.h"
#include "resolver/resolver.h"
#include "util/duration.h"
#include "util/log.h"

namespace aw::resolver {

void RegisterResolverFlags(flags::FlagSet& fs, ResolverFlags* f) {
  fs.Duration("probe-timeout", &f->probe_timeout,
              "Timeout of one readiness probe; must be below --default-probe-period (each probe "
              "also ends within 3/4 of its server's probe period)",
              std::chrono::milliseconds(1));
  fs.Size("probe-concurrency", &f->probe_concurrency,
          "Probes with an open socket at once (the rest queue)", 1, 100000);
  fs.Duration("resync-period", &f->resync_period,
              "How often the resolver re-evaluates every Allocating GameServer from its cache",
              std::chrono::seconds(1));
  fs.String("udp-probe-payload", &f->udp_probe_payload,
            "Datagram sent by UDP probes (any datagram back means ready)");
  fs.Size("resolver-workers", &f->workers,
          "Concurrent promotion/timeout patches sent to the API server", 1, 256);
  fs.String("resolver-namespace", &f->namespace_,
            "Namespace whose GameServers the resolver watches (empty: all namespaces)");
}

std::optional<std::string> ValidateResolverFlags(const ResolverFlags& f,
                                                 const gate::Policy& policy) {
  if (f.probe_timeout >= policy.default_probe_period) {
    return "--probe-timeout (" + util::FormatDuration(f.probe_timeout) +
           ") must be below --default-probe-period (" +
           util::FormatDuration(policy.default_probe_period) + ")";
  }
  if (f.udp_probe_payload.size() > 1400) return "--udp-probe-payload is longer than 1400 bytes";
  return std::nullopt;
}

struct ResolverService::Parts {
  Parts(ResolverFlags flags, const gate::Policy& policy, kube::Client& client,
        kube::EventRecorder& recorder, prometheus::Registry& registry)
      : metrics(registry),
        cache(client, &registry, flags.namespace_),
        source(cache),
        patcher(client),
        events(recorder),
        prober(ProberOpts(flags)),
        executor(flags.workers),
        resolver(Options(flags, policy), source, patcher, events, prober, clock, executor,
                 &metrics),
        notifier(resolver) {
    cache.AddHandler(&notifier);
  }
  static probe::ProberOptions ProberOpts(const ResolverFlags& f) {
    probe::ProberOptions o;
    o.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(f.probe_timeout);
    o.max_concurrency = f.probe_concurrency;
    o.udp_payload = f.udp_probe_payload;
    return o;
  }
  static ResolverOptions Options(const ResolverFlags& f, const gate::Policy& policy) {
    ResolverOptions o;
    o.policy = policy;
    o.resync_period = std::chrono::duration_cast<std::chrono::milliseconds>(f.resync_period);
    o.probe_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(f.probe_timeout);
    return o;
  }

  Metrics metrics;
  kube::GameServerCache cache;
  CacheSource source;
  KubePatcher patcher;
  KubeEvents events;
  SystemWallClock clock;
  probe::SocketProber prober;
  ThreadPoolExecutor executor;
  Resolver resolver;
  CacheNotifier notifier;
  bool started = false;
};

ResolverService::ResolverService(ResolverFlags flags, const gate::Policy& policy,
                                 kube::Client& client, kube::EventRecorder& events,
                                 prometheus::Registry& registry)
    : parts_(std::make_unique<Parts>(std::move(flags), policy, client, events, registry)) {}

ResolverService::~ResolverService() { Stop(); }

void ResolverService::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!parts_ || parts_->started) return;
  parts_->started = true;
  parts_->cache.Start();
}

void ResolverService::StartLeading() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!parts_) return;
  // Wait briefly for the first list so the first pass sees every server (a later sync triggers
  // a full pass anyway).
  parts_->cache.WaitForSync(std::chrono::seconds(2));
  parts_->resolver.Start();
}

void ResolverService::StopLeading() {
  std::lock_guard<std::mutex> lock(mu_);
  if (parts_) parts_->resolver.Stop();
}

void ResolverService::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!parts_) return;
  parts_->resolver.Stop();
  parts_->cache.Stop();
}

}  // namespace aw::resolver
