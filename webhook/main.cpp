// allocating-webhook: composition of the components. Each section builds one component from the
// flags and hands it what it needs; the logic lives in the components.
//
// Exit codes: 0 after a graceful shutdown (SIGTERM/SIGINT) or --help; 1 when start-up fails
// (certificate, ports); 2 on a bad command line.

#include <prometheus/registry.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "admission/crd_state.h"
#include "autoscale/io/service.h"
#include "gate/policy.h"
#include "kube/controllers.h"
#include "resolver/service.h"  // [helper E]
#include "runtime/manager.h"
#include "server/admission_metrics.h"
#include "server/admission_pipeline.h"
#include "server/cert_reloader.h"
#include "server/config.h"
#include "server/health_server.h"
#include "server/https_server.h"
#include "util/flags.h"
#include "util/log.h"

namespace {

constexpr const char* kSummary =
    "allocating-webhook: admission webhook that holds freshly allocated Agones GameServers in\n"
    "the Allocating state until they are confirmed playable.";

// Every asynchronous signal whose default action would end the process is blocked in every
// thread (the mask is inherited by threads started later) and received here with sigwait, so no
// handler runs in an arbitrary thread: SIGTERM/SIGINT shut down gracefully; the others (SIGHUP,
// SIGUSR1, SIGUSR2, SIGALRM, ...) are logged and ignored. SIGPIPE is ignored outright (a client
// that hangs up must not kill the process; writes then fail with EPIPE).
sigset_t BlockAsyncSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO,
                  SIGPWR, SIGSTKFLT, SIGXCPU, SIGXFSZ}) {
    sigaddset(&set, sig);
  }
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return set;
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// Each connection is a file descriptor: lift the soft limit to the hard one (like Go's runtime
// does) so that --max-connections is reachable under the default soft limit of 1024.
void RaiseFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace aw;
  const sigset_t signals = BlockAsyncSignals();
  RaiseFileLimit();

  // ---- Flags -------------------------------------------------------------------------------
  // Each component registers its own flags here (additive: one Register* call per component).
  flags::FlagSet fs("allocating-webhook", kSummary);
  server::ServerConfig server_cfg;
  server::RegisterServerFlags(fs, &server_cfg);
  gate::Policy policy;
  server::RegisterPolicyFlags(fs, &policy);
  // [kube client / leader election / CRD guard flags: helper D]
  kube::KubeFlags kube_flags;
  kube::RegisterKubeFlags(fs, &kube_flags);
  // [resolver flags: helper E]
  resolver::ResolverFlags resolver_flags;
  resolver::RegisterResolverFlags(fs, &resolver_flags);
  autoscale::AutoscaleFlags autoscale_flags;
  autoscale::RegisterAutoscaleFlags(fs, &autoscale_flags);

  auto parsed = fs.Parse(argc, argv);
  if (parsed.status == flags::FlagSet::Status::kHelp) {
    std::fputs(fs.Usage().c_str(), stdout);
    return 0;
  }
  if (parsed.status == flags::FlagSet::Status::kError) {
    std::fprintf(stderr, "allocating-webhook: %s\nRun with --help for the list of flags.\n",
                 parsed.message.c_str());
    return 2;
  }
  if (auto err = server::Validate(server_cfg, policy)) {
    std::fprintf(stderr, "allocating-webhook: %s\n", err->c_str());
    return 2;
  }
  if (auto err = resolver::ValidateResolverFlags(resolver_flags, policy)) {  // [helper E]
    std::fprintf(stderr, "allocating-webhook: %s\n", err->c_str());
    return 2;
  }

  // ---- Logging -----------------------------------------------------------------------------
  log::Level level{};
  log::Format format{};
  log::ParseLevel(server_cfg.log_level, &level);  // values checked by the flag parser
  log::ParseFormat(server_cfg.log_format, &format);
  log::SetLevel(level);
  log::SetFormat(format);

  // ---- Shared state ------------------------------------------------------------------------
  // One metrics registry for every component; served on /metrics.
  auto registry = std::make_shared<prometheus::Registry>();
  // Whether the GameServer CRD accepts "Allocating": the flag's value until the CRD guard
  // (helper D) publishes the live answer through Set().
  admission::AtomicCrdReadiness crd_readiness(server_cfg.crd_accepts_allocating);

  // ---- TLS certificate ---------------------------------------------------------------------
  server::CertReloader certs(
      server_cfg.tls_cert_file, server_cfg.tls_key_file, *registry,
      std::chrono::duration_cast<std::chrono::milliseconds>(server_cfg.cert_reload_interval));
  if (auto err = certs.LoadInitial()) {
    log::error("cannot load the serving certificate", {{"error", *err}});
    return 1;
  }
  certs.Start();

  // ---- Admission server (HTTPS) ------------------------------------------------------------
  server::AdmissionMetrics admission_metrics(*registry);
  server::AdmissionPipeline pipeline(policy, crd_readiness, admission_metrics,
                                     server_cfg.https.max_body_bytes);
  server::AdmissionServer admission_server(server_cfg.https, certs, pipeline, admission_metrics,
                                           *registry);
  // ---- Buffer autoscaling webhook: its route on the admission port ----------------------------
  std::unique_ptr<autoscale::AutoscaleEndpoint> autoscale_endpoint;
  if (autoscale_flags.buffer) {
    autoscale_endpoint = std::make_unique<autoscale::AutoscaleEndpoint>(*registry);
    admission_server.AddRoute(std::string(autoscale::kBufferRoute),
                              [&endpoint = *autoscale_endpoint](const server::HttpRequest& req) {
                                return endpoint.Serve(req);
                              });
  }
  // ---- end of the autoscaling route ---------------------------------------------------------
  if (auto err = admission_server.Start()) {
    log::error("cannot start the admission server", {{"error", *err}});
    return 1;
  }

  // ---- Controllers: Kubernetes client, leader election, CRD guard (helper D) ---------------
  // Enabled only with a kube config (--kubeconfig or in-cluster); then the CRD guard drives
  // crd_readiness instead of --crd-accepts-allocating. Register leader callbacks
  // (controllers.OnLeader) before controllers.Start(). Built (not started) before the health
  // server, which serves its client's connection counters.
  kube::Controllers controllers(kube_flags, crd_readiness, *registry);
  if (auto err = controllers.Init(); !err.empty()) {
    log::error("cannot configure the Kubernetes client", {{"error", err}});
    return 1;
  }

  // ---- Health, readiness and metrics (plain HTTP) ------------------------------------------
  server::HealthServer health(server_cfg.https.bind_address, server_cfg.health_port, *registry,
                              server_cfg.health);
  health.AddReadinessCheck("certificate", [&certs]() -> std::optional<std::string> {
    if (!certs.Loaded()) return "no serving certificate loaded";
    return std::nullopt;
  });
  health.AddReadinessCheck("https-listener", [&admission_server]() -> std::optional<std::string> {
    if (!admission_server.Serving()) return "HTTPS listener not serving";
    return std::nullopt;
  });
  health.AddCollector([&controllers] { return controllers.TransportMetrics(); });
  if (auto err = health.Start()) {
    log::error("cannot start the health server", {{"error", *err}});
    return 1;
  }

  // ---- Resolver (helper E) ------------------------------------------------------------------
  // Needs the Kubernetes client: the GameServer cache runs on every replica (warm standby); the
  // resolver loop runs only while this replica leads.
  std::unique_ptr<resolver::ResolverService> resolver_service;
  if (controllers.Enabled()) {
    resolver_service = std::make_unique<resolver::ResolverService>(
        resolver_flags, policy, controllers.client(), controllers.events(), *registry);
    resolver_service->Start();
    controllers.OnLeader([&resolver_service] { resolver_service->StartLeading(); },
                         [&resolver_service] { resolver_service->StopLeading(); });
  }

  // ---- Buffer autoscaling webhook: the GameServer watch behind its counts -------------------
  // A runtime::Manager runnable on every replica (not leader-only). Until main.cpp composes one
  // Manager for every component, this block runs its own.
  runtime::Manager autoscale_runtime({"autoscale"}, std::chrono::seconds(2));
  std::jthread autoscale_thread;
  if (autoscale_endpoint && controllers.Enabled()) {
    if (Status s = autoscale_runtime.Add(std::make_unique<autoscale::GameServerCountsWatch>(
                                             controllers.client(), *autoscale_endpoint,
                                             registry.get()),
                                         {"autoscale"});
        !s.ok()) {
      log::error("cannot start the autoscaling watch", {{"error", s.ToString()}});
      return 1;
    }
    autoscale_thread = std::jthread([&autoscale_runtime](std::stop_token stop) {
      if (Status s = autoscale_runtime.Run(stop); !s.ok()) {
        log::error("autoscaling watch stopped", {{"error", s.ToString()}});
      }
    });
  } else if (autoscale_endpoint) {
    log::warn("--autoscale-buffer without a Kubernetes config: every valid review is answered "
              "503 (no GameServer counts)");
  }
  // ---- end of the autoscaling watch ---------------------------------------------------------

  controllers.Start();  // [helper D] after every OnLeader registration

  log::info("allocating-webhook started",
            {{"port", std::to_string(server_cfg.https.port)},
             {"health_port", std::to_string(server_cfg.health_port)},
             {"crd_accepts_allocating", crd_readiness.AcceptsAllocating() ? "true" : "false"}});

  // ---- Run until SIGTERM/SIGINT (other signals are logged and ignored), then shut down
  // ---------------------------------------------
  int sig = 0;
  for (;;) {
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGTERM || sig == SIGINT) break;
    log::warn("signal ignored", {{"signal", SignalName(sig)}});
  }
  log::info("shutting down", {{"signal", SignalName(sig)}});
  // The whole shutdown fits in --shutdown-grace. First stop accepting admission connections and
  // close idle keep-alive ones (requests being read are answered, with Connection: close), then
  // stop the controllers [helpers D/E] while those finish, then wait for them.
  const auto grace_end =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(server_cfg.shutdown_grace);
  admission_server.Stop();
  controllers.Stop();  // [helper D] releases the lease, cancels watches
  if (resolver_service) resolver_service->Stop();  // [helper E] (already out of leadership)
  if (autoscale_thread.joinable()) {
    autoscale_thread.request_stop();
    autoscale_thread.join();
  }
  const bool drained = admission_server.WaitStopped(
      std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 grace_end - std::chrono::steady_clock::now())));
  health.Stop();
  certs.Stop();
  if (!drained) {
    // A request still in progress after the grace period (a stuck client): exit anyway.
    log::warn("requests still in progress after --shutdown-grace; exiting");
    std::fflush(stderr);
    std::_Exit(0);
  }
  log::info("stopped");
  return 0;
}
