#include "admission/io/server.h"

#include <fmt/format.h>

namespace aw::admission {
namespace {

server::HttpResponse FromAnswer(HttpAnswer answer) {
  return server::HttpResponse{
      answer.status, std::move(answer.content_type), std::move(answer.body), {}};
}

}  // namespace

AdmissionServer::AdmissionServer(server::ConnectionOptions options,
                                 const server::KeyPairSource& source, AdmissionPipeline& pipeline,
                                 AdmissionMetrics& metrics, prometheus::Registry& registry)
    : source_(source), pipeline_(pipeline), metrics_(metrics) {
  options.name = "admission";
  options.on_error = [this](int status) { metrics_.HttpError(status); };
  server_ = std::make_unique<server::ConnectionServer>(
      std::move(options), [this](const server::HttpRequest& req) { return Route(req); }, &source_,
      registry);
}

AdmissionServer::~AdmissionServer() = default;

server::HttpResponse AdmissionServer::Route(const server::HttpRequest& req) {
  if (std::optional<admission::Route> route = admission::RouteFromPath(req.path)) {
    if (req.method != "POST") {
      metrics_.HttpError(405);
      server::HttpResponse res = FromAnswer(AdmissionPipeline::Text(
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
    return server::HttpResponse{200, "text/plain; charset=utf-8", "ok\n", {}};
  }
  metrics_.HttpError(404);
  std::string routes;
  for (admission::Route r : admission::AllRoutes()) {
    routes += (routes.empty() ? "" : ", ") + std::string(admission::RoutePath(r));
  }
  return FromAnswer(AdmissionPipeline::Text(404, "not found: admission routes are " + routes));
}

void AdmissionServer::AddRoute(std::string prefix, server::HttpHandler handler) {
  extra_routes_.emplace_back(std::move(prefix), std::move(handler));
}

Status AdmissionServer::Start() { return server_->Start(); }

void AdmissionServer::BeginDrain() { server_->BeginDrain(); }
void AdmissionServer::Stop() { server_->Stop(); }

bool AdmissionServer::WaitStopped(std::chrono::milliseconds timeout) {
  return server_->WaitStopped(timeout);
}

bool AdmissionServer::Serving() const { return server_->Serving() && source_.Current() != nullptr; }

}  // namespace aw::admission
