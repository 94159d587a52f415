#include "kube/transport.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <thread>
#include <utility>
#include <vector>

#include "net/https_client.h"

namespace aw::kube {

struct Transport::FallbackIo {
  boost::asio::io_context io{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  std::thread thread;
  ~FallbackIo() {
    work.reset();
    io.stop();
    if (thread.joinable()) thread.join();
  }
};

// The helper threads of the default StreamAsync (test-only path), joined by ~Transport.
struct Transport::StreamHelpers {
  std::vector<std::thread> threads;
  ~StreamHelpers() {
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
  }
};

Transport::~Transport() { StopFallbackIo(); }

void Transport::StopFallbackIo() {
  std::shared_ptr<StreamHelpers> helpers;
  std::shared_ptr<FallbackIo> io;
  {
    MutexLock lk(fallback_mu_);
    helpers = std::move(helpers_);
    io = std::move(fallback_io_);
  }
  helpers.reset();  // joins the helper threads while the fallback executor still runs
  io.reset();       // then stops and joins the fallback executor's thread
}

namespace {
// Hands one chunk's resume() answer from the executor to the waiting helper thread; a resume that
// is dropped without being called (the executor stopped) counts as resume(false).
class ResumeGate {
 public:
  ~ResumeGate() { Set(false); }
  void Set(bool more) {
    MutexLock lk(mu_);
    if (set_) return;
    set_ = true;
    promise_.set_value(more);
  }
  std::future<bool> Future() { return promise_.get_future(); }

 private:
  Mutex mu_;
  bool set_ GUARDED_BY(mu_) = false;
  std::promise<bool> promise_;
};
}  // namespace

void Transport::StreamAsync(const HttpRequest& req, OnChunk on_chunk, Done done) {
  boost::asio::any_io_executor ex = executor();
  std::thread helper(
      [this, req, ex, on_chunk = std::move(on_chunk), done = std::move(done)]() mutable {
        Result<HttpResponse> res = Stream(req, [&](std::string_view data) {
          auto gate = std::make_shared<ResumeGate>();
          std::future<bool> more = gate->Future();
          boost::asio::post(ex, [gate, data = std::string(data), &on_chunk]() mutable {
            on_chunk(data, [gate](bool m) { gate->Set(m); });
          });
          gate.reset();
          return more.get();
        });
        boost::asio::post(
            ex, [done = std::move(done), res = std::move(res)]() mutable { done(std::move(res)); });
      });
  MutexLock lk(fallback_mu_);
  if (!helpers_) helpers_ = std::make_shared<StreamHelpers>();
  helpers_->threads.push_back(std::move(helper));
}

boost::asio::any_io_executor Transport::executor() {
  MutexLock lk(fallback_mu_);
  if (!fallback_io_) {
    fallback_io_ = std::make_shared<FallbackIo>();
    fallback_io_->thread = std::thread([io = &fallback_io_->io] { io->run(); });
  }
  return fallback_io_->io.get_executor();
}

void Cancellation::Cancel() {
  std::shared_ptr<net::Call> call;
  {
    MutexLock lk(mu_);
    cancelled_ = true;
    call = call_;
  }
  if (call) call->Cancel();  // sticky: a call not yet started fails as soon as it starts
}

bool Cancellation::cancelled() const {
  MutexLock lk(mu_);
  return cancelled_;
}

void Cancellation::Reset() {
  MutexLock lk(mu_);
  cancelled_ = false;
}

namespace {

net::ClientOptions Options(const ClientConfig& c) {
  net::ClientOptions o;
  o.host = c.host;
  o.port = c.port;
  o.base_path = c.base_path;
  o.ca_pem = c.ca_pem;
  o.client_cert_pem = c.client_cert_pem;
  o.client_key_pem = c.client_key_pem;
  o.token = c.token;
  o.token_file = c.token_file;
  o.insecure_skip_tls_verify = c.insecure_skip_tls_verify;
  o.tls_server_name = c.tls_server_name;
  o.plain_http = c.plain_http;
  o.log_name = "kube";
  return o;
}

net::Request ToNet(const HttpRequest& r) {
  net::Request n;
  n.method = r.method;
  n.path = r.path;
  n.body = r.body;
  n.content_type = r.content_type;
  n.timeout = r.timeout;
  n.resend_on_closed_connection = r.resend_on_closed_connection;
  return n;
}

Result<HttpResponse> FromNet(StatusOr<net::Response> r) {
  if (!r.ok()) {
    return TransportError(r.status().message(), r.status().code() == Status::Code::kCancelled);
  }
  HttpResponse h;
  h.status = r->status;
  h.body = std::move(r->body);
  h.retry_after = std::move(r->retry_after);
  return h;
}

}  // namespace

class HttpsTransport final : public Transport {
 public:
  explicit HttpsTransport(std::unique_ptr<net::BlockingClient> client)
      : client_(std::move(client)) {}

  Result<HttpResponse> Do(const HttpRequest& req) override { return Run(req, nullptr); }
  Result<HttpResponse> Stream(const HttpRequest& req,
                              const std::function<bool(std::string_view)>& on_data) override {
    return Run(req, &on_data);
  }
  void DoAsync(const HttpRequest& req, Done done) override {
    if (req.cancel && req.cancel->cancelled()) {
      boost::asio::post(client_->executor(),
                        [done = std::move(done)] { done(TransportError("call cancelled", true)); });
      return;
    }
    Register(req.cancel,
             client_->async().Do(ToNet(req), [done = std::move(done)](StatusOr<net::Response> r) {
               done(FromNet(std::move(r)));
             }));
  }
  void StreamAsync(const HttpRequest& req, OnChunk on_chunk, Done done) override {
    if (req.cancel && req.cancel->cancelled()) {
      boost::asio::post(client_->executor(),
                        [done = std::move(done)] { done(TransportError("call cancelled", true)); });
      return;
    }
    Register(req.cancel, client_->async().Stream(
                             ToNet(req),
                             [on_chunk = std::move(on_chunk)](std::string_view data,
                                                              net::HttpsClient::Resume resume) {
                               on_chunk(data, std::move(resume));
                             },
                             [done = std::move(done)](StatusOr<net::Response> r) {
                               done(FromNet(std::move(r)));
                             }));
  }
  boost::asio::any_io_executor executor() override { return client_->executor(); }
  void Shutdown() override { client_->Shutdown(); }
  bool IsShutdown() const override { return client_->IsShutdown(); }
  TransportCounters counters() const override {
    net::Counters n = client_->counters();
    TransportCounters c;
    c.connections_opened = n.connections_opened;
    c.connections_reused = n.connections_reused;
    c.stale_discarded = n.stale_discarded;
    c.expired_discarded = n.expired_discarded;
    c.stale_retries = n.stale_retries;
    return c;
  }

 private:
  Result<HttpResponse> Run(const HttpRequest& req,
                           const std::function<bool(std::string_view)>* on_data) {
    Cancellation* cancel = req.cancel;
    if (cancel && cancel->cancelled()) return TransportError("call cancelled", true);
    // Registers the call with the caller's Cancellation before waiting; a Cancel() that came in
    // between is applied at once.
    auto on_start = [cancel](const std::shared_ptr<net::Call>& call) {
      if (!cancel) return;
      bool cancelled;
      {
        MutexLock lk(cancel->mu_);
        cancel->call_ = call;
        cancelled = cancel->cancelled_;
      }
      if (cancelled) call->Cancel();
    };
    StatusOr<net::Response> r = on_data ? client_->Stream(ToNet(req), *on_data, on_start)
                                        : client_->Do(ToNet(req), on_start);
    if (cancel) {
      MutexLock lk(cancel->mu_);
      cancel->call_ = nullptr;
    }
    return FromNet(std::move(r));
  }

  // Lets `cancel` (optional) cancel the asynchronous `call`; a Cancel() that came before is
  // applied at once. The call stays registered until the next one (cancelling an ended call is a
  // no-op).
  static void Register(Cancellation* cancel, const std::shared_ptr<net::Call>& call) {
    if (!cancel || !call) return;
    bool cancelled;
    {
      MutexLock lk(cancel->mu_);
      cancel->call_ = call;
      cancelled = cancel->cancelled_;
    }
    if (cancelled) call->Cancel();
  }

  std::unique_ptr<net::BlockingClient> client_;
};

StatusOr<std::unique_ptr<Transport>> NewHttpsTransport(const ClientConfig& config) {
  auto c = net::BlockingClient::Create(Options(config));
  if (!c.ok()) return c.status();
  return std::unique_ptr<Transport>(std::make_unique<HttpsTransport>(std::move(c).value()));
}

}  // namespace aw::kube
