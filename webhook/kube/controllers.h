// The Kubernetes-facing controllers of the binary, composed from flags: the API client, the event
// recorder, leader election and the CRD guard (and hooks for the resolver).
//
// Promise: RegisterKubeFlags binds --kubeconfig, --context, --allow-insecure-kubeconfig,
// --leader-elect, --leader-election-{namespace,name,identity}, --lease-duration, --renew-deadline,
// --retry-period and --manage-crd. Controllers::Init() decides whether a kube config is available
// (--kubeconfig, else in-cluster KUBERNETES_SERVICE_HOST); without one, Enabled() is false and the
// binary runs admission only (the CRD readiness stays the --crd-accepts-allocating flag). With one,
// Start() starts the CRD guard (every replica watches; it now drives the CRD readiness), the event
// recorder and leader election (or, with --leader-elect=false, acts as leader at once). Leader
// callbacks added with OnLeader() run on start/stop of leadership. Stop() releases the lease and
// stops everything within a second or two.
#pragma once

#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "contract/crd_state.h"
#include "kube/client.h"
#include "kube/crd_guard.h"
#include "kube/events.h"
#include "kube/leader_election.h"
#include "util/flags.h"
#include "util/status.h"

namespace prometheus {
class Registry;
}

namespace aw::kube {

struct KubeFlags {
  std::string kubeconfig;
  std::string context;
  bool allow_insecure_kubeconfig = false;
  bool leader_elect = true;
  std::string leader_election_namespace;  // "" = in-cluster namespace file, else allocating-system
  std::string leader_election_name = "allocating-webhook";
  std::string leader_election_identity;  // "" = $POD_NAME, else hostname_pid
  std::chrono::nanoseconds lease_duration = std::chrono::seconds(15);
  std::chrono::nanoseconds renew_deadline = std::chrono::seconds(10);
  std::chrono::nanoseconds retry_period = std::chrono::seconds(2);
  bool manage_crd = true;
};

void RegisterKubeFlags(flags::FlagSet& fs, KubeFlags* f);

class Controllers {
 public:
  Controllers(KubeFlags flags, contract::AtomicCrdReadiness& crd_readiness,
              prometheus::Registry& registry);
  ~Controllers();

  // Loads the config and builds the components. InvalidArgument saying what is wrong on a bad
  // configuration (e.g. unreadable kubeconfig); OK when fine (including "no kube config:
  // admission only").
  Status Init();
  bool Enabled() const { return client_ != nullptr; }

  // Valid when Enabled().
  Client& client() { return *client_; }
  EventRecorder& events() { return *events_; }
  const ClientConfig& config() const { return config_; }
  const std::string& identity() const { return identity_; }

  // The Kubernetes client's connection counters as Prometheus counter families (empty when not
  // Enabled()), computed from the transport at each call:
  //   allocating_webhook_kube_connections_opened_total
  //   allocating_webhook_kube_connection_reuses_total
  //   allocating_webhook_kube_pooled_connections_dropped_total{reason="closed"|"idle"}
  //   allocating_webhook_kube_request_retries_total   (re-sent on a new connection after a reused
  //                                                   one was found closed before any response)
  std::vector<prometheus::MetricFamily> TransportMetrics() const;

  // Registers leadership callbacks (call before Start()). They run on the Kubernetes I/O thread
  // (the elector's callbacks; on Start()/Stop()'s thread without leader election) and must not
  // block.
  void OnLeader(std::function<void()> started, std::function<void()> stopped);

  void Start();
  void Stop();

 private:
  KubeFlags flags_;
  contract::AtomicCrdReadiness& crd_readiness_;
  prometheus::Registry& registry_;
  ClientConfig config_;
  std::string identity_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<EventRecorder> events_;
  std::unique_ptr<CrdGuard> guard_;
  std::unique_ptr<LeaderElector> elector_;
  std::vector<std::function<void()>> on_started_, on_stopped_;
  bool leading_without_election_ = false;
};

}  // namespace aw::kube
