#include "admission/io/config.h"

namespace aw::admission {

using std::chrono::milliseconds;

void RegisterServerFlags(flags::FlagSet& fs, ServerConfig* cfg) {
  fs.Int("port", &cfg->https.port, "HTTPS port for admission requests", 1, 65535);
  fs.Int("health-port", &cfg->health_port, "Plain-HTTP port for /healthz, /readyz and /metrics", 1,
         65535);
  fs.String("bind-address", &cfg->https.bind_address,
            "Address both listeners bind to (0.0.0.0 = all IPv4 addresses)");
  fs.String("tls-cert-file", &cfg->tls_cert_file,
            "PEM serving certificate (leaf first, then intermediates); reloaded when it changes. "
            "Required");
  fs.String("tls-key-file", &cfg->tls_key_file,
            "PEM private key of the serving certificate; reloaded when it changes. Required");
  fs.Duration("cert-reload-interval", &cfg->cert_reload_interval,
              "How often the certificate and key files are checked for changes", milliseconds(10));
  fs.Bool("crd-accepts-allocating", &cfg->crd_accepts_allocating,
          "Whether the GameServer CRD's status.state enum lists Allocating; while false the "
          "mutating webhook fails open (allows Allocated unchanged, with a warning)");
  fs.Size("io-threads", &cfg->https.io_threads,
          "Threads serving every admission connection asynchronously (no thread per client); "
          "admission decisions run on them too",
          1, 64);
  fs.Size("max-connections", &cfg->https.max_connections,
          "Most HTTPS connections open at once; at the cap a new client is still admitted and "
          "an idle keep-alive connection is closed for it, or if none is idle the connection "
          "whose current handshake/request started earliest",
          1, 1 << 20);
  fs.Duration("handshake-timeout", &cfg->https.handshake_timeout,
              "Longest a TLS handshake may take from accept to its end", milliseconds(1));
  fs.Duration("read-timeout", &cfg->https.read_timeout,
              "Longest a whole request (head and body) may take from its first byte to its last "
              "(and longest wait for the first request on a new connection); the connection is "
              "closed when it runs out",
              milliseconds(1));
  fs.Duration("write-timeout", &cfg->https.write_timeout,
              "Longest a client may take to accept a whole response", milliseconds(1));
  fs.Duration(
      "keep-alive-timeout", &cfg->https.idle_timeout,
      "How long an idle keep-alive connection is kept open (keep it above the client's idle "
      "timeout, 90s for kube-apiserver)",
      std::chrono::seconds(1));
  fs.Size("keep-alive-max-requests", &cfg->https.keep_alive_max_requests,
          "Requests served on one connection before it is closed", 1, UINT32_MAX);
  fs.Size("max-request-line-bytes", &cfg->https.limits.max_request_line_bytes,
          "Longest request line (method, target, version); longer ones get 414", 256, 1u << 20);
  fs.Size("max-header-bytes", &cfg->https.limits.max_header_bytes,
          "Largest request head (request line and header fields); larger ones get 431", 1024,
          1u << 24);
  fs.Size("max-header-count", &cfg->https.limits.max_header_count,
          "Most header fields in a request; more get 431", 8, 100000);
  fs.Size("health-max-connections", &cfg->health.max_connections,
          "Most connections open at once on the health port (its own io thread and cap; the "
          "same eviction rule as --max-connections)",
          1, 65536);
  fs.Size("max-body-bytes", &cfg->https.limits.max_body_bytes,
          "Largest admission request body accepted; larger ones get 413", 1024, 1u << 30);
  fs.Duration(
      "shutdown-grace", &cfg->shutdown_grace,
      "On SIGTERM/SIGINT: within this long (--drain-delay included), stop accepting, answer the "
      "requests already received (each within its --read-timeout), close idle connections, and "
      "exit 0");
  fs.Duration("drain-delay", &cfg->drain_delay,
              "On SIGTERM/SIGINT, first, for this long: readiness fails (the pod leaves the "
              "webhook Service's endpoints) while the listener keeps accepting and answering, "
              "every answer with Connection: close, and idle keep-alive connections stay open, "
              "so that kube-apiserver, which reuses its pooled connections to this pod, gets "
              "answers instead of a closed connection (a failed call: failurePolicy decides). "
              "0 stops at once; the chart and manifests/base set 5s. Less than "
              "--shutdown-grace");
}

void RegisterPolicyFlags(flags::FlagSet& fs, policy::Policy* policy) {
  fs.StringList("trusted-users", &policy->trusted_users,
                "Comma-separated usernames (request.userInfo.username) allowed to promote "
                "Allocating to Allocated and to write the project-owned annotations; list the "
                "resolver's service account here");
  fs.StringList("agones-controller-users", &policy->agones_controller_users,
                "Comma-separated usernames of the Agones controller (its Allocating -> Shutdown, "
                "a scale-down, gets outcome ScaledDown, or is held with on-scale-down: Hold)");
  fs.String("sdk-service-account", &policy->sdk_service_account,
            "Service account of the Agones SDK sidecar when a GameServer's pod template names "
            "none (Agones' Helm value agones.serviceaccount.sdk.name); only "
            "system:serviceaccount:<the GameServer's namespace>:<it> (or the pod template's "
            "serviceAccountName) and the trusted users may set agones.dev/sdk-allocating-ready");
  fs.Duration("default-timeout", &policy->default_timeout,
              "Allocating deadline when a GameServer has no allocating.agones.dev/timeout");
  fs.Duration("min-timeout", &policy->min_timeout,
              "Smallest allocating.agones.dev/timeout accepted");
  fs.Duration("max-timeout", &policy->max_timeout,
              "Largest allocating.agones.dev/timeout accepted");
  fs.Duration("default-probe-period", &policy->default_probe_period,
              "Probe period when a GameServer has no allocating.agones.dev/probe-period");
  fs.Duration("min-probe-period", &policy->min_probe_period,
              "Smallest allocating.agones.dev/probe-period accepted");
  fs.Duration("max-probe-period", &policy->max_probe_period,
              "Largest allocating.agones.dev/probe-period accepted");
}

Status Validate(const ServerConfig& cfg, const policy::Policy& p) {
  if (cfg.tls_cert_file.empty() || cfg.tls_key_file.empty()) {
    return Status::InvalidArgument(
        "--tls-cert-file and --tls-key-file are required (see scripts/gen-certs)");
  }
  if (cfg.https.port == cfg.health_port)
    return Status::InvalidArgument("--port and --health-port must differ");
  if (Status st = server::ValidateDrainDelay(cfg.drain_delay, cfg.shutdown_grace); !st.ok())
    return st;
  if (cfg.https.limits.max_request_line_bytes > cfg.https.limits.max_header_bytes) {
    return Status::InvalidArgument("--max-request-line-bytes is larger than --max-header-bytes");
  }
  if (p.min_timeout > p.max_timeout)
    return Status::InvalidArgument("--min-timeout is larger than --max-timeout");
  if (p.default_timeout < p.min_timeout || p.default_timeout > p.max_timeout) {
    return Status::InvalidArgument(
        "--default-timeout must lie between --min-timeout and --max-timeout");
  }
  if (p.min_probe_period > p.max_probe_period) {
    return Status::InvalidArgument("--min-probe-period is larger than --max-probe-period");
  }
  if (p.default_probe_period < p.min_probe_period || p.default_probe_period > p.max_probe_period) {
    return Status::InvalidArgument(
        "--default-probe-period must lie between --min-probe-period and --max-probe-period");
  }
  return Status::Ok();
}

}  // namespace aw::admission
