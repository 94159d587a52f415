#include "kube/transport.h"

#include <boost/asio/post.hpp>
#include <utility>

#include "net/https_client.h"

namespace aw::kube {

Transport::~Transport() = default;

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
  explicit HttpsTransport(std::unique_ptr<net::IoThreadClient> client)
      : client_(std::move(client)) {}

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

  std::unique_ptr<net::IoThreadClient> client_;
};

StatusOr<std::unique_ptr<Transport>> NewHttpsTransport(const ClientConfig& config) {
  auto c = net::IoThreadClient::Create(Options(config));
  if (!c.ok()) return c.status();
  return std::unique_ptr<Transport>(std::make_unique<HttpsTransport>(std::move(c).value()));
}

}  // namespace aw::kube
