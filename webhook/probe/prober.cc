#include "probe/prober.h"

#include <netdb.h>
#include <sys/socket.h>

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/system_error.hpp>
#include <cerrno>
#include <cstring>
#include <optional>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "probe/core/http_status.h"
#include "runtime/io_thread.h"
#include "runtime/lifeline.h"
#include "util/io/log.h"

namespace aw::probe {
namespace {

namespace net = boost::asio;
using SteadyClock = std::chrono::steady_clock;
using ErrorCode = boost::system::error_code;

constexpr size_t kMaxStatusLine = 1024;
constexpr auto kDnsTtl = std::chrono::seconds(30);

std::string ErrnoText(int err) {
  if (err == ECONNREFUSED) return "connection refused";
  if (err == EHOSTUNREACH) return "host unreachable";
  if (err == ENETUNREACH) return "network unreachable";
  if (err == ECONNRESET) return "connection reset";
  return std::strerror(err);
}

// The same words as ErrnoText for an operating-system error Asio reports.
std::string ErrorText(const ErrorCode& ec) {
  if (ec.category() == boost::system::system_category()) return ErrnoText(ec.value());
  return ec.message();
}

bool ValidPath(const std::string& path) {
  if (path.empty() || path.front() != '/') return false;
  for (unsigned char c : path) {
    if (c <= 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

// The event loop: every in-flight probe, on the given executor or on an io_context of its own. Its
// state is touched only by its handlers (guarded by `life_`), on the loop's thread, and by the
// destructor once no handler runs (its own thread joined, or `life_` ended).
class SocketProber::Loop {
 public:
  // Makes the reactor now (epoll, eventfd, timerfd), so that a refused descriptor is an error of
  // Create() rather than of a later probe. Throws boost::system::system_error when the system
  // refuses.
  Loop(SocketProber* owner, net::any_io_executor given)
      : owner_(owner),
        own_(given ? nullptr : std::make_unique<net::io_context>(1)),
        ex_(given ? std::move(given) : net::any_io_executor(own_->get_executor())),
        reactor_probe_(ex_) {
    if (own_) work_.emplace(own_->get_executor());
  }

  ~Loop() {
    life_.End();  // a handler running returns first; those that run later do nothing
    for (auto& [id, op] : ops_) {
      ErrorCode ignored;
      if (op->tcp.is_open()) op->tcp.close(ignored);
      if (op->udp.is_open()) op->udp.close(ignored);
      op->timer.cancel();  // on a given executor, its wait would keep that io_context busy
      op->finished = true;
      CallDone(std::move(op->done), Result{Status::kError, "prober stopped"});
    }
    ops_.clear();
  }

  bool OwnsThread() const { return own_ != nullptr; }
  const net::any_io_executor& executor() const { return ex_; }

  void Run() {
    for (;;) {
      try {
        own_->run();
        return;
      } catch (const std::exception& e) {
        // A callback threw: the loop goes on (the probe it belonged to has already finished).
        log::error("prober: a probe callback threw", {{"error", e.what()}});
      }
    }
  }

  // Wakes the loop to admit queued requests (any thread).
  void Kick() {
    net::post(ex_, life_.Guard([this] { Admit(); }));
  }

  // Ends Run() (any thread; own io_context only); what is still in flight is failed by the
  // destructor.
  void Stop() {
    work_.reset();
    own_->stop();
  }

 private:
  enum class Phase { kConnecting, kSending, kReceiving, kUdpWaiting };
  struct Op {
    explicit Op(const net::any_io_executor& ex) : tcp(ex), udp(ex), timer(ex) {}
    uint64_t id = 0;
    Target target;
    Callback done;
    net::ip::tcp::socket tcp;
    net::ip::udp::socket udp;
    net::steady_timer timer;
    Phase phase = Phase::kConnecting;
    std::chrono::milliseconds timeout{0};
    bool finished = false;
    std::string out;
    std::string in;
    std::array<char, 2048> buf{};
  };
  using OpPtr = std::shared_ptr<Op>;

  // Moves queued requests into flight while below the concurrency bound.
  void Admit() {
    for (;;) {
      std::optional<Request> req;
      {
        MutexLock lock(owner_->mu_);
        if (owner_->stopping_) return;
        if (ops_.size() >= owner_->options_.max_concurrency || owner_->queue_.empty()) return;
        req = std::move(owner_->queue_.front());
        owner_->queue_.pop_front();
      }
      Start(std::move(*req));
    }
  }

  bool Resolve(const Target& target, net::ip::address* out, std::string* error) {
    ErrorCode ec;
    *out = net::ip::make_address(target.host, ec);
    if (!ec) return true;
    auto now = SteadyClock::now();
    auto cached = dns_.find(target.host);
    if (cached != dns_.end() && cached->second.expires > now) {
      *out = cached->second.addr;
      return true;
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = target.type == Type::kUdp ? SOCK_DGRAM : SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = getaddrinfo(target.host.c_str(), nullptr, &hints, &res);
    if (rc != 0 || res == nullptr) {
      *error = "cannot resolve host " + target.host + ": " + gai_strerror(rc);
      return false;
    }
    net::ip::tcp::endpoint ep;
    std::memcpy(ep.data(), res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    *out = ep.address();
    dns_[target.host] = {*out, now + kDnsTtl};
    return true;
  }

  void Start(Request req) {
    auto op = std::make_shared<Op>(ex_);
    op->id = next_id_++;
    op->target = std::move(req.target);
    op->done = std::move(req.done);
    op->timeout = op->target.timeout.count() > 0 ? op->target.timeout : owner_->options_.timeout;
    if (op->target.port == 0) return Fail(*op, {Status::kError, "port 0"});
    if (op->target.host.empty()) return Fail(*op, {Status::kError, "no address"});
    if (op->target.type == Type::kHttp && !ValidPath(op->target.path)) {
      return Fail(*op, {Status::kError, "invalid HTTP path"});
    }
    net::ip::address addr;
    std::string error;
    if (!Resolve(op->target, &addr, &error)) return Fail(*op, {Status::kError, error});

    ErrorCode ec;
    if (op->target.type == Type::kUdp) {
      net::ip::udp::endpoint ep(addr, op->target.port);
      op->udp.open(ep.protocol(), ec);
      if (ec) return Fail(*op, {Status::kError, "socket: " + ec.message()});
      op->udp.connect(ep, ec);
      if (ec) return Fail(*op, {Status::kError, ErrorText(ec)});
      const std::string& payload = owner_->options_.udp_payload;
      op->udp.send(net::buffer(payload), MSG_NOSIGNAL, ec);
      if (ec) return Fail(*op, {Status::kFailure, ErrorText(ec)});
      op->phase = Phase::kUdpWaiting;
    } else {
      net::ip::tcp::endpoint ep(addr, op->target.port);
      op->tcp.open(ep.protocol(), ec);
      if (ec) return Fail(*op, {Status::kError, "socket: " + ec.message()});
      op->phase = Phase::kConnecting;
    }
    ops_.emplace(op->id, op);
    owner_->active_count_.store(ops_.size(), std::memory_order_relaxed);

    op->timer.expires_after(op->timeout);
    op->timer.async_wait(life_.Guard([this, op](const ErrorCode& ec) {
      if (ec || op->finished) return;
      std::string what = "timeout after " + std::to_string(op->timeout.count()) + "ms";
      what += op->phase == Phase::kConnecting   ? " (connecting)"
              : op->phase == Phase::kUdpWaiting ? " (no datagram back)"
                                                : " (waiting for the HTTP status line)";
      Finish(*op, {Status::kTimeout, what});
    }));

    if (op->target.type == Type::kUdp) {
      op->udp.async_receive(net::buffer(op->buf),
                            life_.Guard([this, op](const ErrorCode& ec, size_t) {
                              if (op->finished) return;
                              if (ec) return Finish(*op, {Status::kFailure, ErrorText(ec)});
                              Finish(*op, {Status::kSuccess, "datagram received"});
                            }));
      return;
    }
    op->tcp.async_connect(net::ip::tcp::endpoint(addr, op->target.port),
                          life_.Guard([this, op](const ErrorCode& ec) { OnConnected(op, ec); }));
  }

  void OnConnected(const OpPtr& op, const ErrorCode& ec) {
    if (op->finished) return;
    if (ec) return Finish(*op, {Status::kFailure, ErrorText(ec)});
    if (op->target.type == Type::kTcp) return Finish(*op, {Status::kSuccess, "connected"});
    const Target& t = op->target;
    std::string host = t.host.find(':') != std::string::npos ? "[" + t.host + "]" : t.host;
    op->out =
        "GET " + t.path + " HTTP/1.1\r\nHost: " + host + ":" + std::to_string(t.port) +
        "\r\nUser-Agent: allocating-webhook-probe\r\nAccept: */*\r\nConnection: close\r\n\r\n";
    op->phase = Phase::kSending;
    net::async_write(op->tcp, net::buffer(op->out),
                     life_.Guard([this, op](const ErrorCode& ec, size_t) {
                       if (op->finished) return;
                       if (ec) return Finish(*op, {Status::kFailure, "send: " + ErrorText(ec)});
                       op->phase = Phase::kReceiving;
                       Receive(op);
                     }));
  }

  void Receive(const OpPtr& op) {
    op->tcp.async_read_some(
        net::buffer(op->buf), life_.Guard([this, op](const ErrorCode& ec, size_t n) {
          if (op->finished) return;
          if (ec == net::error::eof) {
            return Finish(*op, {Status::kFailure, "connection closed before a status line"});
          }
          if (ec) return Finish(*op, {Status::kFailure, ErrorText(ec)});
          op->in.append(op->buf.data(), n);
          StatusLine line = ParseStatusLine(op->in, kMaxStatusLine);
          if (line.state == StatusLineState::kMalformed) {
            return Finish(*op, {Status::kFailure, "malformed HTTP response"});
          }
          if (line.state == StatusLineState::kComplete) {
            const Status status =
                line.code >= 200 && line.code <= 299 ? Status::kSuccess : Status::kFailure;
            return Finish(*op, {status, "http " + std::to_string(line.code)});
          }
          Receive(op);
        }));
  }

  // For a probe that never entered ops_.
  void Fail(Op& op, Result result) {
    op.finished = true;
    CallDone(std::move(op.done), std::move(result));
  }

  // Runs a probe's callback; one that throws is logged (no exception leaves a guarded handler:
  // the Lifeline would count it running forever, and the dispatcher is shared).
  static void CallDone(Callback done, Result result) {
    if (!done) return;
    try {
      done(std::move(result));
    } catch (const std::exception& e) {
      log::error("prober: a probe callback threw", {{"error", e.what()}});
    }
  }

  void Finish(Op& op, Result result) {
    if (op.finished) return;
    op.finished = true;
    ErrorCode ignored;
    op.timer.cancel();
    if (op.tcp.is_open()) op.tcp.close(ignored);
    if (op.udp.is_open()) op.udp.close(ignored);
    Callback done = std::move(op.done);
    ops_.erase(op.id);  // the pending handlers still hold the Op until they run
    owner_->active_count_.store(ops_.size(), std::memory_order_relaxed);
    CallDone(std::move(done), std::move(result));
    Kick();  // room for a queued request
  }

  struct DnsEntry {
    net::ip::address addr;
    SteadyClock::time_point expires;
  };

  SocketProber* owner_;
  const std::unique_ptr<net::io_context> own_;  // without a given executor
  const net::any_io_executor ex_;               // where every probe runs
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;  // own_ only
  net::steady_timer reactor_probe_;  // constructing it makes the reactor (see the constructor)
  runtime::Lifeline life_;           // every handler's (see the destructor)
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, OpPtr> ops_;
  std::unordered_map<std::string, DnsEntry> dns_;
};

StatusOr<std::unique_ptr<SocketProber>> SocketProber::Create(
    ProberOptions options, boost::asio::any_io_executor executor) {
  auto prober = std::make_unique<SocketProber>(PassKey{}, std::move(options));
  // Asio reports a refused descriptor (its eventfd, epoll or timerfd) as
  // boost::system::system_error and std::thread a refused thread as std::system_error: this is the
  // boundary where they become a Status. Without a thread, the destructor fails nothing and joins
  // nothing.
  try {
    prober->loop_ = std::make_unique<Loop>(prober.get(), std::move(executor));
  } catch (const boost::system::system_error& e) {
    return aw::Status::IOError(std::string("prober: eventfd/epoll (its event loop): ") + e.what());
  } catch (const std::system_error& e) {
    return aw::Status::IOError(std::string("prober: eventfd/epoll (its event loop): ") + e.what());
  }
  if (!prober->loop_->OwnsThread()) return prober;
  try {
    SocketProber* p = prober.get();
    prober->thread_ = std::thread([p] { p->loop_->Run(); });
  } catch (const std::system_error& e) {
    return aw::Status::IOError(std::string("prober: cannot start its thread: ") + e.what());
  }
  return prober;
}

SocketProber::SocketProber(PassKey, ProberOptions options) : options_(std::move(options)) {
  if (options_.max_concurrency == 0) options_.max_concurrency = 1;
}

SocketProber::~SocketProber() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  if (loop_ && loop_->OwnsThread()) loop_->Stop();
  if (loop_ && !loop_->OwnsThread())
    runtime::DieIfOn(loop_->executor(), "SocketProber's destructor");
  if (thread_.joinable()) thread_.join();
  loop_.reset();  // fails in-flight probes with "prober stopped"
  // Still queued: taken out under the lock (Probe refuses from now on), failed outside it, so a
  // callback that probes again does not deadlock.
  std::deque<Request> left;
  {
    MutexLock lock(mu_);
    left.swap(queue_);
  }
  for (auto& req : left) {
    if (req.done) req.done(Result{Status::kError, "prober stopped"});
  }
}

void SocketProber::Probe(const Target& target, Callback done) {
  {
    MutexLock lock(mu_);
    if (!stopping_ && loop_) {
      queue_.push_back(Request{target, std::move(done)});
      done = nullptr;
    }
  }
  if (done) {
    done(Result{Status::kError, "prober stopped"});
    return;
  }
  loop_->Kick();
}

}  // namespace aw::probe
