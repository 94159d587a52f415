// allocating-webhook: composition of the components. main() parses the flags, builds each
// component from them, and hands every component to one runtime::Manager as a runnable, in ordered
// groups (kGroups); the logic lives in the components.
//
// Exit codes: 0 after a graceful shutdown (SIGTERM/SIGINT) or --help; 1 when start-up fails
// (certificate, ports) or a component fails while running; 2 on a bad command line.

#include <prometheus/registry.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "admission/io/config.h"
#include "admission/io/metrics.h"
#include "admission/io/pipeline.h"
#include "admission/io/server.h"
#include "autoscale/io/service.h"
#include "contract/crd_state.h"
#include "kube/controllers.h"
#include "policy/policy.h"
#include "resolver/service.h"
#include "runtime/dispatcher.h"
#include "runtime/manager.h"
#include "runtime/process.h"
#include "runtime/service.h"
#include "server/cert_reloader.h"
#include "server/health_server.h"
#include "util/flags.h"
#include "util/io/build_info.h"
#include "util/io/log.h"
#include "util/status.h"

namespace {

constexpr const char* kSummary =
    "allocating-webhook: admission webhook that holds freshly allocated Agones GameServers in\n"
    "the Allocating state until they are confirmed playable.";

// The manager's groups, in start order; they stop in reverse, leader runnables first, all
// within --shutdown-grace. So on SIGTERM: for --drain-delay nothing stops, but readiness fails and
// every admission answer closes its connection (kube-apiserver's pooled connections to this pod end
// cleanly, new ones go to the other replicas); then the resolver stops; the admission listener
// stops accepting and closes idle keep-alive connections; the controllers release the lease and
// cancel their API calls; the caches stop; then what is left of the grace period goes to the
// admission requests still in progress (admission-drain); then the health port and the certificate
// poller.
const std::vector<std::string> kGroups = {"certificates", "health",      "admission-drain",
                                          "caches",       "controllers", "admission"};

// Adds a runnable or service the composition cannot do without: an unknown group is a bug here.
template <typename Component>
void MustAdd(aw::runtime::Manager& m, std::unique_ptr<Component> r,
             aw::runtime::RunnableOptions o) {
  if (aw::Status st = m.Add(std::move(r), std::move(o)); !st.ok()) {
    aw::log::error("cannot compose the components", {{"error", st.ToString()}});
    std::_Exit(1);
  }
}

// The certificate poller, the health port, and the admission listener with its drain.
void AddServing(aw::runtime::Manager& m, aw::server::CertReloader& certs,
                aw::server::HealthServer& health, aw::admission::AdmissionServer& admission,
                std::atomic<bool>& undrained) {
  using namespace aw;
  // The poller is a timer on the dispatcher, where the health server runs (every replica has one,
  // with or without a Kubernetes config); the pair itself was loaded before the manager started, so
  // the servers of the later groups start with it.
  MustAdd(m,
          runtime::MakeService(
              "certificates", [&certs, &health] { return certs.Start(health.executor()); },
              [&certs](std::chrono::steady_clock::time_point) {
                certs.Stop();
                return Status::Ok();
              }),
          {.group = "certificates"});
  MustAdd(m,
          runtime::MakeServiceRunnable(
              "health",
              [&health] {
                Status st = health.Start();
                if (!st.ok())
                  log::error("cannot start the health server", {{"error", st.message()}});
                return st;
              },
              [&health] { health.Stop(); }),
          {.group = "health"});
  MustAdd(m,
          runtime::MakeServiceRunnable(
              "admission",
              [&admission] {
                Status st = admission.Start();
                if (!st.ok()) {
                  log::error("cannot start the admission server", {{"error", st.message()}});
                }
                return st;
              },
              [&admission] { admission.Stop(); }),
          {.group = "admission"});
  // Waits for the requests the stopped listener still serves (they are answered with
  // Connection: close) until the manager's stop deadline.
  MustAdd(m,
          runtime::MakeService(
              "admission-drain", [] { return Status::Ok(); },
              [&admission, &undrained](std::chrono::steady_clock::time_point deadline) {
                const auto left = std::max(std::chrono::steady_clock::duration::zero(),
                                           deadline - std::chrono::steady_clock::now());
                if (!admission.WaitStopped(
                        std::chrono::duration_cast<std::chrono::milliseconds>(left))) {
                  undrained = true;
                  return Status::DeadlineExceeded("admission requests still in progress");
                }
                return Status::Ok();
              }),
          {.group = "admission-drain"});
}

// The Kubernetes side (only with a kube config): the GameServer cache on every replica, the
// controllers (CRD guard, events, leader election), and the resolver while this replica leads.
void AddControllers(aw::runtime::Manager& m, aw::kube::Controllers& controllers,
                    aw::resolver::ResolverService& resolver) {
  using namespace aw;
  controllers.OnLeader([&m] { m.SetLeader(true); }, [&m] { m.SetLeader(false); });
  MustAdd(m, resolver.CacheRunnable(), {.group = "caches"});
  MustAdd(m,
          runtime::MakeServiceRunnable(
              "controllers",
              [&controllers] {
                controllers.Start();
                return Status::Ok();
              },
              [&controllers] { controllers.Stop(); }),
          {.group = "controllers"});
  MustAdd(m, resolver.LoopRunnable(), {.group = "controllers", .needs_leader = true});
}

}  // namespace

int main(int argc, char** argv) {
  using namespace aw;
  const sigset_t signals = runtime::BlockAsyncSignals();
  runtime::RaiseFileLimit();

  // ---- Flags -------------------------------------------------------------------------------
  // Each component registers its own flags here (additive: one Register* call per component).
  flags::FlagSet fs("allocating-webhook", kSummary);
  admission::ServerConfig server_cfg;
  admission::RegisterServerFlags(fs, &server_cfg);
  log::Flags log_flags;
  log::RegisterFlags(fs, &log_flags);
  policy::Policy policy;
  admission::RegisterPolicyFlags(fs, &policy);
  kube::KubeFlags kube_flags;
  kube::RegisterKubeFlags(fs, &kube_flags);
  resolver::ResolverFlags resolver_flags;
  resolver::RegisterResolverFlags(fs, &resolver_flags);
  autoscale::AutoscaleFlags autoscale_flags;
  autoscale::RegisterAutoscaleFlags(fs, &autoscale_flags);

  if (std::optional<int> exit_code =
          runtime::ParseCommandLine(fs, argc, argv, "allocating-webhook")) {
    return *exit_code;
  }
  for (const Status& st : {admission::Validate(server_cfg, policy),
                           resolver::ValidateResolverFlags(resolver_flags, policy)}) {
    if (!st.ok()) {
      std::fprintf(stderr, "allocating-webhook: %s\n", st.message().c_str());
      return 2;
    }
  }

  // ---- Logging -----------------------------------------------------------------------------
  log::Apply(log_flags);

  // ---- Components (built here, run by the manager below; they outlive it) ------------------
  // One metrics registry for every component; served on /metrics.
  auto registry = std::make_shared<prometheus::Registry>();
  build::AddBuildInfoMetric(*registry, "allocating_webhook_build_info",
                            "The build: version, commit and build date as labels (always 1).");
  // The control dispatcher (runtime/dispatcher.h): one thread for the health port's connections,
  // the certificate poller and the prober, apart from the admission io threads. Made before the
  // components that run on it, so destroyed after them; stopped once the manager stopped them.
  StatusOr<std::unique_ptr<runtime::Dispatcher>> dispatcher = runtime::Dispatcher::Start();
  if (!dispatcher.ok()) {
    log::error("cannot start the dispatcher", {{"error", dispatcher.status().message()}});
    return 1;
  }
  // Whether the GameServer CRD accepts "Allocating": the flag's value until the CRD guard
  // publishes the live answer through Set().
  contract::AtomicCrdReadiness crd_readiness(server_cfg.crd_accepts_allocating);

  server::CertReloader certs(
      server_cfg.tls_cert_file, server_cfg.tls_key_file, *registry,
      std::chrono::duration_cast<std::chrono::milliseconds>(server_cfg.cert_reload_interval));
  if (Status st = certs.LoadInitial(); !st.ok()) {
    log::error("cannot load the serving certificate", {{"error", st.message()}});
    return 1;
  }

  admission::AdmissionMetrics admission_metrics(*registry);
  admission::AdmissionPipeline pipeline(policy, crd_readiness, admission_metrics,
                                        server_cfg.https.limits.max_body_bytes);
  admission::AdmissionServer admission_server(server_cfg.https, certs, pipeline, admission_metrics,
                                              *registry);
  // The Buffer autoscaling webhook shares the admission port (a route of its own).
  std::unique_ptr<autoscale::AutoscaleEndpoint> autoscale_endpoint;
  if (autoscale_flags.buffer) {
    autoscale_endpoint = std::make_unique<autoscale::AutoscaleEndpoint>(*registry);
    admission_server.AddRoute(std::string(autoscale::kBufferRoute),
                              [&endpoint = *autoscale_endpoint](const server::HttpRequest& req) {
                                return endpoint.Serve(req);
                              });
  }

  // Enabled only with a kube config (--kubeconfig or in-cluster); then the CRD guard drives
  // crd_readiness instead of --crd-accepts-allocating. Built before the health server, which
  // serves its client's connection counters.
  kube::Controllers controllers(kube_flags, crd_readiness, *registry);
  if (Status st = controllers.Init(); !st.ok()) {
    log::error("cannot configure the Kubernetes client", {{"error", st.message()}});
    return 1;
  }

  server::HealthServer health(server_cfg.https.bind_address, server_cfg.health_port, *registry,
                              server_cfg.health, (*dispatcher)->executor());
  health.AddReadinessCheck("certificate", [&certs]() -> std::optional<std::string> {
    if (!certs.Loaded()) return "no serving certificate loaded";
    return std::nullopt;
  });
  health.AddReadinessCheck("https-listener", [&admission_server]() -> std::optional<std::string> {
    if (!admission_server.Serving()) return "HTTPS listener not serving";
    return std::nullopt;
  });
  health.AddCollector([&controllers] { return controllers.TransportMetrics(); });

  // The resolver needs the Kubernetes client: its GameServer cache runs on every replica (warm
  // standby); its loop only while this replica leads.
  std::unique_ptr<autoscale::GameServerCountsFeed> counts_feed;  // outlives the resolver's cache
  std::unique_ptr<resolver::ResolverService> resolver_service;
  if (controllers.Enabled()) {
    auto service = resolver::ResolverService::Create(resolver_flags, policy, controllers.client(),
                                                     controllers.events(), *registry,
                                                     (*dispatcher)->executor());
    if (!service.ok()) {
      log::error("cannot create the resolver", {{"error", service.status().message()}});
      return 1;
    }
    resolver_service = std::move(*service);
  }

  // ---- Composition ---------------------------------------------------------------------------
  std::atomic<bool> undrained{false};  // requests still in progress at the stop deadline
  // The drain delay comes out of --shutdown-grace (Validate: it is shorter).
  runtime::Manager manager(kGroups, server_cfg.shutdown_grace - server_cfg.drain_delay);
  AddServing(manager, certs, health, admission_server, undrained);
  if (resolver_service) {
    AddControllers(manager, controllers, *resolver_service);
    // A wedged resolver loop fails liveness: the kubelet restarts this replica, which gives up
    // the Lease, rather than holding it while nobody resolves (docs/operations.md).
    health.AddLivenessCheck("resolver-loop",
                            [&resolver_service] { return resolver_service->Stalled(); });
  }
  // The GameServer counts behind the autoscaling answers, on every replica: from the resolver's
  // GameServer cache when it watches the same objects (one LIST+WATCH), else a watch of their own.
  if (autoscale_endpoint && resolver_service && resolver_service->CacheWatchesAllNamespaces()) {
    counts_feed = std::make_unique<autoscale::GameServerCountsFeed>(*autoscale_endpoint);
    resolver_service->AddCacheHandler(counts_feed.get());
  } else if (autoscale_endpoint && controllers.Enabled()) {
    MustAdd(manager,
            std::make_unique<autoscale::GameServerCountsWatch>(controllers.client(),
                                                               *autoscale_endpoint, registry.get()),
            {.group = "caches"});
  } else if (autoscale_endpoint) {
    log::warn(
        "--autoscale-buffer without a Kubernetes config: every valid review is answered "
        "503 (no GameServer counts)");
  }
  manager.OnStarted([&] {
    log::info("allocating-webhook started",
              {{"port", std::to_string(server_cfg.https.port)},
               {"health_port", std::to_string(server_cfg.health_port)},
               {"crd_accepts_allocating", crd_readiness.AcceptsAllocating() ? "true" : "false"}});
  });

  // ---- Run until SIGTERM/SIGINT (other signals are logged and ignored) or a failure ----------
  // On SIGTERM, first the drain delay (readiness fails, the listener keeps answering with
  // Connection: close), then the manager's stop within what is left of --shutdown-grace.
  const runtime::DrainStep drain{[&admission_server] { admission_server.BeginDrain(); },
                                 server_cfg.drain_delay};
  const runtime::RunEnd end = runtime::RunUntilSignal(manager, signals, drain);
  // The manager stopped every component on the dispatcher (the prober's last probes end within
  // their timeouts): its thread runs out of work and ends.
  if (Status st = (*dispatcher)->Stop(std::chrono::steady_clock::now() + std::chrono::seconds(2));
      !st.ok()) {
    log::warn("dispatcher stop", {{"error", st.message()}});
  }
  return runtime::ExitCode(end, undrained);
}
