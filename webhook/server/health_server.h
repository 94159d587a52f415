// HealthServer: the plain-HTTP port for probes and scraping.
//
// Promise:
//   GET /healthz  200 when every registered liveness check passes, else 500 listing the failing
//                 checks (liveness: the kubelet restarts the container; `?verbose` lists all);
//   GET /readyz   200 when every registered readiness check passes, else 503 listing the failing
//                 checks (`?verbose` lists all of them either way);
//   GET /metrics  the shared Prometheus registry in text exposition format 0.0.4;
//   another method on those paths -> 405 (`Allow: GET`); another path -> 404.
// Served by its own ConnectionServer (connection_server.h) on the process's dispatcher
// (runtime/dispatcher.h; without one, on an io thread of its own) with its own small connection
// cap and deadlines (HealthOptions), never on the admission io threads, so a flood on the
// admission port never delays a probe and a flood here never delays admission. Stop() closes
// every connection and waits (at most 1 s) until none is left; it must not be called on the
// dispatcher's thread. Checks are registered before Start() and must be cheap and thread-safe.
#pragma once

#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/connection_server.h"
#include "util/status.h"

namespace aw::server {

struct HealthOptions {
  size_t max_connections = 64;
  std::chrono::nanoseconds read_timeout = std::chrono::seconds(5);
  std::chrono::nanoseconds write_timeout = std::chrono::seconds(5);
  std::chrono::nanoseconds idle_timeout = std::chrono::seconds(30);
};

class HealthServer {
 public:
  // Returns nullopt when ready, or why not.
  using Check = std::function<std::optional<std::string>()>;

  // `executor`: the process's dispatcher (runtime::Dispatcher::executor()), which must outlive
  // this server; empty: an io thread of its own.
  HealthServer(std::string bind_address, int port, prometheus::Registry& registry,
               HealthOptions options = {}, boost::asio::any_io_executor executor = {});
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  void AddReadinessCheck(std::string name, Check check);
  // A check /healthz runs: failing it means the process is wedged and must be restarted (e.g. the
  // resolver loop stopped making progress while this replica leads).
  void AddLivenessCheck(std::string name, Check check);
  // Metric families computed at each scrape (for values kept outside the registry, e.g. the
  // Kubernetes client's connection counters), served after the registry's. Register before
  // Start(); must be cheap and thread-safe.
  using Collector = std::function<std::vector<prometheus::MetricFamily>()>;
  void AddCollector(Collector collector);
  // Binds the port and starts serving; an IOError saying what failed when the bind fails.
  Status Start();
  void Stop();
  // The executor it runs on (ConnectionServer::executor(): the dispatcher's, or its own io
  // thread's): the certificate pollers' timers run there, since every binary has a health server,
  // Kubernetes config or not.
  boost::asio::any_io_executor executor() const;

  // The /readyz logic, for tests: (ready, body).
  std::pair<bool, std::string> Readiness(bool verbose) const;
  // The /healthz logic, for tests: (alive, body).
  std::pair<bool, std::string> Liveness(bool verbose) const;

 private:
  HttpResponse Route(const HttpRequest& req) const;

  prometheus::Registry& registry_;
  std::vector<std::pair<std::string, Check>> checks_;
  std::vector<std::pair<std::string, Check>> liveness_checks_;
  std::vector<Collector> collectors_;
  std::unique_ptr<ConnectionServer> server_;
};

// True when the query string has the parameter `name` (with or without a value).
bool HasQueryParam(std::string_view query, std::string_view name);

}  // namespace aw::server
