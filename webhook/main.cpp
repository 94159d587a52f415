// allocating-webhook: composition of the components. Each section builds one component from the
// flags and hands it what it needs; the logic lives in the components.
//
// Exit codes: 0 after a graceful shutdown (SIGTERM/SIGINT) or --help; 1 when start-up fails
// (certificate, ports); 2 on a bad command line.

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <prometheus/registry.h>

#include "admission/crd_state.h"
#include "admission/policy.h"
#include "kube/controllers.h"
#include "resolver/service.h"  // [helper E]
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

// SIGTERM/SIGINT are blocked in every thread and received here with sigwait, so no handler runs
// in an arbitrary thread.
sigset_t BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill the process
  return set;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace aw;
  const sigset_t termination = BlockTerminationSignals();

  // ---- Flags -------------------------------------------------------------------------------
  // Each component registers its own flags here (additive: one Register* call per component).
  flags::FlagSet fs("allocating-webhook", kSummary);
  server::ServerConfig server_cfg;
  server::RegisterServerFlags(fs, &server_cfg);
  admission::Policy policy;
  server::RegisterPolicyFlags(fs, &policy);
  // [kube client / leader election / CRD guard flags: helper D]
  kube::KubeFlags kube_flags;
  kube::RegisterKubeFlags(fs, &kube_flags);
  // [resolver flags: helper E]
  resolver::ResolverFlags resolver_flags;
  resolver::RegisterResolverFlags(fs, &resolver_flags);

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
  server::AdmissionServer admission_server(server_cfg.https, certs, pipeline, admission_metrics);
  if (auto err = admission_server.Start()) {
    log::error("cannot start the admission server", {{"error", *err}});
    return 1;
  }

  // ---- Health, readiness and metrics (plain HTTP) ------------------------------------------
  server::HealthServer health(server_cfg.https.bind_address, server_cfg.health_port, *registry);
  health.AddReadinessCheck("certificate", [&certs]() -> std::optional<std::string> {
    if (!certs.Loaded()) return "no serving certificate loaded";
    return std::nullopt;
  });
  health.AddReadinessCheck("https-listener", [&admission_server]() -> std::optional<std::string> {
    if (!admission_server.Serving()) return "HTTPS listener not serving";
    return std::nullopt;
  });
  // [more readiness checks (e.g. the CRD guard's first sync): helper D]
  if (auto err = health.Start()) {
    log::error("cannot start the health server", {{"error", *err}});
    return 1;
  }

  // ---- Controllers: Kubernetes client, leader election, CRD guard (helper D) ---------------
  // Enabled only with a kube config (--kubeconfig or in-cluster); then the CRD guard drives
  // crd_readiness instead of --crd-accepts-allocating. Register leader callbacks
  // (controllers.OnLeader) before controllers.Start().
  kube::Controllers controllers(kube_flags, crd_readiness, *registry);
  if (auto err = controllers.Init(); !err.empty()) {
    log::error("cannot configure the Kubernetes client", {{"error", err}});
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

  controllers.Start();  // [helper D] after every OnLeader registration

  log::info("allocating-webhook started",
            {{"port", std::to_string(server_cfg.https.port)},
             {"health_port", std::to_string(server_cfg.health_port)},
             {"crd_accepts_allocating", crd_readiness.AcceptsAllocating() ? "true" : "false"}});

  // ---- Run until SIGTERM/SIGINT, then shut down ---------------------------------------------
  int sig = 0;
  sigwait(&termination, &sig);
  log::info("shutting down", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
  // Stop in reverse order: controllers first [helpers D/E], then stop accepting admission
  // connections, close idle keep-alive ones and let requests in progress finish.
  controllers.Stop();  // [helper D] releases the lease, cancels watches
  if (resolver_service) resolver_service->Stop();  // [helper E] (already out of leadership)
  admission_server.Stop();
  const bool drained = admission_server.WaitStopped(
      std::chrono::duration_cast<std::chrono::milliseconds>(server_cfg.shutdown_grace));
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
