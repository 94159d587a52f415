// HealthServer: the plain-HTTP port for probes and scraping.
//
// Promise:
//   GET /healthz  200 "ok" while the process serves HTTP at all (liveness);
//   GET /readyz   200 when every registered readiness check passes, else 503 listing the failing
//                 checks (`?verbose` lists all of them either way);
//   GET /metrics  the shared Prometheus registry in text exposition format 0.0.4.
// Checks are registered before Start() and must be cheap and thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <prometheus/registry.h>

namespace httplib {
class Server;
}

namespace aw::server {

template <typename Base>
class WithListener;

class HealthServer {
 public:
  // Returns nullopt when ready, or why not.
  using Check = std::function<std::optional<std::string>()>;

  HealthServer(std::string bind_address, int port, prometheus::Registry& registry);
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  void AddReadinessCheck(std::string name, Check check);
  std::optional<std::string> Start();
  void Stop();

  // The /readyz logic, for tests: (ready, body).
  std::pair<bool, std::string> Readiness(bool verbose) const;

 private:
  const std::string bind_address_;
  const int port_;
  prometheus::Registry& registry_;
  std::vector<std::pair<std::string, Check>> checks_;
  std::unique_ptr<WithListener<httplib::Server>> http_;
  std::thread thread_;
};

}  // namespace aw::server
