// allocation-gateway: agones-allocator's REST API in front of agones-allocator that answers an
// allocation only once its GameServer is confirmed playable (docs/gateway.md). A binary of its
// own, shipped in the same image as allocating-webhook: it is its own Deployment with its own
// service account and RBAC (get, list, watch and patch on gameservers), scales with matchmaker
// traffic rather than with admission, and never takes part in the webhook's leader election.
//
// Composition (runtime::Manager groups, started in order, stopped in reverse, all within
// --shutdown-grace + 5s):
//   sources  the serving key pair poller, the client CA poller (timers on the dispatcher) and the
//            allocator client (services; its calls are asynchronous, on the Kubernetes client's
//            I/O thread, at most --allocator-workers in flight)
//   health   the plain health/metrics listener (a service)
//   cache    gateway::GameServerCache: the GameServer informer (opted-in servers), the waiters
//            (their deadline timers on the dispatcher) and the request-key index (a runnable:
//            ready once the informer synced)
//   drain    waits, on stop, for the requests the stopped listener still answers (a service)
//   gateway  the gateway's TLS listener (a service)
// On SIGTERM, first, for --drain-delay, readiness fails (and the gRPC health check answers
// NOT_SERVING) while the listener keeps accepting and serving new requests as usual, each HTTP/1.1
// answer with Connection: close and an HTTP/2 connection with no call open getting GOAWAY, so that
// clients whose connections or Service endpoints still lead here are served while the pod leaves
// the endpoints. Then new requests are refused (the listener stops accepting; a new
// request on an open connection gets 503), and requests already accepted keep waiting for their
// GameServers (the informer and the allocator client still run) and are answered as usual for up
// to --shutdown-grace (the delay included); those still waiting then get 503 "the gateway is
// shutting down" (their GameServers stay allocated: see docs/gateway.md), then the cache and the
// sources stop. Threads, whatever the number of requests: --io-threads + 1 (the dispatcher,
// runtime/dispatcher.h: the health port, the two certificate pollers' timers and the waiters'
// deadline timers) + 1 (the Kubernetes client's I/O thread: the informer, the allocator calls and
// the delivery marks' writes, all asynchronous) + main, the manager's thread and one per runnable
// (1: the cache) = --io-threads + 5 (7 at the defaults).
//
// Exit codes: 0 after SIGTERM/SIGINT or --help; 1 when start-up fails; 2 on a bad command line.

#include <prometheus/registry.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "gateway/io/allocator_client.h"
#include "gateway/io/cache.h"
#include "gateway/io/gateway.h"
#include "gateway/io/grpc_service.h"
#include "gateway/io/listener.h"
#include "gateway/io/marks.h"
#include "kube/client.h"
#include "kube/config.h"
#include "runtime/dispatcher.h"
#include "runtime/manager.h"
#include "runtime/process.h"
#include "runtime/service.h"
#include "server/cert_reloader.h"
#include "server/client_ca_reloader.h"
#include "server/connection_server.h"
#include "server/drain_delay.h"
#include "server/health_server.h"
#include "util/flags.h"
#include "util/io/build_info.h"
#include "util/io/log.h"
#include "util/status.h"

namespace {

using namespace aw;

constexpr const char* kSummary =
    "allocation-gateway: agones-allocator's REST API (POST /gameserverallocation) in front of\n"
    "agones-allocator; answers once the allocated GameServer is confirmed playable (Allocated),\n"
    "allocating again when it times out, becomes Unhealthy/Shutdown or is deleted.";

// The process's flags, each registered by the component it configures; the Kubernetes client's
// configuration is the process's own.
struct Flags {
  gateway::ListenerFlags listener;
  gateway::AllocatorOptions allocator;
  gateway::GatewayOptions gateway;
  size_t delivery_workers = 16;
  std::string kubeconfig;
  std::string context;
  std::string watch_namespace;
  std::chrono::nanoseconds shutdown_grace = std::chrono::seconds(30);
  std::chrono::nanoseconds drain_delay{0};
  log::Flags log;
};

void Register(flags::FlagSet& fs, Flags* f) {
  gateway::RegisterListenerFlags(fs, &f->listener);
  gateway::RegisterAllocatorFlags(fs, &f->allocator);
  gateway::RegisterDeliveryFlags(fs, &f->delivery_workers);
  gateway::RegisterGatewayFlags(fs, &f->gateway);
  fs.String("kubeconfig", &f->kubeconfig, "kubeconfig file (\"\" = in-cluster config)");
  fs.String("context", &f->context, "kubeconfig context (\"\" = current-context)");
  fs.String("namespace", &f->watch_namespace,
            "watch GameServers in this namespace only (\"\" = all namespaces)");
  fs.Duration(
      "shutdown-grace", &f->shutdown_grace,
      "on SIGTERM (readiness fails, new requests are refused), how long accepted requests "
      "may still wait for their GameServers and be answered (--drain-delay included); those "
      "left then get 503");
  fs.Duration("drain-delay", &f->drain_delay,
              "On SIGTERM/SIGINT, first, for this long: readiness fails and the gRPC health check "
              "answers NOT_SERVING while the listener keeps accepting and serving new requests, "
              "every HTTP/1.1 answer with Connection: close (HTTP/2: GOAWAY once no call is "
              "open), so that matchmakers still routed here are served while the pod leaves the "
              "Service's endpoints; then new requests are refused. 0 refuses them at once; the "
              "chart sets 5s. Less than --shutdown-grace");
  log::RegisterFlags(fs, &f->log);
}

template <typename Component>
void MustAdd(runtime::Manager& m, std::unique_ptr<Component> c, runtime::RunnableOptions o) {
  if (Status st = m.Add(std::move(c), std::move(o)); !st.ok()) {
    log::error("cannot compose the gateway", {{"error", st.ToString()}});
    std::_Exit(1);
  }
}

// The Kubernetes client configuration: the kubeconfig when given, else in-cluster.
StatusOr<std::unique_ptr<kube::Client>> BuildClient(const Flags& f) {
  StatusOr<kube::ClientConfig> cfg = f.kubeconfig.empty()
                                         ? kube::LoadInCluster()
                                         : kube::LoadKubeconfig(f.kubeconfig, f.context, false);
  if (!cfg.ok()) return cfg.status().Annotate("Kubernetes client configuration");
  return kube::NewClient(*cfg);
}

}  // namespace

int main(int argc, char** argv) {
  const sigset_t signals = runtime::BlockAsyncSignals();
  runtime::RaiseFileLimit();

  Flags f;
  flags::FlagSet fs("allocation-gateway", kSummary);
  Register(fs, &f);
  if (std::optional<int> exit_code =
          runtime::ParseCommandLine(fs, argc, argv, "allocation-gateway")) {
    return *exit_code;
  }
  for (const Status& st :
       {gateway::ValidateAllocatorOptions(f.allocator), gateway::ValidateGatewayOptions(f.gateway),
        server::ValidateDrainDelay(f.drain_delay, f.shutdown_grace)}) {
    if (!st.ok()) {
      std::fprintf(stderr, "allocation-gateway: %s\n", st.message().c_str());
      return 2;
    }
  }
  log::Apply(f.log);

  auto registry = std::make_shared<prometheus::Registry>();
  build::AddBuildInfoMetric(*registry, "allocating_gateway_build_info",
                            "The build: version, commit and build date as labels (always 1).");
  // The control dispatcher (runtime/dispatcher.h): one thread for the health port's connections,
  // the certificate pollers and the waiters' deadline timers, apart from the listener's io
  // threads. Made before the components that run on it, so destroyed after them; stopped once the
  // manager stopped them.
  StatusOr<std::unique_ptr<runtime::Dispatcher>> dispatcher = runtime::Dispatcher::Start();
  if (!dispatcher.ok()) {
    log::error("cannot start the dispatcher", {{"error", dispatcher.status().ToString()}});
    return 1;
  }
  const auto reload =
      std::chrono::duration_cast<std::chrono::milliseconds>(f.listener.reload_interval);

  // ---- TLS material ----
  server::CertReloader certs(f.listener.tls_cert_file, f.listener.tls_key_file, *registry, reload);
  if (Status s = certs.LoadInitial(); !s.ok()) {
    log::error("cannot load the serving certificate", {{"error", s.ToString()}});
    return 1;
  }
  std::unique_ptr<server::ClientCaReloader> client_ca;
  if (!f.listener.disable_mtls) {
    const std::string& ca_path = gateway::ClientCaPath(f.listener);
    client_ca = std::make_unique<server::ClientCaReloader>(ca_path, *registry, reload);
    if (Status s = client_ca->LoadInitial(); !s.ok()) {
      log::error(
          "cannot load the client CA bundle (--client-ca-file or --client-ca-dir, or "
          "--disable-mtls)",
          {{"error", s.ToString()}});
      return 1;
    }
  }

  // ---- Kubernetes client and the one GameServer informer ----
  StatusOr<std::unique_ptr<kube::Client>> client = BuildClient(f);
  if (!client.ok()) {
    log::error("cannot build the Kubernetes client", {{"error", client.status().ToString()}});
    return 1;
  }

  // ---- Allocator client: its calls run on the Kubernetes client's I/O thread ----
  gateway::AllocatorClient allocator(f.allocator);
  if (Status s = allocator.Init((*client)->executor()); !s.ok()) {
    log::error("cannot configure the allocator client", {{"error", s.ToString()}});
    return 1;
  }
  gateway::GameServerCache cache(**client, f.watch_namespace, registry.get(),
                                 (*dispatcher)->executor());
  gateway::WaiterRegistry& waiters = cache.waiters();
  auto lookup = [&cache](const std::string& name) { return cache.Lookup(name); };

  // "No server lost" (docs/gateway.md): the gateway's writes on the servers it allocated, and
  // idempotent retries found in the cache's request-key index. Destroyed (its queued writes sent)
  // before the gateway, whose calls its callbacks reach.
  auto marks = std::make_unique<gateway::GameServerMarks>(**client, f.delivery_workers);
  gateway::GatewayOptions gopts = f.gateway;
  gopts.mark_delivered = [&marks](const gateway::DeliveryMark& m,
                                  std::function<void(Status)> done) {
    marks->MarkDelivered(m, std::move(done));
  };
  gopts.undeliver = [&marks](const std::string& ns, const std::string& name,
                             const std::string& at) { marks->Undeliver(ns, name, at); };
  gopts.release_now = [&marks](const std::string& ns, const std::string& name,
                               const std::string& expected) {
    marks->ReleaseNow(ns, name, expected);
  };
  gopts.extend_answer_by = [&marks](const std::string& ns, const std::string& name,
                                    const std::string& answer_by) {
    marks->ExtendAnswerBy(ns, name, answer_by);
  };
  gopts.on_abandoned = [&marks](const gateway::AbandonedAllocation& a) {
    // With an idempotency key the client is expected to retry: the server stays for that retry
    // until its answer-by (+ the resolver's grace), then it is released.
    if (!a.request_key.empty()) return;
    marks->ReleaseNow(a.namespace_, a.name, a.answer_by);
  };
  gopts.find_by_key = [&cache](const std::string& ns, const std::string& key) {
    return cache.request_keys().Find(ns, key);
  };
  gateway::Gateway gw(gopts, allocator, waiters, lookup, *registry, (*client)->executor());

  // Set on SIGTERM, for --drain-delay before the gateway refuses new requests (gw.BeginDrain).
  std::atomic<bool> leaving{false};
  gateway::GrpcService grpc(
      {.max_deadline = f.gateway.max_deadline},
      [&gw](const server::HttpRequest& req, server::Responder r) { gw.Handle(req, r); },
      [&gw, &leaving] { return !leaving.load() && !gw.Draining(); }, *registry);
  server::ConnectionServer listener(
      gateway::ListenerOptions(f.listener),
      [&gw, &grpc](const server::HttpRequest& req, server::Responder r) {
        if (!grpc.Handle(req, r)) gw.Handle(req, r);
      },
      &certs, client_ca.get(), *registry);

  server::HealthServer health(f.listener.bind_address, f.listener.health_port, *registry, {},
                              (*dispatcher)->executor());
  health.AddReadinessCheck("informer", [&cache]() -> std::optional<std::string> {
    if (!cache.HasSynced()) return "GameServer informer not synced";
    return std::nullopt;
  });
  health.AddReadinessCheck("draining", [&gw, &leaving]() -> std::optional<std::string> {
    if (gw.Draining()) return "shutting down (SIGTERM): new requests are refused";
    if (leaving.load())
      return "shutting down (SIGTERM): --drain-delay, then new requests are refused";
    return std::nullopt;
  });
  health.AddReadinessCheck("listener", [&listener]() -> std::optional<std::string> {
    if (!listener.Serving()) return "gateway listener not serving";
    return std::nullopt;
  });

  // ---- Composition ----
  std::atomic<bool> undrained{false};
  // The drain delay comes out of --shutdown-grace (checked above: it is shorter).
  runtime::Manager manager({"sources", "health", "cache", "drain", "gateway"},
                           f.shutdown_grace - f.drain_delay + std::chrono::seconds(5));
  // The two pollers are timers on the dispatcher, where the health server runs (no thread of their
  // own).
  MustAdd(manager,
          runtime::MakeService(
              "certificates", [&certs, &health] { return certs.Start(health.executor()); },
              [&certs](std::chrono::steady_clock::time_point) {
                certs.Stop();
                return Status::Ok();
              }),
          {.group = "sources"});
  if (client_ca) {
    MustAdd(manager,
            runtime::MakeServiceRunnable(
                "client-ca",
                [&client_ca, &health] {
                  client_ca->Start(health.executor());
                  return Status::Ok();
                },
                [&client_ca] { client_ca->Stop(); }),
            {.group = "sources"});
  }
  MustAdd(manager,
          runtime::MakeServiceRunnable(
              "allocator-client",
              [&allocator] {
                allocator.Start();
                return Status::Ok();
              },
              [&allocator] { allocator.Stop(); }),
          {.group = "sources"});
  MustAdd(manager,
          runtime::MakeServiceRunnable(
              "health", [&health] { return health.Start().Annotate("health listener"); },
              [&health] { health.Stop(); }),
          {.group = "health"});
  // Accepted requests are still served (waiting, re-allocating, answered with Connection: close)
  // for --shutdown-grace; the cache and the allocator client stop only after this. Those still
  // waiting then are answered 503 (WaiterRegistry::Stop) before the io threads stop.
  MustAdd(
      manager,
      runtime::MakeService(
          "gateway-drain", [] { return Status::Ok(); },
          [&listener, &waiters, &gw, &undrained](std::chrono::steady_clock::time_point deadline) {
            const auto left =
                std::max(std::chrono::steady_clock::duration::zero(),
                         deadline - std::chrono::steady_clock::now() - std::chrono::seconds(5));
            if (listener.WaitDrained(std::chrono::duration_cast<std::chrono::milliseconds>(left))) {
              listener.WaitStopped(std::chrono::milliseconds(0));
              return Status::Ok();
            }
            const size_t left_waiting = gw.InFlight();
            log::warn("--shutdown-grace is over; answering the requests still waiting with 503",
                      {{"requests", std::to_string(left_waiting)}});
            waiters.Stop();
            if (!listener.WaitStopped(std::chrono::seconds(2))) {
              undrained = true;
              return Status::DeadlineExceeded("gateway requests still waiting");
            }
            return Status::Ok();
          }),
      {.group = "drain"});
  MustAdd(manager,
          runtime::MakeRunnable("gameserver-informer",
                                [&cache](runtime::RunContext& ctx) { return cache.Run(ctx); }),
          {.group = "cache"});
  MustAdd(
      manager,
      runtime::MakeServiceRunnable(
          "gateway-listener", [&listener] { return listener.Start().Annotate("gateway listener"); },
          [&listener, &gw] {
            gw.BeginDrain();  // readiness fails and new requests get 503 from here on
            listener.Stop();
          }),
      {.group = "gateway"});
  manager.OnStarted([&] {
    log::info("allocation-gateway started",
              {{"port", std::to_string(f.listener.port)},
               {"health_port", std::to_string(f.listener.health_port)},
               {"allocator", f.allocator.address},
               {"mtls", f.listener.disable_mtls ? "false" : "true"}});
  });

  // ---- Run until SIGTERM/SIGINT or a failure (as allocating-webhook's main) ----
  // On SIGTERM, first the drain delay: readiness fails, the listener keeps serving (answers close
  // their connections); then the manager stops the groups in reverse.
  const runtime::DrainStep drain{[&leaving, &listener] {
                                   leaving.store(true);
                                   listener.BeginDrain();
                                 },
                                 f.drain_delay};
  const runtime::RunEnd end = runtime::RunUntilSignal(manager, signals, drain);
  if (end.by_signal) marks.reset();  // the releases of the servers left waiting are sent first
  // The manager stopped every component on the dispatcher: its thread runs out of work and ends.
  if (Status st = (*dispatcher)->Stop(std::chrono::steady_clock::now() + std::chrono::seconds(2));
      !st.ok()) {
    log::warn("dispatcher stop", {{"error", st.ToString()}});
  }
  return runtime::ExitCode(end, undrained);
}
