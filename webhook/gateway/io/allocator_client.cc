#include "gateway/io/allocator_client.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "util/url.h"

namespace aw::gateway {
namespace {

Status ReadFile(const std::string& path, std::string_view flag, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(fmt::format("--{}: cannot open {}", flag, path));
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return Status::Ok();
}

}  // namespace

AllocatorClient::AllocatorClient(AllocatorOptions options) : options_(std::move(options)) {}

AllocatorClient::~AllocatorClient() { Stop(); }

Status AllocatorClient::Init(boost::asio::any_io_executor executor) {
  net::ClientOptions cfg;
  StatusOr<util::HttpUrl> url = util::ParseHttpUrl(options_.address);
  if (!url.ok()) {
    return Status::InvalidArgument(fmt::format(
        "--allocator-address: {:?}: {} (https://, or http:// for an allocator started with "
        "--disable-tls)",
        options_.address, url.status().message()));
  }
  plain_ = !url->https;
  cfg.host = std::move(url->host);
  cfg.port = url->port;
  base_path_ = std::move(url->base_path);
  cfg.base_path = base_path_;
  cfg.plain_http = plain_;
  cfg.tls_server_name = options_.server_name;
  if (plain_ && (!options_.ca_file.empty() || !options_.client_cert_file.empty() ||
                 !options_.server_name.empty())) {
    return Status::InvalidArgument(
        "--allocator-address is http:// (no TLS): --allocator-ca-file, "
        "--allocator-client-cert-file/--allocator-client-key-file and --allocator-server-name "
        "do not apply");
  }
  if (!options_.ca_file.empty()) {
    if (Status s = ReadFile(options_.ca_file, "allocator-ca-file", &cfg.ca_pem); !s.ok()) return s;
  }
  if (options_.client_cert_file.empty() != options_.client_key_file.empty()) {
    return Status::InvalidArgument(
        "--allocator-client-cert-file and --allocator-client-key-file go together");
  }
  if (!options_.client_cert_file.empty()) {
    if (Status s =
            ReadFile(options_.client_cert_file, "allocator-client-cert-file", &cfg.client_cert_pem);
        !s.ok()) {
      return s;
    }
    if (Status s =
            ReadFile(options_.client_key_file, "allocator-client-key-file", &cfg.client_key_pem);
        !s.ok()) {
      return s;
    }
  }
  cfg.log_name = "allocator";
  if (!executor) {
    auto own = net::BlockingClient::Create(std::move(cfg));
    if (!own.ok()) return own.status().Annotate("allocator client TLS");
    own_io_ = std::move(own).value();
    // Not owning: own_io_ owns the client and its thread.
    client_ = std::shared_ptr<net::HttpsClient>(std::shared_ptr<void>(), &own_io_->async());
    return Status::Ok();
  }
  auto client = net::HttpsClient::Create(std::move(executor), std::move(cfg));
  if (!client.ok()) return client.status().Annotate("allocator client TLS");
  client_ = std::move(client).value();
  return Status::Ok();
}

void AllocatorClient::Start() {
  {
    MutexLock lock(mu_);
    started_ = true;
  }
  Pump();
}

void AllocatorClient::Stop() {
  std::deque<Call> dropped;
  {
    MutexLock lock(mu_);
    if (stopping_ && queue_.empty() && in_flight_ == 0) return;
    stopping_ = true;
    dropped.swap(queue_);
  }
  for (auto& c : dropped) {
    c.done({Status::Unavailable("the gateway is shutting down"), 0, {}});
  }
  // Ends the calls in flight promptly (Cancelled, answered as Unavailable), then waits for their
  // `done` to have run: the owner may go away once Stop() returns.
  if (client_) client_->Shutdown();
  MutexLock lock(mu_);
  idle_cv_.Wait(mu_, [this]() REQUIRES(mu_) { return in_flight_ == 0; });
}

std::chrono::milliseconds AllocatorClient::AttemptTimeout(
    std::chrono::nanoseconds per_attempt, std::chrono::steady_clock::time_point deadline,
    std::chrono::steady_clock::time_point now) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
  const auto cap = std::chrono::duration_cast<std::chrono::milliseconds>(per_attempt);
  return std::min(left, std::max(std::chrono::milliseconds(1), cap));
}

void AllocatorClient::Allocate(std::string body, std::chrono::steady_clock::time_point deadline,
                               Done done) {
  bool queued = false;
  {
    MutexLock lock(mu_);
    if (!stopping_) {
      queue_.push_back(Call{std::move(body), deadline, std::move(done)});
      queued = true;
    }
  }
  if (!queued) {
    done({Status::Unavailable("the gateway is shutting down"), 0, {}});
    return;
  }
  Pump();
}

void AllocatorClient::Pump(bool holding) {
  const bool in_callback = holding;
  const size_t slots = std::max<size_t>(1, options_.workers);
  for (;;) {
    Call call;
    {
      MutexLock lock(mu_);
      if (!holding) {
        if (!started_ || stopping_ || queue_.empty() || in_flight_ >= slots) return;
        ++in_flight_;
        holding = true;
      }
      if (!started_ || stopping_ || queue_.empty()) {
        // The last touch of `this` on a callback's path: Stop() may return after it.
        if (--in_flight_ == 0) idle_cv_.SignalAll();
        return;
      }
      call = std::move(queue_.front());
      queue_.pop_front();
    }
    if (call.deadline <= std::chrono::steady_clock::now()) {
      call.done({Status::DeadlineExceeded(
                     "the request's deadline passed while it waited for an allocator call slot "
                     "(--allocator-workers calls in flight at most)"),
                 0,
                 {}});
      continue;  // the slot is still held: the next queued call
    }
    Send(std::move(call));  // the slot goes with the call
    if (in_callback) return;
    holding = false;
  }
}

void AllocatorClient::Send(Call call) {
  net::Request req;
  req.method = "POST";
  req.path = "/gameserverallocation";
  req.body = std::move(call.body);
  req.content_type = "application/json";
  req.timeout = AttemptTimeout(options_.timeout, call.deadline, std::chrono::steady_clock::now());
  req.resend_on_closed_connection = false;
  client_->Do(std::move(req), [this, done = std::move(call.done)](StatusOr<net::Response> res) {
    if (!res.ok()) {
      done({Status::Unavailable(res.status().message()), 0, {}});
    } else {
      done({Status::Ok(), res->status, std::move(res->body)});
    }
    Pump(/*holding=*/true);  // this call's slot: to the next queued call, or freed
  });
}

void RegisterAllocatorFlags(flags::FlagSet& fs, AllocatorOptions* o) {
  fs.String("allocator-address", &o->address,
            "agones-allocator's REST URL: https://, or http:// for an allocator started with "
            "--disable-tls");
  fs.String("allocator-server-name", &o->server_name,
            "name sent as TLS SNI and verified in agones-allocator's certificate (\"\" = the "
            "address's host); e.g. the name in Agones' generated allocator-tls certificate");
  fs.String("allocator-ca-file", &o->ca_file,
            "CA (PEM) of agones-allocator's serving certificate (\"\" = system roots)");
  fs.String("allocator-client-cert-file", &o->client_cert_file,
            "client certificate (PEM) presented to agones-allocator");
  fs.String("allocator-client-key-file", &o->client_key_file,
            "client key (PEM) for --allocator-client-cert-file");
  fs.Duration("allocator-timeout", &o->timeout,
              "timeout of one call to agones-allocator (connect, TLS handshake, each write and "
              "read), capped by what is left of the request's deadline when the call starts "
              "(time queued for a call slot counts against the deadline)",
              std::chrono::milliseconds(10));
  fs.Size("allocator-workers", &o->workers,
          "calls to agones-allocator in flight at most (asynchronous calls: no thread each; "
          "more wait in a queue, their time counted against their deadline)",
          1, 256);
}

Status ValidateAllocatorOptions(const AllocatorOptions& o) {
  if (o.address.empty()) return Status::InvalidArgument("--allocator-address is required");
  return Status::Ok();
}

}  // namespace aw::gateway
