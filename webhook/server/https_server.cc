#include "server/https_server.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <httplib.h>

#include <fmt/format.h>

#include "server/listener.h"
#include "server/tls_connection.h"
#include "util/log.h"

namespace aw::server {
namespace {

// After a body larger than the limit, at most this much more is read and discarded so that the
// 413 can be delivered on a healthy connection; beyond it the connection is closed.
constexpr size_t kMaxDrainBytes = 64 * 1024 * 1024;

// Runs each task at once on the caller's thread (httplib's accept loop).
class InlineTaskQueue final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

std::pair<time_t, time_t> SecUsec(std::chrono::nanoseconds d) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  return {static_cast<time_t>(us / 1'000'000), static_cast<time_t>(us % 1'000'000)};
}

void Answer(httplib::Response& res, const HttpAnswer& answer) {
  res.status = answer.status;
  res.set_content(answer.body, answer.content_type.c_str());
}

// Makes httplib end the connection after this response: its keep-alive loop sees end-of-stream.
void CloseAfterResponse(const httplib::Request& req) {
  if (req.ssl != nullptr) {
    int fd = SSL_get_fd(req.ssl);
    if (fd >= 0) ::shutdown(fd, SHUT_RD);
  }
}

std::string StatusMessage(int status) {
  switch (status) {
    case 400: return "bad request";
    case 404: return "not found: admission routes are /mutate/gameservers, /validate/gameservers, "
                     "/validate/fleets, /validate/gameserversets, /validate/gameserverallocations";
    case 405: return "method not allowed";
    case 413: return "request body too large";
    case 414: return "request URI too long";
    case 416: return "range not satisfiable";
    default: return fmt::format("HTTP {}", status);
  }
}

}  // namespace

AdmissionServer::AdmissionServer(ServerOptions options, const KeyPairSource& source,
                                 AdmissionPipeline& pipeline, AdmissionMetrics& metrics)
    : options_(std::move(options)), source_(source), pipeline_(pipeline), metrics_(metrics) {}

AdmissionServer::~AdmissionServer() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

void AdmissionServer::RegisterRoutes() {
  httplib::SSLServer& svr = *http_;
  for (admission::Route route : admission::AllRoutes()) {
    std::string path;
    switch (route) {
      case admission::Route::kMutateGameServers: path = "/mutate/gameservers"; break;
      case admission::Route::kValidateGameServers: path = "/validate/gameservers"; break;
      case admission::Route::kValidateFleets: path = "/validate/fleets"; break;
      case admission::Route::kValidateGameServerSets: path = "/validate/gameserversets"; break;
      case admission::Route::kValidateGameServerAllocations:
        path = "/validate/gameserverallocations";
        break;
    }
    if (admission::RouteFromPath(path) != route) {
      throw std::logic_error("route table disagrees with admission::RouteFromPath: " + path);
    }
    svr.Post(path, [this, route](const httplib::Request& req, httplib::Response& res,
                                 const httplib::ContentReader& reader) {
      const size_t limit = pipeline_.max_body_bytes();
      std::string body;
      bool too_large = false;
      size_t drained = 0;
      bool complete = reader([&](const char* data, size_t len) {
        if (too_large) {
          drained += len;
          return drained <= kMaxDrainBytes;
        }
        if (body.size() + len > limit) {
          too_large = true;
          std::string().swap(body);
          return true;
        }
        body.append(data, len);
        return true;
      });
      if (!complete) {
        // httplib refuses a Content-Length over the limit itself (and skips that body); anything
        // else is a broken or endless stream.
        if (res.status == 413) {
          too_large = true;
        } else {
          CloseAfterResponse(req);
          if (!too_large) {
            metrics_.HttpError(400);
            Answer(res, AdmissionPipeline::Text(400, "incomplete request body"));
            return;
          }
        }
      }
      Answer(res, pipeline_.Serve(route, req.get_header_value("Content-Type"), body, too_large));
    });
    auto not_allowed = [this](const httplib::Request& req, httplib::Response& res) {
      metrics_.HttpError(405);
      res.set_header("Allow", "POST");
      Answer(res, AdmissionPipeline::Text(
                      405, fmt::format("method {} not allowed on {}: admission requests are POST",
                                       req.method, req.path)));
    };
    svr.Get(path, not_allowed);
    svr.Put(path, not_allowed);
    svr.Patch(path, not_allowed);
    svr.Delete(path, not_allowed);
    svr.Options(path, not_allowed);
  }
  svr.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain; charset=utf-8");
  });

  svr.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    metrics_.HttpError(res.status);
    Answer(res, AdmissionPipeline::Text(res.status, StatusMessage(res.status)));
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler(
      [this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        metrics_.HttpError(500);
        log::error("internal error serving request", {{"path", req.path}, {"error", what}});
        Answer(res, AdmissionPipeline::Text(500, "internal error: " + what));
      });
}

std::optional<std::string> AdmissionServer::Start() {
  const ServerOptions& o = options_;
  ConnectionOptions conn;
  conn.read_timeout = std::chrono::duration_cast<std::chrono::microseconds>(o.read_timeout);
  conn.write_timeout = std::chrono::duration_cast<std::chrono::microseconds>(o.write_timeout);
  conn.keep_alive_timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(o.keep_alive_timeout);
  conn.keep_alive_max_requests = o.keep_alive_max_requests;
  conn.max_connections = std::max<size_t>(1, o.max_connections);
  http_ = std::make_unique<TlsConnectionServer>(
      conn, [this](SSL_CTX& ctx) { return ConfigureServerContext(&ctx, &source_); });
  if (!http_->is_valid()) return std::string("TLS context setup failed");

  // httplib takes ownership of the raw pointer returned here (it wraps it in a unique_ptr).
  // Accepted sockets are handed to TlsConnectionServer on the accept thread itself: that step
  // never blocks (the handshake runs on its workers) except at the connection limit, where the
  // accept loop waiting is the intended back-pressure.
  http_->new_task_queue = []() -> httplib::TaskQueue* { return new InlineTaskQueue(); };
  http_->set_tcp_nodelay(true);
  http_->set_keep_alive_max_count(o.keep_alive_max_requests);
  http_->set_keep_alive_timeout(static_cast<time_t>(
      std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::seconds>(o.keep_alive_timeout).count())));
  auto [rs, rus] = SecUsec(o.read_timeout);
  http_->set_read_timeout(rs, rus);
  auto [ws, wus] = SecUsec(o.write_timeout);
  http_->set_write_timeout(ws, wus);
  http_->set_payload_max_length(o.max_body_bytes);
  RegisterRoutes();

  if (!http_->bind_to_port(o.bind_address, o.port)) {
    return fmt::format("cannot listen on {}:{} (address in use or not available)", o.bind_address,
                       o.port);
  }
  if (!http_->RaiseBacklog()) {
    log::warn("cannot raise the listen backlog; bursts of new connections may stall",
              {{"error", std::strerror(errno)}});
  }
  thread_ = std::thread([this] {
    if (!http_->listen_after_bind()) log::error("HTTPS listener stopped with an error");
    // Idle connections close at once, requests in progress finish.
    http_->Shutdown();
    http_->Join();
    done_.store(true);
  });
  log::info("admission server listening",
            {{"address", fmt::format("{}:{}", o.bind_address, o.port)},
             {"max_connections", std::to_string(o.max_connections)}});
  return std::nullopt;
}

void AdmissionServer::Stop() {
  if (!http_) return;
  http_->Shutdown();
  http_->stop();
}

bool AdmissionServer::WaitStopped(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done_.load()) {
    if (!thread_.joinable()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (thread_.joinable()) thread_.join();
  return true;
}

bool AdmissionServer::Serving() const {
  return http_ != nullptr && http_->is_running() && http_->listener_fd() >= 0 && !done_.load() &&
         source_.Current() != nullptr;
}

}  // namespace aw::server
