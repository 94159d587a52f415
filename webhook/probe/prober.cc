#include "probe/prober.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "probe/core/http_status.h"
#include "util/io/log.h"

namespace aw::probe {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr size_t kMaxStatusLine = 1024;
constexpr auto kDnsTtl = std::chrono::seconds(30);

std::string ErrnoText(int err) {
  if (err == ECONNREFUSED) return "connection refused";
  if (err == EHOSTUNREACH) return "host unreachable";
  if (err == ENETUNREACH) return "network unreachable";
  if (err == ECONNRESET) return "connection reset";
  return std::strerror(err);
}

bool ValidPath(const std::string& path) {
  if (path.empty() || path.front() != '/') return false;
  for (unsigned char c : path) {
    if (c <= 0x20 || c == 0x7f) return false;
  }
  return true;
}

struct Address {
  sockaddr_storage storage{};
  socklen_t len = 0;
};

bool LiteralAddress(const std::string& host, uint16_t port, Address* out) {
  sockaddr_in v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(port);
    std::memcpy(&out->storage, &v4, sizeof(v4));
    out->len = sizeof(v4);
    return true;
  }
  sockaddr_in6 v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(port);
    std::memcpy(&out->storage, &v6, sizeof(v6));
    out->len = sizeof(v6);
    return true;
  }
  return false;
}

void SetPort(Address* addr, uint16_t port) {
  if (addr->storage.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&addr->storage)->sin_port = htons(port);
  } else if (addr->storage.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&addr->storage)->sin6_port = htons(port);
  }
}

}  // namespace

// The event loop: owns the epoll instance and every in-flight probe. Touched only by the prober
// thread (and by the destructor after that thread has been joined).
class SocketProber::Loop {
 public:
  // `epoll_fd` already watches the owner's wake-up eventfd (data 0); owned from here on.
  Loop(SocketProber* owner, int epoll_fd) : owner_(owner), epoll_fd_(epoll_fd) {}
  ~Loop() {
    for (auto& [id, op] : ops_) {
      if (op.fd >= 0) ::close(op.fd);
      if (op.done) op.done(Result{Status::kError, "prober stopped"});
    }
    ::close(epoll_fd_);
  }

  void Run() {
    std::vector<epoll_event> events(256);
    for (;;) {
      if (!Admit()) return;
      int wait_ms = NextTimeoutMs();
      int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), wait_ms);
      if (n < 0 && errno != EINTR) {
        log::error("prober: epoll_wait failed", {{"error", std::strerror(errno)}});
        return;
      }
      for (int i = 0; i < n; ++i) {
        uint64_t id = events[i].data.u64;
        if (id == 0) {
          uint64_t count;
          while (::read(owner_->wake_fd_, &count, sizeof(count)) > 0) {
          }
          continue;
        }
        auto it = ops_.find(id);
        if (it != ops_.end()) OnEvent(it->second, events[i].events);
      }
      ExpireTimeouts();
    }
  }

 private:
  enum class Phase { kConnecting, kSending, kReceiving, kUdpWaiting };
  struct Op {
    uint64_t id = 0;
    Target target;
    Callback done;
    int fd = -1;
    Phase phase = Phase::kConnecting;
    std::chrono::milliseconds timeout{0};
    SteadyClock::time_point deadline;
    std::string out;
    size_t sent = 0;
    std::string in;
  };

  // Moves queued requests into flight while below the concurrency bound. False when stopping.
  bool Admit() {
    std::deque<Request> batch;
    {
      std::lock_guard<std::mutex> lock(owner_->mu_);
      if (owner_->stopping_) return false;
      size_t room = owner_->options_.max_concurrency > ops_.size()
                        ? owner_->options_.max_concurrency - ops_.size()
                        : 0;
      while (room > 0 && !owner_->queue_.empty()) {
        batch.push_back(std::move(owner_->queue_.front()));
        owner_->queue_.pop_front();
        --room;
      }
    }
    for (auto& req : batch) Start(std::move(req));
    // Probes that finished synchronously freed room; admit again until the queue or room is empty.
    if (!batch.empty() && ops_.size() < owner_->options_.max_concurrency) {
      std::lock_guard<std::mutex> lock(owner_->mu_);
      if (!owner_->queue_.empty()) {
        uint64_t one = 1;
        [[maybe_unused]] ssize_t w = ::write(owner_->wake_fd_, &one, sizeof(one));
      }
    }
    return true;
  }

  int NextTimeoutMs() const {
    if (ops_.empty()) return -1;
    auto now = SteadyClock::now();
    auto soonest = SteadyClock::time_point::max();
    for (const auto& [id, op] : ops_) soonest = std::min(soonest, op.deadline);
    if (soonest <= now) return 0;
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(soonest - now).count();
    return static_cast<int>(std::min<long long>(ms, 60'000));
  }

  void ExpireTimeouts() {
    auto now = SteadyClock::now();
    std::vector<uint64_t> expired;
    for (const auto& [id, op] : ops_) {
      if (op.deadline <= now) expired.push_back(id);
    }
    for (uint64_t id : expired) {
      auto it = ops_.find(id);
      if (it == ops_.end()) continue;
      std::string what = "timeout after " + std::to_string(it->second.timeout.count()) + "ms";
      if (it->second.phase == Phase::kConnecting)
        what += " (connecting)";
      else if (it->second.phase == Phase::kUdpWaiting)
        what += " (no datagram back)";
      else
        what += " (waiting for the HTTP status line)";
      Finish(it->second, {Status::kTimeout, what});
    }
  }

  bool Resolve(const Target& target, Address* out, std::string* error) {
    if (LiteralAddress(target.host, target.port, out)) return true;
    auto now = SteadyClock::now();
    auto cached = dns_.find(target.host);
    if (cached != dns_.end() && cached->second.expires > now) {
      *out = cached->second.addr;
      SetPort(out, target.port);
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
    std::memcpy(&out->storage, res->ai_addr, res->ai_addrlen);
    out->len = static_cast<socklen_t>(res->ai_addrlen);
    freeaddrinfo(res);
    dns_[target.host] = {*out, now + kDnsTtl};
    SetPort(out, target.port);
    return true;
  }

  void Start(Request req) {
    Op op;
    op.id = next_id_++;
    op.target = std::move(req.target);
    op.done = std::move(req.done);
    op.timeout = op.target.timeout.count() > 0 ? op.target.timeout : owner_->options_.timeout;
    op.deadline = SteadyClock::now() + op.timeout;
    if (op.target.port == 0) return Fail(std::move(op), {Status::kError, "port 0"});
    if (op.target.host.empty()) return Fail(std::move(op), {Status::kError, "no address"});
    if (op.target.type == Type::kHttp && !ValidPath(op.target.path)) {
      return Fail(std::move(op), {Status::kError, "invalid HTTP path"});
    }
    Address addr;
    std::string error;
    if (!Resolve(op.target, &addr, &error)) return Fail(std::move(op), {Status::kError, error});

    bool udp = op.target.type == Type::kUdp;
    op.fd = ::socket(addr.storage.ss_family,
                     (udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (op.fd < 0) {
      return Fail(std::move(op), {Status::kError, std::string("socket: ") + std::strerror(errno)});
    }
    int rc = ::connect(op.fd, reinterpret_cast<const sockaddr*>(&addr.storage), addr.len);
    uint32_t want = 0;
    if (udp) {
      if (rc != 0) return Fail(std::move(op), {Status::kError, ErrnoText(errno)});
      const std::string& payload = owner_->options_.udp_payload;
      if (::send(op.fd, payload.data(), payload.size(), MSG_NOSIGNAL) < 0) {
        return Fail(std::move(op), {Status::kFailure, ErrnoText(errno)});
      }
      op.phase = Phase::kUdpWaiting;
      want = EPOLLIN;
    } else if (rc == 0) {
      op.phase = Phase::kConnecting;
      want = EPOLLOUT;  // connected at once (loopback); handled like a completed connect
    } else if (errno == EINPROGRESS) {
      op.phase = Phase::kConnecting;
      want = EPOLLOUT;
    } else {
      return Fail(std::move(op), {Status::kFailure, ErrnoText(errno)});
    }
    epoll_event ev{};
    ev.events = want;
    ev.data.u64 = op.id;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, op.fd, &ev) != 0) {
      return Fail(std::move(op), {Status::kError, std::string("epoll: ") + std::strerror(errno)});
    }
    uint64_t id = op.id;
    ops_.emplace(id, std::move(op));
    owner_->active_count_.store(ops_.size(), std::memory_order_relaxed);
  }

  // For a probe that never entered ops_.
  void Fail(Op op, Result result) {
    if (op.fd >= 0) ::close(op.fd);
    Callback done = std::move(op.done);
    if (done) done(std::move(result));
  }

  void Finish(Op& op, Result result) {
    if (op.fd >= 0) {
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, op.fd, nullptr);
      ::close(op.fd);
    }
    Callback done = std::move(op.done);
    ops_.erase(op.id);
    owner_->active_count_.store(ops_.size(), std::memory_order_relaxed);
    if (done) done(std::move(result));
  }

  void Want(Op& op, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = op.id;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, op.fd, &ev);
  }

  void OnEvent(Op& op, uint32_t events) {
    switch (op.phase) {
      case Phase::kConnecting: {
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(op.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        if (err != 0) return Finish(op, {Status::kFailure, ErrnoText(err)});
        if (op.target.type == Type::kTcp) return Finish(op, {Status::kSuccess, "connected"});
        BuildRequest(op);
        op.phase = Phase::kSending;
        return Send(op);
      }
      case Phase::kSending:
        return Send(op);
      case Phase::kReceiving:
        return Receive(op);
      case Phase::kUdpWaiting: {
        char buf[2048];
        ssize_t n = ::recv(op.fd, buf, sizeof(buf), 0);
        if (n >= 0) return Finish(op, {Status::kSuccess, "datagram received"});
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
        return Finish(op, {Status::kFailure, ErrnoText(errno)});
      }
    }
    (void)events;
  }

  void BuildRequest(Op& op) {
    const Target& t = op.target;
    std::string host = t.host.find(':') != std::string::npos ? "[" + t.host + "]" : t.host;
    op.out = "GET " + t.path + " HTTP/1.1\r\nHost: " + host + ":" + std::to_string(t.port) +
             "\r\nUser-Agent: allocating-webhook-probe\r\nAccept: */*\r\nConnection: close\r\n\r\n";
    op.sent = 0;
  }

  void Send(Op& op) {
    while (op.sent < op.out.size()) {
      ssize_t n = ::send(op.fd, op.out.data() + op.sent, op.out.size() - op.sent, MSG_NOSIGNAL);
      if (n > 0) {
        op.sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Want(op, EPOLLOUT);
      if (n < 0 && errno == EINTR) continue;
      return Finish(op, {Status::kFailure, "send: " + ErrnoText(errno)});
    }
    op.phase = Phase::kReceiving;
    Want(op, EPOLLIN | EPOLLRDHUP);
  }

  void Receive(Op& op) {
    char buf[1024];
    for (;;) {
      ssize_t n = ::recv(op.fd, buf, sizeof(buf), 0);
      if (n > 0) {
        op.in.append(buf, static_cast<size_t>(n));
        StatusLine line = ParseStatusLine(op.in, kMaxStatusLine);
        if (line.state == StatusLineState::kMalformed) {
          return Finish(op, {Status::kFailure, "malformed HTTP response"});
        }
        if (line.state == StatusLineState::kComplete) {
          if (line.code >= 200 && line.code <= 299) {
            return Finish(op, {Status::kSuccess, "http " + std::to_string(line.code)});
          }
          return Finish(op, {Status::kFailure, "http " + std::to_string(line.code)});
        }
        continue;
      }
      if (n == 0) return Finish(op, {Status::kFailure, "connection closed before a status line"});
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      return Finish(op, {Status::kFailure, ErrnoText(errno)});
    }
  }

  struct DnsEntry {
    Address addr;
    SteadyClock::time_point expires;
  };

  SocketProber* owner_;
  int epoll_fd_ = -1;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Op> ops_;
  std::unordered_map<std::string, DnsEntry> dns_;
};

StatusOr<std::unique_ptr<SocketProber>> SocketProber::Create(ProberOptions options) {
  const int wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0)
    return aw::Status::IOError(std::string("prober: eventfd: ") + std::strerror(errno));
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) {
    const int err = errno;
    ::close(wake_fd);
    return aw::Status::IOError(std::string("prober: epoll_create1: ") + std::strerror(err));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;  // 0 = the wake-up eventfd; probes use ids >= 1
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev) != 0) {
    const int err = errno;
    ::close(epoll_fd);
    ::close(wake_fd);
    return aw::Status::IOError(std::string("prober: epoll_ctl(eventfd): ") + std::strerror(err));
  }
  auto prober = std::make_unique<SocketProber>(PassKey{}, std::move(options), wake_fd, epoll_fd);
  // std::thread reports a refused thread (EAGAIN) as std::system_error: this is the boundary
  // where it becomes a Status. Without a thread, the destructor fails nothing and joins nothing.
  try {
    SocketProber* p = prober.get();
    prober->thread_ = std::thread([p] { p->loop_->Run(); });
  } catch (const std::system_error& e) {
    return aw::Status::IOError(std::string("prober: cannot start its thread: ") + e.what());
  }
  return prober;
}

SocketProber::SocketProber(PassKey, ProberOptions options, int wake_fd, int epoll_fd)
    : options_(std::move(options)), wake_fd_(wake_fd) {
  if (options_.max_concurrency == 0) options_.max_concurrency = 1;
  loop_ = std::make_unique<Loop>(this, epoll_fd);
}

SocketProber::~SocketProber() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t w = ::write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  loop_.reset();  // fails in-flight probes with "prober stopped"
  for (auto& req : queue_) {
    if (req.done) req.done(Result{Status::kError, "prober stopped"});
  }
  queue_.clear();
  ::close(wake_fd_);
}

void SocketProber::Probe(const Target& target, Callback done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      queue_.push_back(Request{target, std::move(done)});
      done = nullptr;
    }
  }
  if (done) {
    done(Result{Status::kError, "prober stopped"});
    return;
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t w = ::write(wake_fd_, &one, sizeof(one));
}

}  // namespace aw::probe
