#include "resolver/service.h"

#include <prometheus/registry.h>

#include "kube/gameserver_cache.h"
#include "probe/prober.h"
#include "resolver/kube_adapters.h"
#include "resolver/metrics.h"
#include "resolver/resolver.h"
#include "runtime/service.h"
#include "util/duration.h"
#include "util/io/log.h"

namespace aw::resolver {

void RegisterResolverFlags(flags::FlagSet& fs, ResolverFlags* f) {
  fs.Duration("probe-timeout", &f->probe_timeout,
              "Timeout of one readiness probe; must be below --default-probe-period (each probe "
              "also ends within 3/4 of its server's probe period)",
              std::chrono::milliseconds(1));
  fs.Size("probe-concurrency", &f->probe_concurrency,
          "Probes with an open socket at once (the rest queue)", 1, 100000);
  fs.Duration("resync-period", &f->resync_period,
              "How often the resolver re-evaluates every opted-in GameServer from its cache "
              "(Allocating, or Allocated without passing the gate)",
              std::chrono::seconds(1));
  fs.String("udp-probe-payload", &f->udp_probe_payload,
            "Datagram sent by UDP probes (any datagram back means ready)");
  fs.Size("resolver-workers", &f->workers,
          "Concurrent promotion/timeout patches sent to the API server", 1, 256);
  fs.Duration("undelivered-grace", &f->undelivered_grace,
              "How long after a gated server's allocating.agones.dev/answer-by (written by the "
              "allocation gateway) its delivery mark may still come; then a server the gateway "
              "never delivered is released (on-undelivered, outcome Undelivered)",
              std::chrono::milliseconds(0));
  fs.String("resolver-namespace", &f->namespace_,
            "Namespace whose GameServers the resolver watches (empty: all namespaces)");
}

Status ValidateResolverFlags(const ResolverFlags& f, const policy::Policy& policy) {
  if (f.probe_timeout >= policy.default_probe_period) {
    return Status::InvalidArgument("--probe-timeout (" + util::FormatDuration(f.probe_timeout) +
                                   ") must be below --default-probe-period (" +
                                   util::FormatDuration(policy.default_probe_period) + ")");
  }
  if (f.undelivered_grace > std::chrono::seconds(10)) {
    return Status::InvalidArgument("--undelivered-grace (" +
                                   util::FormatDuration(f.undelivered_grace) +
                                   ") must be at most 10s: an undelivered server is released "
                                   "within its answer-by + 10s");
  }
  if (f.udp_probe_payload.size() > 1400) {
    return Status::InvalidArgument("--udp-probe-payload is longer than 1400 bytes");
  }
  return Status::Ok();
}

struct ResolverService::Parts {
  Parts(std::unique_ptr<probe::SocketProber> socket_prober, ResolverFlags flags,
        const policy::Policy& policy, kube::Client& client, kube::EventRecorder& recorder,
        prometheus::Registry& registry)
      : metrics(registry),
        cache(client, &registry, flags.namespace_),
        source(cache),
        patcher(client, flags.workers),
        events(recorder),
        prober(std::move(socket_prober)),
        resolver(Options(flags, policy), source, patcher, events, *prober, clock, executor,
                 &metrics),
        notifier(resolver),
        namespace_(flags.namespace_) {
    cache.AddHandler(&notifier);
  }
  // Patches still in flight complete (their callbacks use `events`) before any part goes.
  ~Parts() { patcher.Drain(); }
  static probe::ProberOptions ProberOpts(const ResolverFlags& f) {
    probe::ProberOptions o;
    o.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(f.probe_timeout);
    o.max_concurrency = f.probe_concurrency;
    o.udp_payload = f.udp_probe_payload;
    return o;
  }
  static ResolverOptions Options(const ResolverFlags& f, const policy::Policy& policy) {
    ResolverOptions o;
    o.policy = policy;
    o.resync_period = std::chrono::duration_cast<std::chrono::milliseconds>(f.resync_period);
    o.probe_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(f.probe_timeout);
    o.undelivered_grace = f.undelivered_grace;
    return o;
  }

  Metrics metrics;
  kube::GameServerCache cache;
  CacheSource source;
  KubePatcher patcher;
  KubeEvents events;
  SystemWallClock clock;
  std::unique_ptr<probe::SocketProber> prober;
  InlineExecutor executor;
  Resolver resolver;
  CacheNotifier notifier;
  std::string namespace_;  // the cache's ("" = every namespace)
};

StatusOr<std::unique_ptr<ResolverService>> ResolverService::Create(
    ResolverFlags flags, const policy::Policy& policy, kube::Client& client,
    kube::EventRecorder& events, prometheus::Registry& registry,
    boost::asio::any_io_executor probes) {
  auto prober = probe::SocketProber::Create(Parts::ProberOpts(flags), std::move(probes));
  if (!prober.ok()) return prober.status();
  return std::make_unique<ResolverService>(PassKey{}, std::move(*prober), std::move(flags), policy,
                                           client, events, registry);
}

ResolverService::ResolverService(PassKey, std::unique_ptr<probe::SocketProber> prober,
                                 ResolverFlags flags, const policy::Policy& policy,
                                 kube::Client& client, kube::EventRecorder& events,
                                 prometheus::Registry& registry)
    : parts_(std::make_unique<Parts>(std::move(prober), std::move(flags), policy, client, events,
                                     registry)) {}

ResolverService::~ResolverService() = default;

void ResolverService::AddCacheHandler(kube::InformerHandler* handler) {
  parts_->cache.AddHandler(handler);
}

bool ResolverService::CacheWatchesAllNamespaces() const { return parts_->namespace_.empty(); }

std::unique_ptr<runtime::Service> ResolverService::CacheRunnable() {
  Parts* p = parts_.get();
  return runtime::MakeServiceRunnable(
      "gameserver-cache",
      [p] {
        p->cache.Start();
        return Status::Ok();
      },
      [p] { p->cache.Stop(); });
}

std::unique_ptr<runtime::Runnable> ResolverService::LoopRunnable() {
  Parts* p = parts_.get();
  return runtime::MakeRunnable("resolver", [p](runtime::RunContext& ctx) {
    p->cache.WaitForSync(std::chrono::seconds(2));
    return p->resolver.Run(ctx);
  });
}

std::optional<std::string> ResolverService::Stalled() const { return parts_->resolver.Stalled(); }

}  // namespace aw::resolver
