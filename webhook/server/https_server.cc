#include "server/https_server.h"

#include <fmt/format.h>

namespace aw::server {
namespace {

HttpResponse FromAnswer(HttpAnswer answer) {
  return HttpResponse{answer.status, std::move(answer.content_type), std::move(answer.body), {}};
}

}  // namespace

AdmissionServer::AdmissionServer(ServerOptions options, const KeyPairSource& source,
                                 AdmissionPipeline& pipeline, AdmissionMetrics& metrics,
                                 prometheus::Registry& registry)
    : options_(std::move(options)), source_(source), pipeline_(pipeline), metrics_(metrics) {
  ConnectionOptions c;
  c.name = "admission";
  c.bind_address = options_.bind_address;
  c.port = options_.port;
  c.io_threads = options_.io_threads;
  c.max_connections = options_.max_connections;
  c.limits.max_request_line_bytes = options_.max_request_line_bytes;
  c.limits.max_header_bytes = options_.max_header_bytes;
  c.limits.max_header_count = options_.max_header_count;
  c.limits.max_body_bytes = options_.max_body_bytes;
  c.handshake_timeout = options_.handshake_timeout;
  c.read_timeout = options_.read_timeout;
  c.write_timeout = options_.write_timeout;
  c.idle_timeout = options_.keep_alive_timeout;
  c.keep_alive_max_requests = options_.keep_alive_max_requests;
  c.on_error = [this](int status) { metrics_.HttpError(status); };
  server_ = std::make_unique<ConnectionServer>(
      std::move(c), [this](const HttpRequest& req) { return Route(req); }, &source_, registry);
}

AdmissionServer::~AdmissionServer() = default;

HttpResponse AdmissionServer::Route(const HttpRequest& req) {
  if (std::optional<admission::Route> route = admission::RouteFromPath(req.path)) {
    if (req.method != "POST") {
      metrics_.HttpError(405);
      HttpResponse res = FromAnswer(AdmissionPipeline::Text(
          405, fmt::format("method {} not allowed on {}: admission requests are POST", req.method,
                           req.path)));
      res.headers.emplace_back("Allow", "POST");
      return res;
    }
    return FromAnswer(pipeline_.Serve(*route, req.content_type, req.body, req.body_too_large));
  }
  for (const auto& [prefix, handler] : extra_routes_) {
    if (req.path.starts_with(prefix)) return handler(req);
  }
  if (req.path == "/healthz" && req.method == "GET") {
    return HttpResponse{200, "text/plain; charset=utf-8", "ok\n", {}};
  }
  metrics_.HttpError(404);
  std::string routes;
  for (admission::Route r : admission::AllRoutes()) {
    routes += (routes.empty() ? "" : ", ") + std::string(admission::RoutePath(r));
  }
  return FromAnswer(AdmissionPipeline::Text(404, "not found: admission routes are " + routes));
}

void AdmissionServer::AddRoute(std::string prefix, HttpHandler handler) {
  extra_routes_.emplace_back(std::move(prefix), std::move(handler));
}

Status AdmissionServer::Start() { return server_->Start(); }

void AdmissionServer::Stop() { server_->Stop(); }

bool AdmissionServer::WaitStopped(std::chrono::milliseconds timeout) {
  return server_->WaitStopped(timeout);
}

bool AdmissionServer::Serving() const { return server_->Serving() && source_.Current() != nullptr; }

}  // namespace aw::server
