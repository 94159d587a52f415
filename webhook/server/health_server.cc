#include "server/health_server.h"

#include <sstream>

#include <httplib.h>
#include <prometheus/text_serializer.h>

#include <fmt/format.h>

#include "server/listener.h"
#include "util/log.h"

namespace aw::server {

HealthServer::HealthServer(std::string bind_address, int port, prometheus::Registry& registry)
    : bind_address_(std::move(bind_address)), port_(port), registry_(registry) {}

HealthServer::~HealthServer() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

void HealthServer::AddReadinessCheck(std::string name, Check check) {
  checks_.emplace_back(std::move(name), std::move(check));
}

std::pair<bool, std::string> HealthServer::Readiness(bool verbose) const {
  bool ready = true;
  std::string body;
  for (const auto& [name, check] : checks_) {
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
  body += ready ? "ok\n" : "not ready\n";
  return {ready, body};
}

std::optional<std::string> HealthServer::Start() {
  http_ = std::make_unique<WithListener<httplib::Server>>();
  httplib::Server& svr = *http_;
  svr.set_tcp_nodelay(true);
  svr.set_read_timeout(5, 0);
  svr.set_write_timeout(5, 0);
  svr.set_keep_alive_timeout(5);
  svr.set_payload_max_length(64 * 1024);
  svr.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain; charset=utf-8");
  });
  svr.Get("/readyz", [this](const httplib::Request& req, httplib::Response& res) {
    auto [ready, body] = Readiness(req.has_param("verbose"));
    res.status = ready ? 200 : 503;
    res.set_content(body, "text/plain; charset=utf-8");
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, registry_.Collect());
    res.set_content(out.str(), "text/plain; version=0.0.4; charset=utf-8");
  });
  svr.set_error_handler(httplib::Server::Handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) {
      res.set_content(res.status == 404 ? "not found: try /healthz, /readyz or /metrics\n"
                                        : fmt::format("HTTP {}\n", res.status),
                      "text/plain; charset=utf-8");
    }
  }));
  if (!svr.bind_to_port(bind_address_, port_)) {
    return fmt::format("cannot listen on {}:{} (address in use or not available)", bind_address_,
                       port_);
  }
  static_cast<WithListener<httplib::Server>&>(svr).RaiseBacklog(128);
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  log::info("health server listening", {{"address", fmt::format("{}:{}", bind_address_, port_)}});
  return std::nullopt;
}

void HealthServer::Stop() {
  if (http_) http_->stop();
}

}  // namespace aw::server
