// allocation-gateway: agones-allocator's REST API in front of agones-allocator that answers an
// allocation only once its GameServer is confirmed playable (docs/gateway.md). A binary of its
// own, shipped in the same image as allocating-webhook: it is its own Deployment with its own
// service account and RBAC (read-only on gameservers), scales with matchmaker traffic rather than
// with admission, and never takes part in the webhook's leader election.
//
// Composition (runtime::Manager groups, started in order, stopped in reverse):
//   sources  serving key pair, client CA bundle (reloaded from their files), allocator workers
//   cache    the GameServer informer (opted-in servers) and the waiters' timer thread
//   servers  the gateway's TLS listener and the plain health/metrics listener
// Threads, whatever the number of requests: --io-threads + 1 (health) + --allocator-workers +
// informer 1 + timers 1 + reloaders 2 + the manager's per-runnable threads.
//
// Exit codes: 0 after SIGTERM/SIGINT or --help; 1 when start-up fails; 2 on a bad command line.

#include <prometheus/registry.h>
#include <signal.h>
#include <sys/resource.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>

#include "gateway/io/allocator_client.h"
#include "gateway/io/gateway.h"
#include "gateway/io/waiters.h"
#include "admission/keys.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "runtime/manager.h"
#include "server/cert_reloader.h"
#include "server/client_ca_reloader.h"
#include "server/connection_server.h"
#include "server/health_server.h"
#include "util/flags.h"
#include "util/log.h"

namespace {

using namespace aw;

constexpr const char* kSummary =
    "allocation-gateway: agones-allocator's REST API (POST /gameserverallocation) in front of\n"
    "agones-allocator; answers once the allocated GameServer is confirmed playable (Allocated),\n"
    "allocating again when it times out, becomes Unhealthy/Shutdown or is deleted.";

struct Flags {
  std::string bind_address = "0.0.0.0";
  int port = 8443;
  int health_port = 8080;
  std::string tls_cert_file = "/certs/tls.crt";
  std::string tls_key_file = "/certs/tls.key";
  std::string client_ca_file = "/client-ca/ca.crt";
  bool disable_mtls = false;
  std::chrono::nanoseconds reload_interval = std::chrono::seconds(1);
  size_t io_threads = 2;
  size_t max_connections = 4096;
  size_t max_body_bytes = 1024 * 1024;
  std::chrono::nanoseconds read_timeout = std::chrono::seconds(10);
  std::chrono::nanoseconds idle_timeout = std::chrono::seconds(120);
  gateway::AllocatorOptions allocator;
  gateway::GatewayOptions gateway;
  std::string kubeconfig;
  std::string context;
  std::string watch_namespace;
  std::chrono::nanoseconds shutdown_grace = std::chrono::seconds(30);
  std::string log_level = "info";
  std::string log_format = "json";
};

void Register(flags::FlagSet& fs, Flags* f) {
  fs.String("bind-address", &f->bind_address, "address the gateway and health ports bind to");
  fs.Int("port", &f->port, "HTTPS port of the allocation API", 1, 65535);
  fs.Int("health-port", &f->health_port, "plain-HTTP port for /healthz, /readyz, /metrics", 1,
         65535);
  fs.String("tls-cert-file", &f->tls_cert_file, "serving certificate (PEM), reloaded on change");
  fs.String("tls-key-file", &f->tls_key_file, "serving private key (PEM), reloaded on change");
  fs.String("client-ca-file", &f->client_ca_file,
            "CA bundle (PEM) that client certificates must chain to (mTLS), reloaded on change");
  fs.Bool("disable-mtls", &f->disable_mtls,
          "accept clients without a certificate (like agones-allocator's --disable-mtls)");
  fs.Duration("cert-reload-interval", &f->reload_interval,
              "how often the certificate, key and client CA files are re-read",
              std::chrono::milliseconds(100));
  fs.Size("io-threads", &f->io_threads, "threads serving the gateway's connections", 1, 64);
  fs.Size("max-connections", &f->max_connections,
          "open connections at most (waiting requests included)", 1, 1'000'000);
  fs.Size("max-body-bytes", &f->max_body_bytes, "largest AllocationRequest body (413 above)", 1,
          64 * 1024 * 1024);
  fs.Duration("read-timeout", &f->read_timeout, "whole-request read deadline",
              std::chrono::milliseconds(100));
  fs.Duration("idle-timeout", &f->idle_timeout, "keep-alive idle timeout",
              std::chrono::milliseconds(100));
  fs.String("allocator-address", &f->allocator.address, "agones-allocator's REST URL (https://)");
  fs.String("allocator-ca-file", &f->allocator.ca_file,
            "CA (PEM) of agones-allocator's serving certificate (\"\" = system roots)");
  fs.String("allocator-client-cert-file", &f->allocator.client_cert_file,
            "client certificate (PEM) presented to agones-allocator");
  fs.String("allocator-client-key-file", &f->allocator.client_key_file,
            "client key (PEM) for --allocator-client-cert-file");
  fs.Duration("allocator-timeout", &f->allocator.timeout,
              "per-call socket timeout towards agones-allocator (capped by the request's deadline)",
              std::chrono::milliseconds(10));
  fs.Size("allocator-workers", &f->allocator.workers,
          "threads calling agones-allocator (calls in flight at most)", 1, 256);
  fs.Duration("deadline", &f->gateway.default_deadline,
              "default time budget of a request: allocation, waiting and re-allocations",
              std::chrono::milliseconds(1));
  fs.Duration("max-deadline", &f->gateway.max_deadline,
              "largest per-request deadline (X-Allocating-Deadline header or "
              "allocating.agones.dev/gateway-deadline annotation)",
              std::chrono::milliseconds(1));
  fs.Int("max-attempts", &f->gateway.max_attempts,
         "allocations per request at most (the first one included)", 1, 100);
  fs.String("kubeconfig", &f->kubeconfig, "kubeconfig file (\"\" = in-cluster config)");
  fs.String("context", &f->context, "kubeconfig context (\"\" = current-context)");
  fs.String("namespace", &f->watch_namespace,
            "watch GameServers in this namespace only (\"\" = all namespaces)");
  fs.Duration("shutdown-grace", &f->shutdown_grace,
              "on SIGTERM, how long waiting requests may still be answered");
  fs.Enum("log-level", &f->log_level, {"debug", "info", "warn", "error"}, "log level");
  fs.Enum("log-format", &f->log_format, {"json", "text"}, "log format");
}

// Blocks until the manager asks the runnable to stop.
void WaitForStop(std::stop_token stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait(lock, stop, [] { return false; });
}

sigset_t BlockSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return set;
}

}  // namespace

int main(int argc, char** argv) {
  const sigset_t signals = BlockSignals();
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }

  Flags f;
  flags::FlagSet fs("allocation-gateway", kSummary);
  Register(fs, &f);
  auto parsed = fs.Parse(argc, argv);
  if (parsed.status == flags::FlagSet::Status::kHelp) {
    std::fputs(fs.Usage().c_str(), stdout);
    return 0;
  }
  if (parsed.status == flags::FlagSet::Status::kError) {
    std::fprintf(stderr, "allocation-gateway: %s\nRun with --help for the list of flags.\n",
                 parsed.message.c_str());
    return 2;
  }
  if (f.gateway.default_deadline > f.gateway.max_deadline) {
    std::fprintf(stderr, "allocation-gateway: --deadline is above --max-deadline\n");
    return 2;
  }
  log::Level level{};
  log::Format format{};
  log::ParseLevel(f.log_level, &level);
  log::ParseFormat(f.log_format, &format);
  log::SetLevel(level);
  log::SetFormat(format);

  auto registry = std::make_shared<prometheus::Registry>();
  const auto reload = std::chrono::duration_cast<std::chrono::milliseconds>(f.reload_interval);

  // ---- TLS material ----
  server::CertReloader certs(f.tls_cert_file, f.tls_key_file, *registry, reload);
  if (auto err = certs.LoadInitial()) {
    log::error("cannot load the serving certificate", {{"error", *err}});
    return 1;
  }
  std::unique_ptr<server::ClientCaReloader> client_ca;
  if (!f.disable_mtls) {
    client_ca = std::make_unique<server::ClientCaReloader>(f.client_ca_file, *registry, reload);
    if (Status s = client_ca->LoadInitial(); !s.ok()) {
      log::error("cannot load the client CA bundle (--client-ca-file, or --disable-mtls)",
                 {{"error", s.ToString()}});
      return 1;
    }
  }

  // ---- Allocator client ----
  gateway::AllocatorClient allocator(f.allocator);
  if (Status s = allocator.Init(); !s.ok()) {
    log::error("cannot configure the allocator client", {{"error", s.ToString()}});
    return 1;
  }

  // ---- Kubernetes client and the one GameServer informer ----
  kube::ConfigResult cfg = f.kubeconfig.empty() ? kube::LoadInCluster()
                                                : kube::LoadKubeconfig(f.kubeconfig, f.context,
                                                                       false);
  if (!cfg.config) {
    log::error("cannot load the Kubernetes client configuration", {{"error", cfg.error}});
    return 1;
  }
  std::string err;
  std::unique_ptr<kube::Client> client = kube::NewClient(*cfg.config, &err);
  if (!client) {
    log::error("cannot build the Kubernetes client", {{"error", err}});
    return 1;
  }
  kube::InformerOptions io;
  io.name = "gateway-gameservers";
  io.resource = kube::kGameServers;
  io.namespace_ = f.watch_namespace;
  io.label_selector = std::string(keys::kEnabledLabel) + "=true";
  io.resync = std::chrono::seconds(60);
  kube::Informer informer(*client, io, registry.get());
  auto lookup = [&informer](const std::string& ns, const std::string& name) {
    return informer.Get(ns, name);
  };
  gateway::WaiterRegistry waiters(lookup);
  informer.AddHandler(&waiters);

  gateway::Gateway gw(f.gateway, allocator, waiters, lookup, *registry);

  server::ConnectionOptions co;
  co.name = "gateway";
  co.bind_address = f.bind_address;
  co.port = f.port;
  co.io_threads = f.io_threads;
  co.max_connections = f.max_connections;
  co.limits.max_body_bytes = f.max_body_bytes;
  co.read_timeout = f.read_timeout;
  co.idle_timeout = f.idle_timeout;
  server::ConnectionServer listener(
      co, [&gw](const server::HttpRequest& req, server::Responder r) { gw.Handle(req, r); },
      &certs, client_ca.get(), *registry);

  server::HealthServer health(f.bind_address, f.health_port, *registry);
  health.AddReadinessCheck("informer", [&informer]() -> std::optional<std::string> {
    if (!informer.HasSynced()) return "GameServer informer not synced";
    return std::nullopt;
  });
  health.AddReadinessCheck("listener", [&listener]() -> std::optional<std::string> {
    if (!listener.Serving()) return "gateway listener not serving";
    return std::nullopt;
  });

  // ---- Runnables ----
  runtime::Manager manager({"sources", "cache", "servers"}, f.shutdown_grace +
                                                              std::chrono::seconds(5));
  auto add = [&manager](std::string name, std::string group,
                        std::function<Status(runtime::RunContext&)> run) {
    return manager.Add(runtime::MakeRunnable(std::move(name), std::move(run)), {group, false});
  };
  Status added;
  added = add("certificates", "sources", [&](runtime::RunContext& ctx) {
    certs.Start();
    if (client_ca) client_ca->Start();
    ctx.Ready();
    WaitForStop(ctx.stop());
    certs.Stop();
    if (client_ca) client_ca->Stop();
    return Status::Ok();
  });
  if (added.ok()) {
    added = add("allocator-client", "sources", [&](runtime::RunContext& ctx) {
      allocator.Start();
      ctx.Ready();
      WaitForStop(ctx.stop());
      allocator.Stop();
      return Status::Ok();
    });
  }
  if (added.ok()) {
    added = add("gameserver-informer", "cache", [&](runtime::RunContext& ctx) {
      waiters.Start();
      informer.Start();
      while (!ctx.stop().stop_requested()) {
        if (informer.WaitForSync(std::chrono::milliseconds(200))) {
          ctx.Ready();
          break;
        }
      }
      WaitForStop(ctx.stop());
      informer.Stop();
      waiters.Stop();
      return Status::Ok();
    });
  }
  if (added.ok()) {
    added = add("gateway-listener", "servers", [&](runtime::RunContext& ctx) {
      if (auto e = listener.Start()) return Status::IOError(*e);
      ctx.Ready();
      WaitForStop(ctx.stop());
      listener.Stop();
      // Waiting requests are still answered until the grace period ends.
      listener.WaitStopped(std::chrono::duration_cast<std::chrono::milliseconds>(f.shutdown_grace));
      return Status::Ok();
    });
  }
  if (added.ok()) {
    added = add("health", "servers", [&](runtime::RunContext& ctx) {
      if (auto e = health.Start()) return Status::IOError(*e);
      ctx.Ready();
      WaitForStop(ctx.stop());
      health.Stop();
      return Status::Ok();
    });
  }
  if (!added.ok()) {
    log::error("cannot compose the gateway", {{"error", added.ToString()}});
    return 1;
  }

  std::stop_source stop;
  std::thread signal_thread([&stop, signals] {
    int sig = 0;
    while (!stop.stop_requested()) {
      timespec ts{0, 200'000'000};
      sig = sigtimedwait(&signals, nullptr, &ts);
      if (sig == SIGTERM || sig == SIGINT) {
        log::info("shutting down", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
        stop.request_stop();
      }
    }
  });
  log::info("allocation-gateway started",
            {{"port", std::to_string(f.port)},
             {"health_port", std::to_string(f.health_port)},
             {"allocator", f.allocator.address},
             {"mtls", f.disable_mtls ? "false" : "true"}});
  Status result = manager.Run(stop.get_token());
  stop.request_stop();
  signal_thread.join();
  if (!result.ok()) {
    log::error("allocation-gateway stopped with an error", {{"error", result.ToString()}});
    std::fflush(stderr);
    if (result.code() == Status::Code::kDeadlineExceeded) std::_Exit(1);
    return 1;
  }
  log::info("stopped");
  return 0;
}
