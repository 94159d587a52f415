#include "server/tls_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>

#include <openssl/err.h>
#include <openssl/ssl.h>

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
// the read/write timeouts: a read or write that waits longer fails. Writes are gathered until
// Flush() (called after each response) or the next read, so that a response leaves as one TLS
// record and one segment instead of one for the headers and one for the body.
class TlsStream final : public httplib::Stream {
 public:
  TlsStream(int fd, SSL* ssl, const ConnectionOptions& o)
      : fd_(fd), ssl_(ssl), read_ms_(ToMillis(o.read_timeout)), write_ms_(ToMillis(o.write_timeout)) {}

  bool is_readable() const override { return SSL_pending(ssl_) > 0 || PollOne(fd_, POLLIN, read_ms_); }
  bool is_writable() const override { return PollOne(fd_, POLLOUT, write_ms_); }

  ssize_t read(char* ptr, size_t size) override {
    if (!Flush()) return -1;  // e.g. "100 Continue" must reach the client before its body comes
    if (size == 0) return 0;
    int n = SSL_read(ssl_, ptr, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
    if (n > 0) return n;
    int err = SSL_get_error(ssl_, n);
    ERR_clear_error();
    return err == SSL_ERROR_ZERO_RETURN ? 0 : -1;
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

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(fd_, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(fd_, false, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  static constexpr size_t kMaxGather = 16 * 1024;  // one TLS record

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
  std::string pending_;
};

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};

}  // namespace

TlsConnectionServer::TlsConnectionServer(ConnectionOptions options,
                                         const std::function<bool(SSL_CTX&)>& setup_ssl_ctx)
    : WithListener<httplib::SSLServer>(setup_ssl_ctx),
      options_(options),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

TlsConnectionServer::~TlsConnectionServer() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void TlsConnectionServer::Shutdown() {
  shutting_down_.store(true);
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  }
}

bool TlsConnectionServer::WaitForRequest(int fd, SSL* ssl) const {
  if (SSL_pending(ssl) > 0) return true;  // already buffered (pipelined request)
  pollfd fds[2] = {{fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  const int nfds = wake_fd_ >= 0 ? 2 : 1;
  const auto deadline = std::chrono::steady_clock::now() + options_.keep_alive_timeout;
  while (!shutting_down_.load()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return false;
    int n = ::poll(fds, nfds, static_cast<int>(std::min<int64_t>(left, INT32_MAX)));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) return false;
    if (nfds == 2 && fds[1].revents != 0) return false;  // Shutdown()
    // Readable, or hung up / error: process_request sees EOF or the error and ends the loop.
    return fds[0].revents != 0;
  }
  return false;
}

bool TlsConnectionServer::process_and_close_socket(socket_t sock) {
  struct Counted {
    std::atomic<int>& open;
    explicit Counted(std::atomic<int>& o) : open(o) { ++open; }
    ~Counted() { --open; }
  } counted(open_);

  timeval rcv = ToTimeval(options_.read_timeout);
  timeval snd = ToTimeval(options_.write_timeout);
  ::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof(rcv));
  ::setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof(snd));
  int one = 1;
  ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

  bool ok = false;
  std::unique_ptr<SSL, SslFree> ssl(SSL_new(ssl_context()));
  if (ssl && SSL_set_fd(ssl.get(), sock) == 1 && !shutting_down_.load()) {
    // Blocking handshake; SO_RCVTIMEO bounds each wait for the client.
    if (SSL_accept(ssl.get()) == 1) {
      TlsStream stream(sock, ssl.get(), options_);
      size_t left = std::max<size_t>(1, options_.keep_alive_max_requests);
      SSL* raw = ssl.get();
      while (left > 0 && WaitForRequest(sock, raw)) {
        const bool close_connection = left == 1 || shutting_down_.load();
        bool connection_closed = false;
        ok = process_request(stream, close_connection, connection_closed,
                             [raw](httplib::Request& req) { req.ssl = raw; });
        ok = stream.Flush() && ok;
        if (!ok || connection_closed || close_connection) break;
        --left;
      }
      if (ok) SSL_shutdown(ssl.get());  // close_notify on an orderly end
    }
  }
  ERR_clear_error();
  ssl.reset();
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace aw::server
