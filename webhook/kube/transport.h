// HTTPS transport to the API server.
//
// Promise: every request is sent over TLS with the server certificate verified against the
// configured CA (unless the config explicitly allows insecure), with the client certificate and/or
// a bearer token; the token file is re-read when it changes (checked at most once a second, and
// immediately after a 401). Every call has a connect timeout and a per-read timeout. Shutdown()
// makes in-flight calls (including long watch streams) return promptly with a cancelled error and
// future calls fail fast. Thread-safe: any number of threads may call Do()/Stream() concurrently
// (idle keep-alive connections are pooled). Creating one sets SIGPIPE to ignored when it is still
// at its default (a write to a connection the server closed must not kill the process).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "kube/config.h"
#include "kube/status.h"

namespace aw::kube {

// Cancels one in-flight call from another thread (e.g. an informer's watch on Stop()). Once
// cancelled, calls using it fail fast with a cancelled error. Reset() re-arms it.
class Cancellation {
 public:
  void Cancel();
  bool cancelled() const;
  void Reset();

 private:
  friend class HttpsTransport;
  mutable std::mutex mu_;
  bool cancelled_ = false;
  std::function<void()> stopper_;  // set while a call is in flight
};

struct HttpRequest {
  std::string method = "GET";    // GET, POST, PUT, PATCH, DELETE
  std::string path;              // absolute path incl. already-encoded query, without base_path
  std::string body;
  std::string content_type;      // for bodies
  std::chrono::milliseconds timeout{30000};  // per socket read/write; connect is min(this, 10s)
  Cancellation* cancel = nullptr;            // optional, not owned
};

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string retry_after;  // raw Retry-After header, "" if absent
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Complete request/response. Any HTTP status is a successful Result; only transport failures
  // (connect, TLS, timeout, cancelled) are errors.
  virtual Result<HttpResponse> Do(const HttpRequest& req) = 0;
  // Streaming request. When the status is 2xx, `on_data` receives body bytes as they arrive
  // (return false to stop early: that is a successful Result); otherwise the body is collected
  // (bounded) into the returned HttpResponse and `on_data` is not called.
  virtual Result<HttpResponse> Stream(const HttpRequest& req,
                                      const std::function<bool(std::string_view)>& on_data) = 0;
  // Cancels in-flight calls and makes future ones fail fast. Idempotent.
  virtual void Shutdown() = 0;
  virtual bool IsShutdown() const = 0;
};

// Returns nullptr and sets *err when the TLS material in `config` cannot be loaded.
std::unique_ptr<Transport> NewHttpsTransport(const ClientConfig& config, std::string* err);

}  // namespace aw::kube
