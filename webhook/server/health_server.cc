#include "server/health_server.h"

#include <fmt/format.h>
#include <prometheus/text_serializer.h>

#include <sstream>

namespace aw::server {
namespace {

constexpr const char* kText = "text/plain; charset=utf-8";

}  // namespace

bool HasQueryParam(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    if (item.substr(0, item.find('=')) == name) return true;
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return false;
}

HealthServer::HealthServer(std::string bind_address, int port, prometheus::Registry& registry,
                           HealthOptions options, boost::asio::any_io_executor executor)
    : registry_(registry) {
  ConnectionOptions c;
  c.name = "health";
  c.bind_address = std::move(bind_address);
  c.port = port;
  c.backlog = 128;
  c.io_threads = 1;
  c.executor = std::move(executor);
  c.max_connections = options.max_connections;
  c.limits.max_request_line_bytes = 4 * 1024;
  c.limits.max_header_bytes = 16 * 1024;
  c.limits.max_header_count = 64;
  c.limits.max_body_bytes = 64 * 1024;
  c.limits.max_discard_bytes = 1024 * 1024;
  c.read_timeout = options.read_timeout;
  c.write_timeout = options.write_timeout;
  c.idle_timeout = options.idle_timeout;
  c.linger_timeout = std::chrono::milliseconds(500);
  server_ = std::make_unique<ConnectionServer>(
      std::move(c), [this](const HttpRequest& req) { return Route(req); }, nullptr, registry);
}

HealthServer::~HealthServer() = default;

void HealthServer::AddReadinessCheck(std::string name, Check check) {
  checks_.emplace_back(std::move(name), std::move(check));
}

void HealthServer::AddLivenessCheck(std::string name, Check check) {
  liveness_checks_.emplace_back(std::move(name), std::move(check));
}

namespace {

// Runs `checks`: (all passed, "[-] name failed: why" lines, then `ok_word` or `failed_word`).
std::pair<bool, std::string> RunChecks(
    const std::vector<std::pair<std::string, HealthServer::Check>>& checks, bool verbose,
    std::string_view ok_word, std::string_view failed_word) {
  bool ready = true;
  std::string body;
  for (const auto& [name, check] : checks) {
    std::optional<std::string> problem;
    try {
      problem = check();
    } catch (const std::exception& e) {
      problem = std::string("check failed: ") + e.what();
    }
    if (problem) {
      ready = false;
      body += fmt::format("[-] {} failed: {}\n", name, *problem);
    } else if (verbose) {
      body += fmt::format("[+] {} ok\n", name);
    }
  }
  body += fmt::format("{}\n", ready ? ok_word : failed_word);
  return {ready, body};
}

}  // namespace

std::pair<bool, std::string> HealthServer::Readiness(bool verbose) const {
  return RunChecks(checks_, verbose, "ok", "not ready");
}

std::pair<bool, std::string> HealthServer::Liveness(bool verbose) const {
  return RunChecks(liveness_checks_, verbose, "ok", "not alive");
}

HttpResponse HealthServer::Route(const HttpRequest& req) const {
  const bool known = req.path == "/healthz" || req.path == "/readyz" || req.path == "/metrics";
  if (!known) return HttpResponse{404, kText, "not found: try /healthz, /readyz or /metrics\n", {}};
  if (req.method != "GET") {
    HttpResponse res{405, kText, fmt::format("method {} not allowed: use GET\n", req.method), {}};
    res.headers.emplace_back("Allow", "GET");
    return res;
  }
  if (req.body_too_large) return HttpResponse{413, kText, "request body too large\n", {}};
  if (req.path == "/healthz") {
    auto [alive, body] = Liveness(HasQueryParam(req.query, "verbose"));
    return HttpResponse{alive ? 200 : 500, kText, std::move(body), {}};
  }
  if (req.path == "/readyz") {
    auto [ready, body] = Readiness(HasQueryParam(req.query, "verbose"));
    return HttpResponse{ready ? 200 : 503, kText, std::move(body), {}};
  }
  std::ostringstream out;
  std::vector<prometheus::MetricFamily> families = registry_.Collect();
  for (const auto& c : collectors_) {
    for (auto& f : c()) families.push_back(std::move(f));
  }
  prometheus::TextSerializer().Serialize(out, families);
  return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", out.str(), {}};
}

void HealthServer::AddCollector(Collector collector) {
  collectors_.push_back(std::move(collector));
}

Status HealthServer::Start() { return server_->Start(); }

boost::asio::any_io_executor HealthServer::executor() const { return server_->executor(); }

void HealthServer::Stop() {
  server_->Stop();
  server_->WaitStopped(std::chrono::seconds(1));
}

}  // namespace aw::server
