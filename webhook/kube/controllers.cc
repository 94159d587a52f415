#include "kube/controllers.h"

#include <unistd.h>

#include <cstdlib>

#include "util/io/log.h"

namespace aw::kube {
namespace {

std::string DefaultIdentity() {
  if (const char* p = std::getenv("POD_NAME"); p && *p) return p;
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "unknown");
  return std::string(host) + "_" + std::to_string(getpid());
}

std::chrono::milliseconds Ms(std::chrono::nanoseconds n) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(n);
}

}  // namespace

void RegisterKubeFlags(flags::FlagSet& fs, KubeFlags* f) {
  using std::chrono::milliseconds;
  fs.String("kubeconfig", &f->kubeconfig,
            "Path to a kubeconfig for running outside a cluster; \"\" = in-cluster config when "
            "KUBERNETES_SERVICE_HOST is set, else no Kubernetes access (admission only)");
  fs.String("context", &f->context, "kubeconfig context to use (\"\" = current-context)");
  fs.Bool("allow-insecure-kubeconfig", &f->allow_insecure_kubeconfig,
          "Accept a kubeconfig cluster with insecure-skip-tls-verify: true (refused otherwise)");
  fs.Bool("leader-elect", &f->leader_elect,
          "Elect one leader among replicas (Lease) to run the resolver and the CRD guard's "
          "writes; false = this replica acts as leader");
  fs.String("leader-election-namespace", &f->leader_election_namespace,
            "Namespace of the leader-election Lease (\"\" = the pod's namespace, else "
            "allocating-system)");
  fs.String("leader-election-name", &f->leader_election_name, "Name of the leader-election Lease");
  fs.String("leader-election-identity", &f->leader_election_identity,
            "This replica's identity in the Lease (\"\" = $POD_NAME, else hostname_pid)");
  fs.Duration("lease-duration", &f->lease_duration,
              "How long a non-leader waits after last seeing the Lease change before taking over",
              milliseconds(1000));
  fs.Duration("renew-deadline", &f->renew_deadline,
              "How long the leader keeps retrying to renew before it stops leading",
              milliseconds(100));
  fs.Duration("retry-period", &f->retry_period,
              "Interval between leader-election attempts (acquire or renew)", milliseconds(10));
  fs.Bool("manage-crd", &f->manage_crd,
          "Let the leader add Allocating to the GameServer CRD's status.state enum when it is "
          "missing (needs patch on customresourcedefinitions/gameservers.agones.dev)");
}

Controllers::Controllers(KubeFlags flags, contract::AtomicCrdReadiness& crd_readiness,
                         prometheus::Registry& registry)
    : flags_(std::move(flags)), crd_readiness_(crd_readiness), registry_(registry) {}

Controllers::~Controllers() { Stop(); }

namespace {

prometheus::MetricFamily CounterFamily(std::string name, std::string help,
                                       std::vector<std::pair<std::string, double>> by_reason) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = prometheus::MetricType::Counter;
  for (auto& [reason, value] : by_reason) {
    prometheus::ClientMetric m;
    if (!reason.empty()) m.label.push_back({"reason", reason});
    m.counter.value = value;
    f.metric.push_back(std::move(m));
  }
  return f;
}

}  // namespace

std::vector<prometheus::MetricFamily> Controllers::TransportMetrics() const {
  if (!client_) return {};
  const TransportCounters c = client_->transport_counters();
  auto d = [](uint64_t v) { return static_cast<double>(v); };
  return {
      CounterFamily("allocating_webhook_kube_connections_opened_total",
                    "TCP+TLS connections the Kubernetes client opened to the API server",
                    {{"", d(c.connections_opened)}}),
      CounterFamily("allocating_webhook_kube_connection_reuses_total",
                    "API requests sent on a pooled keep-alive connection",
                    {{"", d(c.connections_reused)}}),
      CounterFamily("allocating_webhook_kube_pooled_connections_dropped_total",
                    "Pooled API connections dropped before use: closed by the server, or idle too "
                    "long",
                    {{"closed", d(c.stale_discarded)}, {"idle", d(c.expired_discarded)}}),
      CounterFamily("allocating_webhook_kube_request_retries_total",
                    "API requests re-sent at once on a new connection after a reused one was "
                    "found closed before any response byte",
                    {{"", d(c.stale_retries)}}),
  };
}

Status Controllers::Init() {
  StatusOr<ClientConfig> cr = Status::NotFound("no Kubernetes configuration");
  if (!flags_.kubeconfig.empty()) {
    cr = LoadKubeconfig(flags_.kubeconfig, flags_.context, flags_.allow_insecure_kubeconfig);
  } else if (InClusterAvailable()) {
    cr = LoadInCluster();
  } else {
    log::info(
        "no Kubernetes configuration (no --kubeconfig, not in a cluster): admission only; "
        "resolver, leader election and CRD guard are off");
    return Status::Ok();
  }
  if (!cr) return cr.status();
  config_ = *cr;
  StatusOr<std::unique_ptr<Client>> client = NewClient(config_);
  if (!client) return client.status().Annotate("kubernetes client");
  client_ = std::move(client).value();

  identity_ =
      flags_.leader_election_identity.empty() ? DefaultIdentity() : flags_.leader_election_identity;
  EventRecorderOptions eo;
  eo.host = identity_;
  events_ = std::make_unique<EventRecorder>(*client_, eo, &registry_);
  CrdGuardOptions go;
  go.manage = flags_.manage_crd;
  guard_ = std::make_unique<CrdGuard>(*client_, go, crd_readiness_, &registry_);
  if (flags_.leader_elect) {
    LeaderElectionConfig lc;
    lc.namespace_ =
        !flags_.leader_election_namespace.empty()
            ? flags_.leader_election_namespace
            : (!config_.namespace_.empty() && config_.source == "in-cluster" ? config_.namespace_
                                                                             : "allocating-system");
    lc.name = flags_.leader_election_name;
    lc.identity = identity_;
    lc.lease_duration = Ms(flags_.lease_duration);
    lc.renew_deadline = Ms(flags_.renew_deadline);
    lc.retry_period = Ms(flags_.retry_period);
    if (auto e = ValidateLeaderElectionConfig(lc); !e.empty()) return Status::InvalidArgument(e);
    LeaderCallbacks cb;
    cb.on_started_leading = [this] {
      guard_->SetLeader(true);
      for (auto& f : on_started_) f();
    };
    cb.on_stopped_leading = [this] {
      for (auto& f : on_stopped_) f();
      guard_->SetLeader(false);
    };
    elector_ = std::make_unique<LeaderElector>(*client_, lc, std::move(cb), &registry_);
  }
  log::info("kubernetes client configured",
            {{"source", config_.source},
             {"server", config_.host + ":" + std::to_string(config_.port)},
             {"identity", identity_},
             {"leader_elect", flags_.leader_elect ? "true" : "false"},
             {"manage_crd", flags_.manage_crd ? "true" : "false"}});
  return Status::Ok();
}

void Controllers::OnLeader(std::function<void()> started, std::function<void()> stopped) {
  if (started) on_started_.push_back(std::move(started));
  if (stopped) on_stopped_.push_back(std::move(stopped));
}

void Controllers::Start() {
  if (!client_) return;
  guard_->Start();
  events_->Start();
  if (elector_) {
    elector_->Start();
  } else {
    log::info("leader election disabled: this replica acts as leader");
    leading_without_election_ = true;
    guard_->SetLeader(true);
    for (auto& f : on_started_) f();
  }
}

void Controllers::Stop() {
  if (!client_) return;
  // Leadership first (callbacks run, the lease is released), then cancel every in-flight call so
  // no watch or request can hold up the shutdown, then the threads.
  if (elector_) elector_->Stop();
  if (leading_without_election_) {
    leading_without_election_ = false;
    for (auto& f : on_stopped_) f();
  }
  client_->Shutdown();
  if (guard_) guard_->Stop();
  if (events_) events_->Stop();
}

}  // namespace aw::kube
