#include "gateway/io/allocator_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <thread>

#include "runtime/io_thread.h"
#include "util/io/file.h"
#include "util/io/mutex.h"
#include "util/url.h"

namespace aw::gateway {
namespace {

// The file a flag names, or InvalidArgument "--<flag>: cannot read <path>: <reason>".
Status ReadFile(const std::string& path, std::string_view flag, std::string* out) {
  StatusOr<std::string> text = util::ReadFile(path);
  if (!text) return Status::InvalidArgument(fmt::format("--{}: {}", flag, text.status().message()));
  *out = std::move(text).value();
  return Status::Ok();
}

}  // namespace

// The client's state, shared with every call in flight: a callback holds it (never the
// AllocatorClient), so an answer that comes after Stop() or during destruction touches only this.
struct AllocatorClient::State : std::enable_shared_from_this<State> {
  struct Call {
    std::string body;
    std::chrono::steady_clock::time_point deadline;
    Done done;
  };

  State(std::chrono::nanoseconds t, size_t w) : timeout(t), workers(std::max<size_t>(1, w)) {}

  // Starts queued calls while fewer than `workers` are in flight, and answers those whose
  // deadline passed in the queue. `holding`: called by a call that ended, with its slot, which
  // goes to the next queued call or is freed.
  void Pump(bool holding) EXCLUDES(mu);
  void Send(Call call);

  const std::chrono::nanoseconds timeout;
  const size_t workers;
  std::shared_ptr<net::HttpsClient> client;  // set by Init(), before any call
  Mutex mu;
  CondVar idle_cv;  // signalled when in_flight drops to 0
  std::deque<Call> queue GUARDED_BY(mu);
  size_t in_flight GUARDED_BY(mu) = 0;
  bool started GUARDED_BY(mu) = false;
  bool stopping GUARDED_BY(mu) = false;
};

AllocatorClient::AllocatorClient(AllocatorOptions options)
    : options_(std::move(options)),
      state_(std::make_shared<State>(options_.timeout, options_.workers)) {}

// The client's own I/O thread: runs until its work guard is released and the calls are over.
struct AllocatorClient::OwnIo {
  boost::asio::io_context io{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  std::thread thread;
  void Join() {
    work.reset();
    if (thread.joinable()) thread.join();
  }
};

AllocatorClient::~AllocatorClient() {
  Stop();
  // The thread first (nothing runs on the io_context any more), then the HTTPS client made on it
  // (state_, destroyed before own_io_), then the io_context.
  if (own_io_) own_io_->Join();
}

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
    own_io_ = std::make_unique<OwnIo>();
    executor = own_io_->io.get_executor();
  }
  executor_ = executor;
  auto client = net::HttpsClient::Create(std::move(executor), std::move(cfg));
  if (!client.ok()) return client.status().Annotate("allocator client TLS");
  state_->client = std::move(client).value();
  if (own_io_) own_io_->thread = std::thread([io = &own_io_->io] { io->run(); });
  return Status::Ok();
}

void AllocatorClient::Start() {
  {
    MutexLock lock(state_->mu);
    state_->started = true;
  }
  state_->Pump(false);
}

void AllocatorClient::Stop() {
  // Stop waits below for callbacks that run on the I/O thread: there it could only hang.
  runtime::DieIfOn(executor_, "AllocatorClient::Stop");
  State& s = *state_;
  std::deque<State::Call> dropped;
  {
    MutexLock lock(s.mu);
    if (s.stopping && s.queue.empty() && s.in_flight == 0) return;
    s.stopping = true;
    dropped.swap(s.queue);
  }
  for (auto& c : dropped) {
    c.done({Status::Unavailable("the gateway is shutting down"), 0, {}});
  }
  // Ends the calls in flight promptly (Cancelled, answered as Unavailable), then waits for their
  // `done` to have run: what the owner's `done` callbacks use may go away once Stop() returns.
  if (s.client) s.client->Shutdown();
  MutexLock lock(s.mu);
  s.idle_cv.Wait(s.mu, [&s]() REQUIRES(s.mu) { return s.in_flight == 0; });
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
    MutexLock lock(state_->mu);
    if (!state_->stopping) {
      state_->queue.push_back(State::Call{std::move(body), deadline, std::move(done)});
      queued = true;
    }
  }
  if (!queued) {
    done({Status::Unavailable("the gateway is shutting down"), 0, {}});
    return;
  }
  state_->Pump(false);
}

void AllocatorClient::State::Pump(bool holding) {
  const bool in_callback = holding;
  for (;;) {
    Call call;
    {
      MutexLock lock(mu);
      if (!holding) {
        if (!started || stopping || queue.empty() || in_flight >= workers) return;
        ++in_flight;
        holding = true;
      }
      if (!started || stopping || queue.empty()) {
        if (--in_flight == 0) idle_cv.SignalAll();
        return;
      }
      call = std::move(queue.front());
      queue.pop_front();
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

void AllocatorClient::State::Send(Call call) {
  net::Request req;
  req.method = "POST";
  req.path = "/gameserverallocation";
  req.body = std::move(call.body);
  req.content_type = "application/json";
  req.timeout = AttemptTimeout(timeout, call.deadline, std::chrono::steady_clock::now());
  req.resend_on_closed_connection = false;
  // The callback holds the state, not the AllocatorClient: see the header's promise.
  client->Do(std::move(req),
             [self = shared_from_this(), done = std::move(call.done)](StatusOr<net::Response> res) {
               if (!res.ok()) {
                 done({Status::Unavailable(res.status().message()), 0, {}});
               } else {
                 done({Status::Ok(), res->status, std::move(res->body)});
               }
               self->Pump(/*holding=*/true);  // this call's slot: to the next queued call, or freed
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
