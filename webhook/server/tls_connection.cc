#include "server/tls_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "util/log.h"

namespace aw::server {
namespace {

timeval ToTimeval(std::chrono::microseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1'000'000);
  tv.tv_usec = static_cast<suseconds_t>(d.count() % 1'000'000);
  return tv;
}

int ToMillis(std::chrono::microseconds d) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  return ms < 1 ? 1 : static_cast<int>(std::min<int64_t>(ms, INT32_MAX));
}

bool PollOne(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  while (true) {
    int n = ::poll(&p, 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    return n > 0 && (p.revents & (events | POLLHUP | POLLERR)) != 0;
  }
}

void AddressOf(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return;
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    port = ntohs(a->sin6_port);
  }
  ip = buf;
}

// httplib::Stream over a TLS connection on a blocking socket whose SO_RCVTIMEO/SO_SNDTIMEO carry
// the read/write timeouts: a read or write that waits longer fails.
//   - Reads are buffered (one TLS record at a time): httplib reads the request line and headers
//     one byte per call, which would otherwise be one SSL_read per byte.
//   - Writes are gathered until Flush() (called after each response) or the next read, so that a
//     response leaves as one TLS record and one segment instead of one for the headers and one
//     for the body.
class TlsStream final : public httplib::Stream {
 public:
  TlsStream(int fd, SSL* ssl, const ConnectionOptions& o)
      : fd_(fd), ssl_(ssl), read_ms_(ToMillis(o.read_timeout)), write_ms_(ToMillis(o.write_timeout)) {}

  bool is_readable() const override { return buffered() || PollOne(fd_, POLLIN, read_ms_); }
  bool is_writable() const override { return PollOne(fd_, POLLOUT, write_ms_); }

  ssize_t read(char* ptr, size_t size) override {
    if (!Flush()) return -1;  // e.g. "100 Continue" must reach the client before its body comes
    if (size == 0) return 0;
    if (rpos_ == rlen_) {
      if (size >= kReadChunk) return SslRead(ptr, size);
      if (!rbuf_) rbuf_ = std::make_unique_for_overwrite<char[]>(kReadChunk);
      ssize_t n = SslRead(rbuf_.get(), kReadChunk);
      if (n <= 0) return n;
      rpos_ = 0;
      rlen_ = static_cast<size_t>(n);
    }
    size_t n = std::min(size, rlen_ - rpos_);
    std::memcpy(ptr, rbuf_.get() + rpos_, n);
    rpos_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (size == 0) return 0;
    if (pending_.size() + size <= kMaxGather) {
      pending_.append(ptr, size);
      return static_cast<ssize_t>(size);
    }
    if (!Flush()) return -1;
    return WriteAll(ptr, size) ? static_cast<ssize_t>(size) : -1;
  }

  // Sends gathered bytes; false when the connection failed.
  bool Flush() {
    if (pending_.empty()) return true;
    bool ok = WriteAll(pending_.data(), pending_.size());
    pending_.clear();
    return ok;
  }

  // Request bytes already read from the socket (pipelined): epoll will not report them.
  bool buffered() const { return rpos_ < rlen_ || SSL_has_pending(ssl_) == 1; }

  // Frees the buffers while the connection is idle (nothing buffered).
  void ReleaseBuffers() {
    if (rpos_ == rlen_) rbuf_.reset();
    if (pending_.empty()) std::string().swap(pending_);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(fd_, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(fd_, false, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  static constexpr size_t kMaxGather = 16 * 1024;  // one TLS record
  static constexpr size_t kReadChunk = 16 * 1024;  // one TLS record

  ssize_t SslRead(char* ptr, size_t size) {
    int n = SSL_read(ssl_, ptr, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
    if (n > 0) return n;
    int err = SSL_get_error(ssl_, n);
    ERR_clear_error();
    return err == SSL_ERROR_ZERO_RETURN ? 0 : -1;
  }

  bool WriteAll(const char* ptr, size_t size) {
    while (size > 0) {
      int n = SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
      if (n <= 0) {
        ERR_clear_error();
        return false;
      }
      ptr += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  }

  const int fd_;
  SSL* const ssl_;
  const int read_ms_, write_ms_;
  std::unique_ptr<char[]> rbuf_;
  size_t rpos_ = 0, rlen_ = 0;
  std::string pending_;
};

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};

// A worker that shows no progress for this long while connections are ready counts as stuck.
constexpr auto kStuckAfter = std::chrono::milliseconds(5);

// True when thread `tid` of this process is runnable or running (not blocked in a wait): a
// worker that made no progress but is runnable is short of CPU, not stuck on a slow client.
bool Runnable(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return false;  // exited
  return stat[paren + 2] == 'R';
}

}  // namespace

struct TlsConnectionServer::Conn {
  Conn(int fd_, SSL* ssl_, const ConnectionOptions& o)
      : fd(fd_), ssl(ssl_), stream(fd_, ssl_, o), left(std::max<size_t>(1, o.keep_alive_max_requests)) {}
  const int fd;
  std::unique_ptr<SSL, SslFree> ssl;
  TlsStream stream;
  size_t left;
  bool ok = true;          // last request ended well (close_notify on close)
  bool handshaking = true;  // owner only: non-blocking socket until the TLS handshake is done
  bool want_write = false;  // owner only: the handshake waits for the socket to be writable
  std::chrono::steady_clock::time_point handshake_deadline;  // set before the first park
  bool in_epoll = false;   // owner only
  bool parked = false;     // mu_
  bool expiring = false;   // mu_: read side shut down by the sweep or Shutdown()
  std::chrono::steady_clock::time_point idle_since;  // mu_
};

TlsConnectionServer::TlsConnectionServer(ConnectionOptions options,
                                         const std::function<bool(SSL_CTX&)>& setup_ssl_ctx)
    : WithListener<httplib::SSLServer>(setup_ssl_ctx),
      options_(options),
      epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (epoll_fd_ < 0 || wake_fd_ < 0) throw std::runtime_error("epoll/eventfd setup failed");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
    throw std::runtime_error("epoll_ctl on the wake eventfd failed");
  }
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < std::max<size_t>(1, options_.min_workers); ++i) StartWorker();
  monitor_ = std::thread([this] { Monitor(); });
}

TlsConnectionServer::~TlsConnectionServer() {
  Shutdown();
  Join();
  ::close(wake_fd_);
  ::close(epoll_fd_);
}

void TlsConnectionServer::Shutdown() {
  std::lock_guard lock(mu_);
  shutting_down_.store(true);
  for (auto& [raw, conn] : conns_) {
    if (conn->parked && !conn->expiring) {
      conn->expiring = true;
      ::shutdown(conn->fd, SHUT_RD);  // epoll reports it; a worker closes it
    }
  }
  slot_cv_.notify_all();
  monitor_cv_.notify_all();
}

void TlsConnectionServer::Join() {
  std::unique_lock lock(mu_);
  if (exiting_ && live_workers_ == 0 && !monitor_.joinable()) return;
  closed_cv_.wait(lock, [this] { return conns_.empty(); });
  exiting_ = true;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  monitor_cv_.notify_all();
  closed_cv_.wait(lock, [this] { return live_workers_ == 0; });
  lock.unlock();
  if (monitor_.joinable()) monitor_.join();
}

void TlsConnectionServer::StartWorker() {
  ++live_workers_;
  workers_.fetch_add(1);
  std::thread([this] { Worker(); }).detach();
}

void TlsConnectionServer::Worker() {
  const auto tid = static_cast<pid_t>(::syscall(SYS_gettid));
  {
    std::lock_guard lock(mu_);
    worker_tids_.push_back(tid);
  }
  const int idle_ms = static_cast<int>(std::min<int64_t>(options_.worker_idle_exit.count(), INT32_MAX));
  epoll_event ev{};
  for (;;) {
    waiting_.fetch_add(1);
    int n = ::epoll_wait(epoll_fd_, &ev, 1, idle_ms);
    if (waiting_.fetch_sub(1) == 1 && n > 0 && monitor_dozing_.load(std::memory_order_relaxed)) {
      std::lock_guard lock(mu_);
      monitor_cv_.notify_one();  // every worker is busy now: watch for stuck ones
    }
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || ev.data.ptr == nullptr) {
      std::lock_guard lock(mu_);
      const bool idle_exit = n == 0 && live_workers_ > std::max<size_t>(1, options_.min_workers);
      if (exiting_ || idle_exit || n < 0) {
        std::erase(worker_tids_, tid);
        --live_workers_;
        workers_.fetch_sub(1);
        closed_cv_.notify_all();  // under the lock: `this` may go away right after
        return;
      }
      continue;
    }
    progress_.fetch_add(1, std::memory_order_relaxed);
    Serve(static_cast<Conn*>(ev.data.ptr));
  }
}

void TlsConnectionServer::Serve(Conn* conn) {
  bool expired = false;
  {
    std::lock_guard lock(mu_);
    conn->parked = false;
    expired = conn->expiring;
  }
  // A handshake cut by the sweep (or by Shutdown) closes without a TLS alert: the client may not
  // even have sent its ClientHello.
  if (shutting_down_.load() || (expired && conn->handshaking)) {
    conn->ok = false;
    Close(conn);
    return;
  }
  if (conn->handshaking) {
    Handshake(conn);
    return;
  }
  ServeRequests(conn);
}

void TlsConnectionServer::Handshake(Conn* conn) {
  const int rc = SSL_accept(conn->ssl.get());
  if (rc == 1) {
    conn->handshaking = false;
    conn->want_write = false;
    const int flags = ::fcntl(conn->fd, F_GETFL);
    if (flags < 0 || ::fcntl(conn->fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
      conn->ok = false;
      Close(conn);
      return;
    }
    if (conn->stream.buffered()) {
      ServeRequests(conn);  // the first request came with the handshake
    } else {
      ParkOrClose(conn);
    }
    return;
  }
  const int err = SSL_get_error(conn->ssl.get(), rc);
  ERR_clear_error();
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
    conn->want_write = err == SSL_ERROR_WANT_WRITE;
    ParkOrClose(conn);
    return;
  }
  conn->ok = false;  // bad handshake, or the client went away / timed out
  Close(conn);
}

void TlsConnectionServer::ServeRequests(Conn* conn) {
  SSL* raw = conn->ssl.get();
  do {
    const bool close_connection = conn->left == 1 || shutting_down_.load();
    bool connection_closed = false;
    bool ok = process_request(conn->stream, close_connection, connection_closed,
                              [raw](httplib::Request& req) { req.ssl = raw; });
    ok = conn->stream.Flush() && ok;
    conn->ok = ok;
    progress_.fetch_add(1, std::memory_order_relaxed);
    if (!ok || connection_closed || close_connection) {
      Close(conn);
      return;
    }
    --conn->left;
  } while (conn->stream.buffered());
  ParkOrClose(conn);
}

void TlsConnectionServer::ParkOrClose(Conn* conn) {
  conn->stream.ReleaseBuffers();
  {
    std::lock_guard lock(mu_);
    if (!shutting_down_.load()) {
      conn->parked = true;
      conn->idle_since = std::chrono::steady_clock::now();
      epoll_event ev{};
      ev.events = (conn->want_write ? EPOLLOUT : EPOLLIN) | EPOLLRDHUP | EPOLLONESHOT;
      ev.data.ptr = conn;
      const int op = conn->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
      if (::epoll_ctl(epoll_fd_, op, conn->fd, &ev) == 0) {
        conn->in_epoll = true;
        return;
      }
      conn->parked = false;
      log::error("cannot watch a connection", {{"error", std::strerror(errno)}});
    }
  }
  conn->ok = false;  // shutting down: no close_notify needed, the client sees the close
  Close(conn);
}

void TlsConnectionServer::Close(Conn* conn) {
  if (conn->ok) SSL_shutdown(conn->ssl.get());  // close_notify on an orderly end
  ERR_clear_error();
  ::shutdown(conn->fd, SHUT_RDWR);
  ::close(conn->fd);  // also leaves the epoll set
  std::unique_ptr<Conn> owned;
  {
    std::lock_guard lock(mu_);
    auto it = conns_.find(conn);
    if (it != conns_.end()) {
      owned = std::move(it->second);
      conns_.erase(it);
    }
    open_.fetch_sub(1);
    slot_cv_.notify_one();
    closed_cv_.notify_all();
  }
}

bool TlsConnectionServer::process_and_close_socket(socket_t sock) {
  {
    std::unique_lock lock(mu_);
    if (static_cast<size_t>(open_.load()) >= options_.max_connections && !shutting_down_.load()) {
      if (!limit_logged_) {
        limit_logged_ = true;
        log::warn("connection limit reached; new connections wait for a free slot",
                  {{"max_connections", std::to_string(options_.max_connections)}});
      }
      slot_cv_.wait(lock, [this] {
        return static_cast<size_t>(open_.load()) < options_.max_connections ||
               shutting_down_.load();
      });
    }
    if (shutting_down_.load()) {
      lock.unlock();
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
      return false;
    }
    open_.fetch_add(1);
    if (static_cast<size_t>(open_.load()) < options_.max_connections) limit_logged_ = false;
  }

  timeval rcv = ToTimeval(options_.read_timeout);
  timeval snd = ToTimeval(options_.write_timeout);
  ::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof(rcv));
  ::setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof(snd));
  int one = 1;
  ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

  auto owned = std::make_unique<Conn>(sock, SSL_new(ssl_context()), options_);
  Conn* conn = owned.get();
  {
    std::lock_guard lock(mu_);
    conns_.emplace(conn, std::move(owned));
  }
  // Non-blocking handshake: between its steps the connection waits in the epoll set like an idle
  // one (so a client that never sends its ClientHello holds no thread), cut by the sweep after
  // the read timeout. Requests are then read and answered on the socket in blocking mode.
  conn->handshake_deadline = std::chrono::steady_clock::now() + options_.read_timeout;
  const int flags = ::fcntl(sock, F_GETFL);
  if (!conn->ssl || flags < 0 || ::fcntl(sock, F_SETFL, flags | O_NONBLOCK) != 0 ||
      SSL_set_fd(conn->ssl.get(), sock) != 1 || shutting_down_.load()) {
    ERR_clear_error();
    conn->ok = false;
    Close(conn);
    return false;
  }
  ParkOrClose(conn);  // a worker runs the handshake once the ClientHello is there
  return true;
}

void TlsConnectionServer::Monitor() {
  const auto sweep_every = std::clamp<std::chrono::milliseconds>(
      std::min(options_.keep_alive_timeout,
               std::chrono::duration_cast<std::chrono::milliseconds>(options_.read_timeout)) / 4,
      std::chrono::milliseconds(10), std::chrono::seconds(1));
  auto next_sweep = std::chrono::steady_clock::now() + sweep_every;
  uint64_t seen = progress_.load();
  std::unique_lock lock(mu_);
  while (!exiting_) {
    const bool all_busy = waiting_.load() == 0 && !conns_.empty();
    if (all_busy) {
      monitor_cv_.wait_for(lock, kStuckAfter);
    } else {
      monitor_dozing_.store(true);
      monitor_cv_.wait_until(lock, next_sweep);
      monitor_dozing_.store(false);
    }
    if (exiting_) break;
    const auto now = std::chrono::steady_clock::now();

    // Grow: every worker busy, none progressed for kStuckAfter, and connections are ready.
    const uint64_t progress = progress_.load();
    // A worker that is runnable (preempted by other work on a busy machine) is not stuck: more
    // threads would only contend for the same CPU.
    if (waiting_.load() == 0 && progress == seen && !shutting_down_.load() &&
        live_workers_ < options_.max_connections) {
      pollfd p{epoll_fd_, POLLIN, 0};
      if (::poll(&p, 1, 0) > 0 &&
          std::none_of(worker_tids_.begin(), worker_tids_.end(), Runnable)) {
        StartWorker();
      }
    }
    seen = progress;

    // Sweep: parked connections idle past the keep-alive timeout, or whose handshake is not done
    // within the read timeout, are closed by a worker.
    if (now >= next_sweep) {
      next_sweep = now + sweep_every;
      for (auto& [raw, conn] : conns_) {
        if (!conn->parked || conn->expiring) continue;
        const bool expired = conn->handshaking
                                 ? now >= conn->handshake_deadline
                                 : now - conn->idle_since >= options_.keep_alive_timeout;
        if (expired) {
          conn->expiring = true;
          ::shutdown(conn->fd, SHUT_RD);
        }
      }
    }
  }
}

}  // namespace aw::server
