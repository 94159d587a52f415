#include "kube/transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "util/io/file.h"
#include "util/io/log.h"
#include "util/io/mutex.h"
#include "util/io/openssl_errors.h"
#include "util/text.h"

namespace aw::kube {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxErrorBody = 64 * 1024;
// Idle keep-alive connections kept for reuse. Must cover the callers' concurrency (the resolver's
// patch workers, default 32, plus events and leases): a call that finds no idle connection does a
// full TCP + TLS handshake, which under a burst costs much of the process's CPU.
constexpr size_t kMaxIdle = 64;
// A pooled connection idle this long is closed instead of reused. kube-apiserver closes
// connections idle for 90 s (http.Server.IdleTimeout, and the HTTP/2 idle timeout, in
// k8s.io/apiserver/pkg/server/secure_serving.go, "matches http.DefaultTransport keep-alive
// timeout"); load balancers in front of it commonly close after 60 s. Half of the former and
// below the latter, so that the client, not the server, ends an idle connection.
constexpr std::chrono::seconds kMaxIdleAge{45};
// Bounds of one response: the status line and headers, and a non-streamed body.
constexpr size_t kMaxHeaderBytes = 1 << 20;
constexpr size_t kMaxBody = 256u << 20;
// Poll slices, so that a Stop() before the socket exists or while connecting is seen promptly.
constexpr std::chrono::milliseconds kPollSlice{50};

struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};

// Parses every certificate in a PEM bundle.
bool ParseCerts(const std::string& pem, std::vector<std::unique_ptr<X509, X509Deleter>>* out,
                std::string* err) {
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  while (true) {
    X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (!x) break;
    out->emplace_back(x);
  }
  ERR_clear_error();
  if (out->empty()) {
    *err = "no PEM certificate found";
    return false;
  }
  return true;
}

// Bearer token, from a static string or a file re-read when it changes.
class TokenSource {
 public:
  TokenSource(std::string token, std::string file)
      : token_(std::move(token)), file_(std::move(file)) {}

  std::string Get(bool force_reload) {
    if (file_.empty()) return token_;
    MutexLock lk(mu_);
    auto now = Clock::now();
    if (force_reload || !loaded_ || now - last_check_ >= std::chrono::seconds(1)) {
      last_check_ = now;
      struct stat st {};
      bool changed = true;
      if (::stat(file_.c_str(), &st) == 0) {
        changed = !loaded_ || force_reload || st.st_mtim.tv_sec != mtime_.tv_sec ||
                  st.st_mtim.tv_nsec != mtime_.tv_nsec || st.st_size != size_ || st.st_ino != ino_;
      }
      if (changed) {
        StatusOr<std::string> t = util::ReadFile(file_);
        if (t.ok()) {
          std::string v = *t;
          while (!v.empty() && (v.back() == '\n' || v.back() == '\r' || v.back() == ' '))
            v.pop_back();
          if (loaded_ && v != cached_)
            log::info("kube: bearer token file changed; using the new token", {{"file", file_}});
          cached_ = std::move(v);
          loaded_ = true;
          mtime_ = st.st_mtim;
          size_ = st.st_size;
          ino_ = st.st_ino;
        } else if (!loaded_) {
          log::warn("kube: cannot read bearer token file",
                    {{"file", file_}, {"error", t.status().message()}});
        }
      }
    }
    return cached_;
  }
  bool FromFile() const { return !file_.empty(); }

 private:
  std::string token_;
  std::string file_;
  Mutex mu_;  // the token file's cached state: Get is called from every caller's thread
  bool loaded_ GUARDED_BY(mu_) = false;
  std::string cached_ GUARDED_BY(mu_);
  Clock::time_point last_check_ GUARDED_BY(mu_){};
  struct timespec mtime_ GUARDED_BY(mu_) {};
  off_t size_ GUARDED_BY(mu_) = 0;
  ino_t ino_ GUARDED_BY(mu_) = 0;
};

enum class Stage { kResolve, kConnect, kTlsHandshake, kWrite, kRead };

const char* StageName(Stage s) {
  switch (s) {
    case Stage::kResolve:
      return "resolve";
    case Stage::kConnect:
      return "connect";
    case Stage::kTlsHandshake:
      return "TLS handshake";
    case Stage::kWrite:
      return "write";
    case Stage::kRead:
      return "read";
  }
  return "?";
}

// Why one attempt failed.
struct Failure {
  Stage stage = Stage::kConnect;
  std::string detail;   // strerror text, OpenSSL errors, "closed by the server", "timed out ..."
  bool closed = false;  // the peer closed or reset the connection (EOF, close_notify, RST, EPIPE)
  bool timed_out = false;
  bool stopped = false;  // Stop() was called: the call was cancelled or the transport shut down
};

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

std::string SockaddrString(const sockaddr* sa) {
  char ip[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
    port = ntohs(in->sin_port);
    return fmt::format("{}:{}", ip, port);
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
    port = ntohs(in6->sin6_port);
  }
  return fmt::format("[{}]:{}", ip, port);
}

bool IsClosedErrno(int e) { return e == ECONNRESET || e == EPIPE || e == ECONNABORTED; }

std::string Millis(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{}s", d.count() / 1000);
  return fmt::format("{}ms", d.count());
}

std::string IdleFor(Clock::duration d) {
  return fmt::format("{:.1f}s", std::chrono::duration<double>(d).count());
}

// One TLS connection to the API server. Used by one thread at a time, except Stop(), which any
// thread may call at any time (it shuts the socket down, so that a blocked wait returns at once).
class Conn {
 public:
  Conn() = default;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  ~Conn() {
    if (ssl_ && clean_) {
      ERR_clear_error();
      SSL_shutdown(ssl_);  // best effort close_notify; the socket is non-blocking
      ERR_clear_error();
    }
    if (ssl_) SSL_free(ssl_);
    MutexLock lk(mu_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  void Stop() {
    MutexLock lk(mu_);
    stopped_.store(true);
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }

  // Resolves, connects (trying every address) and completes the TLS handshake, all before
  // `deadline`.
  // `ctx` null: plain TCP (no TLS). `server_name`: the name sent as SNI and verified in the
  // server's certificate ("" = `host`).
  std::optional<Failure> Open(const std::string& host, int port, SSL_CTX* ctx, bool verify,
                              std::chrono::milliseconds timeout,
                              const std::string& server_name = {}) {
    auto deadline = Clock::now() + timeout;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    std::string service = std::to_string(port);
    int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
    if (rc != 0) {
      Failure f{Stage::kResolve,
                fmt::format("cannot resolve {}: {}", host,
                            rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc))};
      return f;
    }
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addrs(res, &freeaddrinfo);
    std::string errors;
    Failure last{Stage::kConnect, ""};
    bool connected = false;
    for (addrinfo* ai = res; ai && !connected; ai = ai->ai_next) {
      std::string addr = SockaddrString(ai->ai_addr);
      int fd =
          ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0) {
        errors +=
            fmt::format("{}{}: socket: {}", errors.empty() ? "" : "; ", addr, std::strerror(errno));
        continue;
      }
      {
        MutexLock lk(mu_);
        fd_ = fd;
      }
      if (stopped_.load()) return StoppedFailure(Stage::kConnect);
      int err = 0;
      if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
          if (auto f = Wait(POLLOUT, deadline, Stage::kConnect, timeout)) {
            if (f->stopped) return f;
            last = *f;
            errors += fmt::format("{}{}: {}", errors.empty() ? "" : "; ", addr, f->detail);
            CloseFd();
            continue;
          }
          socklen_t len = sizeof(err);
          if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
      }
      if (err != 0) {
        errors += fmt::format("{}{}: {}", errors.empty() ? "" : "; ", addr, std::strerror(err));
        CloseFd();
        if (stopped_.load()) return StoppedFailure(Stage::kConnect);
        continue;
      }
      peer_ = addr;
      connected = true;
    }
    if (!connected) {
      last.stage = Stage::kConnect;
      last.detail = errors.empty() ? "no address" : errors;
      return last;
    }
    int one = 1;
    setsockopt(fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (ctx == nullptr) {
      plain_ = true;
      return std::nullopt;
    }
    const std::string& name = server_name.empty() ? host : server_name;

    ssl_ = SSL_new(ctx);
    if (!ssl_ || SSL_set_fd(ssl_, fd()) != 1) {
      Failure f{Stage::kTlsHandshake, "cannot set up TLS: " + util::OpenSslErrors()};
      return f;
    }
    bool ip = IsIpLiteral(name);
    if (!ip) SSL_set_tlsext_host_name(ssl_, name.c_str());
    if (verify) {
      int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), name.c_str())
                  : SSL_set1_host(ssl_, name.c_str());
      if (ok != 1) {
        Failure f{Stage::kTlsHandshake,
                  "cannot set the expected server name: " + util::OpenSslErrors()};
        return f;
      }
    }
    auto f = SslOpN([&] { return SSL_connect(ssl_); }, Stage::kTlsHandshake, deadline, timeout);
    if (f) {
      long v = SSL_get_verify_result(ssl_);
      if (verify && v != X509_V_OK) {
        f->detail += fmt::format(" (server certificate: {})", X509_verify_cert_error_string(v));
      }
      return f;
    }
    clean_ = true;
    return std::nullopt;
  }

  // Writes all of `data`; *written counts the bytes OpenSSL accepted.
  std::optional<Failure> WriteAll(std::string_view data, std::chrono::milliseconds timeout,
                                  size_t* written) {
    while (*written < data.size()) {
      size_t n = std::min<size_t>(data.size() - *written, 1 << 20);
      const char* p = data.data() + *written;
      int r = 0;
      if (plain_) {
        auto f = PlainOp([&] { return r = static_cast<int>(::send(fd(), p, n, MSG_NOSIGNAL)); },
                         POLLOUT, Stage::kWrite, Clock::now() + timeout, timeout);
        if (f) return f;
        *written += static_cast<size_t>(r);
        continue;
      }
      auto f = SslOpN([&] { return r = SSL_write(ssl_, p, static_cast<int>(n)); }, Stage::kWrite,
                      Clock::now() + timeout, timeout);
      if (f) return f;
      *written += static_cast<size_t>(r);
    }
    return std::nullopt;
  }

  // Reads what is available (at least one byte) and appends it to `buf`.
  std::optional<Failure> ReadSome(std::string* buf, std::chrono::milliseconds timeout) {
    char tmp[16384];
    int r = 0;
    if (plain_) {
      auto f = PlainOp([&] { return r = static_cast<int>(::recv(fd(), tmp, sizeof(tmp), 0)); },
                       POLLIN, Stage::kRead, Clock::now() + timeout, timeout);
      if (f) return f;
      buf->append(tmp, static_cast<size_t>(r));
      received_ += static_cast<size_t>(r);
      return std::nullopt;
    }
    auto f = SslOpN([&] { return r = SSL_read(ssl_, tmp, sizeof(tmp)); }, Stage::kRead,
                    Clock::now() + timeout, timeout);
    if (f) return f;
    buf->append(tmp, static_cast<size_t>(r));
    received_ += static_cast<size_t>(r);
    return std::nullopt;
  }

  // True when the idle connection still looks open: nothing to read, no hang-up, no error.
  bool IdleAndOpen() const {
    if (fd() < 0 || (!plain_ && (!ssl_ || SSL_pending(ssl_) > 0))) return false;
    pollfd p{fd(), POLLIN | POLLRDHUP, 0};
    int r = ::poll(&p, 1, 0);
    return r == 0;
  }

  void MarkUnclean() { clean_ = false; }
  const std::string& peer() const { return peer_; }
  size_t received() const { return received_; }
  void ResetReceived() { received_ = 0; }
  Clock::time_point idle_since{};
  int requests = 0;

 private:
  void CloseFd() {
    MutexLock lk(mu_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  Failure StoppedFailure(Stage stage) const {
    Failure f{stage, "stopped"};
    f.stopped = true;
    return f;
  }

  // Waits until the socket is ready for `events`, the deadline passes or Stop() is called.
  std::optional<Failure> Wait(short events, Clock::time_point deadline, Stage stage,
                              std::chrono::milliseconds timeout_for_message = {}) {
    while (true) {
      if (stopped_.load()) return StoppedFailure(stage);
      auto now = Clock::now();
      if (now >= deadline) {
        Failure f{stage, timeout_for_message.count() > 0
                             ? "timed out after " + Millis(timeout_for_message)
                             : "timed out"};
        f.timed_out = true;
        return f;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) +
                  std::chrono::milliseconds(1);
      pollfd p{fd(), events, 0};
      int r = ::poll(&p, 1, static_cast<int>(std::min(left, kPollSlice).count()));
      if (r < 0 && errno != EINTR) {
        Failure f{stage, std::string("poll: ") + std::strerror(errno)};
        return f;
      }
      if (r > 0) return std::nullopt;  // ready, hung up or in error: the next operation tells which
    }
  }

  // Plain TCP: runs a non-blocking send/recv until it moves a byte (returns > 0), fails, finds
  // the peer closed (recv returns 0) or the deadline passes.
  template <typename Op>
  std::optional<Failure> PlainOp(Op op, short events, Stage stage, Clock::time_point deadline,
                                 std::chrono::milliseconds timeout) {
    while (true) {
      errno = 0;
      int r = op();
      if (r > 0) return std::nullopt;
      const int err = errno;
      if (r < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)) {
        if (auto f = Wait(events, deadline, stage, timeout)) return f;
        continue;
      }
      if (stopped_.load()) return StoppedFailure(stage);
      Failure f{stage, ""};
      if (r == 0) {
        f.detail = "connection closed by the server (EOF)";
        f.closed = true;
      } else {
        f.detail = std::strerror(err);
        f.closed = IsClosedErrno(err);
      }
      return f;
    }
  }

  // Runs a non-blocking OpenSSL operation to completion (returns > 0), failure or the deadline.
  template <typename Op>
  std::optional<Failure> SslOpN(Op op, Stage stage, Clock::time_point deadline,
                                std::chrono::milliseconds timeout) {
    while (true) {
      ERR_clear_error();
      errno = 0;
      int r = op();
      if (r > 0) return std::nullopt;
      int saved_errno = errno;
      int e = SSL_get_error(ssl_, r);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        if (auto f = Wait(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline, stage, timeout))
          return f;
        continue;
      }
      clean_ = false;
      if (stopped_.load()) {
        ERR_clear_error();
        return StoppedFailure(stage);
      }
      Failure f{stage, ""};
      std::string queued = util::OpenSslErrors();
      if (e == SSL_ERROR_ZERO_RETURN) {
        f.detail = "connection closed by the server (TLS close_notify)";
        f.closed = true;
      } else if (e == SSL_ERROR_SYSCALL) {
        if (saved_errno != 0) {
          f.detail = std::strerror(saved_errno);
          f.closed = IsClosedErrno(saved_errno);
        } else {
          f.detail = "connection closed by the server (EOF)";
          f.closed = true;
        }
        if (!queued.empty()) f.detail += " (" + queued + ")";
      } else if (e == SSL_ERROR_SSL) {
        f.detail = queued.empty() ? "TLS error" : queued;
        // OpenSSL 3 reports an EOF without close_notify as an SSL error.
        if (queued.find("unexpected eof") != std::string::npos) {
          f.detail =
              "connection closed by the server (EOF without TLS close_notify: " + queued + ")";
          f.closed = true;
        }
        if (saved_errno != 0 && IsClosedErrno(saved_errno)) {
          f.detail += std::string(" (") + std::strerror(saved_errno) + ")";
          f.closed = true;
        }
      } else {
        f.detail = fmt::format("OpenSSL error {}{}", e, queued.empty() ? "" : ": " + queued);
      }
      return f;
    }
  }

  // The socket is written (opened, closed) only by the thread that owns the connection, under
  // mu_, and read without it by that thread (fd()); Stop() from another thread reads it under mu_,
  // so it never shuts down a descriptor number that was closed and reused.
  int fd() const NO_THREAD_SAFETY_ANALYSIS { return fd_; }  // owner thread only
  mutable Mutex mu_;
  int fd_ GUARDED_BY(mu_) = -1;
  std::atomic<bool> stopped_{false};
  SSL* ssl_ = nullptr;
  bool plain_ = false;  // no TLS on this connection (ClientConfig::plain_http)
  bool clean_ = false;  // a close_notify may be sent on close
  std::string peer_;
  size_t received_ = 0;  // plaintext bytes read since ResetReceived()
};

bool IContains(std::string_view hay, std::string_view needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                        [](char x, char y) { return std::tolower(x) == std::tolower(y); });
  return it != hay.end();
}

std::string_view TrimWs(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::optional<uint64_t> ParseUnsigned(std::string_view s, int base) {
  if (s.empty() || s.size() > 16) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (base == 16 && c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return std::nullopt;
    v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  return v;
}

// Reads one HTTP/1.1 response from a connection. The body goes to `sink` piece by piece (return
// false to stop reading: the connection is then not reusable).
class ResponseReader {
 public:
  using Sink = std::function<bool(std::string_view)>;
  ResponseReader(Conn& c, std::chrono::milliseconds timeout) : c_(c), timeout_(timeout) {}

  struct Head {
    int status = 0;
    bool http11 = false;
    bool close = false;
    bool chunked = false;
    std::optional<uint64_t> content_length;
    std::string retry_after;
  };

  // Reads the status line and headers (skipping 1xx interim responses).
  std::optional<Failure> ReadHead(Head* h) {
    while (true) {
      *h = Head{};
      std::string line;
      if (auto f = ReadLine(&line)) return f;
      // "HTTP/1.1 200 OK"
      if (line.size() < 12 || line.compare(0, 5, "HTTP/") != 0 || line[8] != ' ') {
        return Malformed("bad status line \"" + Printable(line) + "\"");
      }
      h->http11 = line.compare(5, 3, "1.1") == 0;
      auto code = ParseUnsigned(std::string_view(line).substr(9, 3), 10);
      if (!code || *code < 100 || *code > 999)
        return Malformed("bad status line \"" + Printable(line) + "\"");
      h->status = static_cast<int>(*code);
      size_t header_bytes = line.size();
      while (true) {
        if (auto f = ReadLine(&line)) return f;
        header_bytes += line.size() + 2;
        if (header_bytes > kMaxHeaderBytes) return Malformed("response headers over 1 MiB");
        if (line.empty()) break;
        auto colon = line.find(':');
        if (colon == std::string::npos)
          return Malformed("bad header line \"" + Printable(line) + "\"");
        std::string_view name = TrimWs(std::string_view(line).substr(0, colon));
        std::string_view value = TrimWs(std::string_view(line).substr(colon + 1));
        if (util::EqualsIgnoreCase(name, "Content-Length")) {
          auto n = ParseUnsigned(value, 10);
          if (!n) return Malformed("bad Content-Length \"" + Printable(std::string(value)) + "\"");
          h->content_length = n;
        } else if (util::EqualsIgnoreCase(name, "Transfer-Encoding")) {
          if (IContains(value, "chunked")) h->chunked = true;
        } else if (util::EqualsIgnoreCase(name, "Connection")) {
          if (IContains(value, "close")) h->close = true;
        } else if (util::EqualsIgnoreCase(name, "Retry-After")) {
          h->retry_after = std::string(value);
        }
      }
      if (h->status >= 100 && h->status < 200)
        continue;  // 100 Continue etc.: the real answer follows
      return std::nullopt;
    }
  }

  // Reads the body framed as `h` says. *reusable: the connection can carry another request.
  std::optional<Failure> ReadBody(const Head& h, const Sink& sink, bool* reusable) {
    *reusable = false;
    bool more = true;
    if (h.status == 204 || h.status == 304) {
      // no body
    } else if (h.chunked) {
      while (more) {
        std::string line;
        if (auto f = ReadLine(&line)) return f;
        std::string_view size = TrimWs(std::string_view(line).substr(0, line.find(';')));
        auto n = ParseUnsigned(size, 16);
        if (!n) return Malformed("bad chunk size \"" + Printable(line) + "\"");
        if (*n == 0) {
          while (true) {  // trailers
            if (auto f = ReadLine(&line)) return f;
            if (line.empty()) break;
          }
          break;
        }
        if (auto f = ReadExactly(*n, sink, &more)) return f;
        if (!more) return std::nullopt;
        if (auto f = ReadLine(&line)) return f;
        if (!line.empty()) return Malformed("chunk not followed by CRLF");
      }
    } else if (h.content_length) {
      if (auto f = ReadExactly(*h.content_length, sink, &more)) return f;
      if (!more) return std::nullopt;
    } else {
      // Delimited by the end of the connection.
      while (more) {
        if (pos_ < buf_.size()) {
          more = sink(std::string_view(buf_).substr(pos_));
          pos_ = buf_.size();
          continue;
        }
        buf_.clear();
        pos_ = 0;
        auto f = c_.ReadSome(&buf_, timeout_);
        if (f && f->closed) return std::nullopt;
        if (f) return f;
      }
      return std::nullopt;
    }
    *reusable = more && h.http11 && !h.close && pos_ == buf_.size();
    return std::nullopt;
  }

 private:
  Failure Malformed(std::string what) const {
    Failure f{Stage::kRead, "malformed response: " + what};
    return f;
  }

  static std::string Printable(const std::string& s) {
    std::string out;
    for (char c : s.substr(0, 80)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
    return out;
  }

  // Makes at least `n` unread bytes available, or fails.
  std::optional<Failure> Fill() {
    if (pos_ > 0 && pos_ == buf_.size()) {
      buf_.clear();
      pos_ = 0;
    } else if (pos_ > (1 << 16)) {
      buf_.erase(0, pos_);
      pos_ = 0;
    }
    return c_.ReadSome(&buf_, timeout_);
  }

  std::optional<Failure> ReadLine(std::string* line) {
    while (true) {
      auto nl = buf_.find('\n', pos_);
      if (nl != std::string::npos) {
        size_t end = nl;
        if (end > pos_ && buf_[end - 1] == '\r') --end;
        line->assign(buf_, pos_, end - pos_);
        pos_ = nl + 1;
        return std::nullopt;
      }
      if (buf_.size() - pos_ > kMaxHeaderBytes) return Malformed("line over 1 MiB");
      if (auto f = Fill()) return f;
    }
  }

  std::optional<Failure> ReadExactly(uint64_t n, const Sink& sink, bool* more) {
    while (n > 0 && *more) {
      if (pos_ == buf_.size()) {
        if (auto f = Fill()) return f;
      }
      size_t take = static_cast<size_t>(std::min<uint64_t>(n, buf_.size() - pos_));
      *more = sink(std::string_view(buf_).substr(pos_, take));
      pos_ += take;
      n -= take;
    }
    return std::nullopt;
  }

  Conn& c_;
  std::chrono::milliseconds timeout_;
  std::string buf_;
  size_t pos_ = 0;
};

}  // namespace

void Cancellation::Cancel() {
  auto deadline = Clock::now() + std::chrono::milliseconds(1500);
  {
    MutexLock lk(mu_);
    cancelled_ = true;
  }
  // The call may be between "registered" and "socket open": keep stopping for a short while.
  while (true) {
    {
      MutexLock lk(mu_);
      if (!stopper_) return;
      stopper_();
    }
    if (Clock::now() > deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool Cancellation::cancelled() const {
  MutexLock lk(mu_);
  return cancelled_;
}

void Cancellation::Reset() {
  MutexLock lk(mu_);
  cancelled_ = false;
}

class HttpsTransport final : public Transport {
 public:
  explicit HttpsTransport(const ClientConfig& c) : cfg_(c), tokens_(c.token, c.token_file) {
    bool v6 = cfg_.host.find(':') != std::string::npos;
    std::string h = v6 ? "[" + cfg_.host + "]" : cfg_.host;
    const int default_port = cfg_.plain_http ? 80 : 443;
    host_header_ = cfg_.port == default_port ? h : fmt::format("{}:{}", h, cfg_.port);
  }

  ~HttpsTransport() override {
    {
      MutexLock lk(mu_);
      idle_.clear();
    }
    if (ctx_) SSL_CTX_free(ctx_);
  }

  bool Init(std::string* err) {
    if (cfg_.plain_http) return true;  // no TLS context: every connection is plain TCP
    std::vector<std::unique_ptr<X509, X509Deleter>> ca;
    if (!cfg_.ca_pem.empty() && !cfg_.insecure_skip_tls_verify) {
      if (!ParseCerts(cfg_.ca_pem, &ca, err)) {
        *err = "certificate authority: " + *err;
        return false;
      }
    }
    std::unique_ptr<X509, X509Deleter> client_cert;
    std::unique_ptr<EVP_PKEY, PkeyDeleter> client_key;
    if (!cfg_.client_cert_pem.empty()) {
      std::vector<std::unique_ptr<X509, X509Deleter>> certs;
      if (!ParseCerts(cfg_.client_cert_pem, &certs, err)) {
        *err = "client certificate: " + *err;
        return false;
      }
      client_cert = std::move(certs.front());
      std::unique_ptr<BIO, BioDeleter> bio(BIO_new_mem_buf(
          cfg_.client_key_pem.data(), static_cast<int>(cfg_.client_key_pem.size())));
      EVP_PKEY* k = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
      if (!k) {
        *err = "client key: " + util::OpenSslErrors("unknown OpenSSL error");
        return false;
      }
      client_key.reset(k);
      if (X509_check_private_key(client_cert.get(), client_key.get()) != 1) {
        ERR_clear_error();
        *err = "client key does not match the client certificate";
        return false;
      }
    }
    // One context for every connection (creating one per connection is costly in OpenSSL 3).
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (!ctx_) {
      *err = "TLS context: " + util::OpenSslErrors("unknown OpenSSL error");
      return false;
    }
    SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    static const unsigned char kAlpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
    SSL_CTX_set_alpn_protos(ctx_, kAlpn, sizeof(kAlpn));
    verify_ = !cfg_.insecure_skip_tls_verify;
    if (verify_) {
      SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
      if (!ca.empty()) {
        // Trust exactly the configured CA, as client-go does: no system roots.
        X509_STORE* store = SSL_CTX_get_cert_store(ctx_);
        for (auto& x : ca) {
          if (X509_STORE_add_cert(store, x.get()) != 1) ERR_clear_error();  // duplicates are fine
        }
      } else if (SSL_CTX_set_default_verify_paths(ctx_) != 1) {
        *err = "system trust store: " + util::OpenSslErrors("unknown OpenSSL error");
        return false;
      }
    } else {
      SSL_CTX_set_verify(ctx_, SSL_VERIFY_NONE, nullptr);
    }
    if (client_cert) {
      if (SSL_CTX_use_certificate(ctx_, client_cert.get()) != 1 ||
          SSL_CTX_use_PrivateKey(ctx_, client_key.get()) != 1) {
        *err = "client certificate: " + util::OpenSslErrors("unknown OpenSSL error");
        return false;
      }
    }
    ERR_clear_error();
    return true;
  }

  Result<HttpResponse> Do(const HttpRequest& req) override { return Run(req, nullptr); }

  Result<HttpResponse> Stream(const HttpRequest& req,
                              const std::function<bool(std::string_view)>& on_data) override {
    return Run(req, &on_data);
  }

  void Shutdown() override {
    shutdown_.store(true);
    std::vector<std::unique_ptr<Conn>> idle;
    {
      // A call registers its connection under mu_ and then re-checks shutdown_, so one pass
      // stops every call in flight; Stop() is sticky, so a connection still opening stops too.
      MutexLock lk(mu_);
      idle.swap(idle_);
      for (auto* c : in_flight_) c->Stop();
    }
  }
  bool IsShutdown() const override { return shutdown_.load(); }

  TransportCounters counters() const override {
    TransportCounters c;
    c.connections_opened = opened_.load();
    c.connections_reused = reused_.load();
    c.stale_discarded = stale_.load();
    c.expired_discarded = expired_.load();
    c.stale_retries = retries_.load();
    return c;
  }

 private:
  // Everything one attempt learned.
  struct Attempt {
    std::optional<HttpResponse> response;  // set on success
    std::optional<Failure> failure;        // set on failure
    bool reused = false;
    Clock::duration idle{};   // how long a reused connection had been idle
    int request_on_conn = 0;  // 1 for the first request on a connection
    std::string peer;
    size_t written = 0, total = 0, received = 0;
  };

  // A pooled connection that still looks usable, or nullptr. Drops expired and closed ones.
  std::unique_ptr<Conn> TakeIdle() {
    std::vector<std::unique_ptr<Conn>> drop;
    std::unique_ptr<Conn> c;
    auto now = Clock::now();
    {
      MutexLock lk(mu_);
      // Oldest first: the pool is used last in, first out.
      size_t expired = 0;
      while (expired < idle_.size() && now - idle_[expired]->idle_since >= kMaxIdleAge) ++expired;
      for (size_t i = 0; i < expired; ++i) drop.push_back(std::move(idle_[i]));
      idle_.erase(idle_.begin(), idle_.begin() + static_cast<std::ptrdiff_t>(expired));
      expired_ += expired;
      while (!idle_.empty() && !c) {
        c = std::move(idle_.back());
        idle_.pop_back();
        if (!c->IdleAndOpen()) {
          ++stale_;
          log::debug("kube: dropping a pooled API connection the server closed",
                     {{"peer", c->peer()}, {"idle", IdleFor(now - c->idle_since)}});
          c->MarkUnclean();
          drop.push_back(std::move(c));
        }
      }
    }
    return c;  // `drop` closes outside the lock
  }

  void Release(std::unique_ptr<Conn> c) {
    c->idle_since = Clock::now();
    MutexLock lk(mu_);
    if (shutdown_.load() || idle_.size() >= kMaxIdle) return;  // closes `c`
    idle_.push_back(std::move(c));
  }

  std::string RequestHead(const HttpRequest& req, const std::string& token) const {
    std::string h = fmt::format(
        "{} {}{} HTTP/1.1\r\nHost: {}\r\nAccept: application/json\r\n"
        "User-Agent: allocating-webhook\r\n",
        req.method, cfg_.base_path, req.path, host_header_);
    if (!token.empty()) h += "Authorization: Bearer " + token + "\r\n";
    if (!req.content_type.empty()) h += "Content-Type: " + req.content_type + "\r\n";
    if (req.method != "GET" || !req.body.empty())
      h += fmt::format("Content-Length: {}\r\n", req.body.size());
    h += "\r\n";
    return h;
  }

  // One request on one connection (pooled unless `fresh`).
  Attempt RunAttempt(const HttpRequest& req, const std::function<bool(std::string_view)>* on_data,
                     const std::string& token, bool fresh, bool* stopped_by_caller) {
    Attempt a;
    bool streaming = on_data != nullptr;
    std::unique_ptr<Conn> conn;
    if (!streaming && !fresh) conn = TakeIdle();
    a.reused = conn != nullptr;
    if (conn) {
      a.idle = Clock::now() - conn->idle_since;
      ++reused_;
    } else {
      conn = std::make_unique<Conn>();
    }
    Conn* raw = conn.get();
    {
      MutexLock lk(mu_);
      in_flight_.insert(raw);
    }
    auto unregister = [&] {
      MutexLock lk(mu_);
      in_flight_.erase(raw);
    };
    bool cancel_registered = false;
    if (req.cancel) {
      MutexLock lk(req.cancel->mu_);
      if (req.cancel->cancelled_) {
        unregister();
        a.failure = Failure{Stage::kConnect, "cancelled"};
        a.failure->stopped = true;
        return a;
      }
      req.cancel->stopper_ = [raw] { raw->Stop(); };
      cancel_registered = true;
    }
    auto finish = [&]() {
      if (cancel_registered) {
        MutexLock lk(req.cancel->mu_);
        req.cancel->stopper_ = nullptr;
      }
      unregister();
    };
    if (shutdown_.load()) raw->Stop();

    if (!a.reused) {
      auto connect = std::min<std::chrono::milliseconds>(req.timeout, std::chrono::seconds(10));
      if (auto f = raw->Open(cfg_.host, cfg_.port, ctx_, verify_, connect, cfg_.tls_server_name)) {
        a.failure = std::move(f);
        a.peer = raw->peer();
        finish();
        return a;
      }
      ++opened_;
    }
    a.peer = raw->peer();
    a.request_on_conn = ++raw->requests;
    raw->ResetReceived();

    std::string head = RequestHead(req, token);
    a.total = head.size() + req.body.size();
    if (req.body.empty() || req.body.size() < 64 * 1024) {
      std::string all = head + req.body;
      a.failure = raw->WriteAll(all, req.timeout, &a.written);
    } else {
      size_t w = 0;
      a.failure = raw->WriteAll(head, req.timeout, &w);
      a.written = w;
      if (!a.failure) {
        size_t wb = 0;
        a.failure = raw->WriteAll(req.body, req.timeout, &wb);
        a.written += wb;
      }
    }
    if (a.failure) {
      finish();
      return a;
    }

    HttpResponse out;
    ResponseReader reader(*raw, req.timeout);
    ResponseReader::Head h;
    if (auto f = reader.ReadHead(&h)) {
      a.failure = std::move(f);
      a.received = raw->received();
      finish();
      return a;
    }
    out.status = h.status;
    out.retry_after = h.retry_after;
    bool body_to_caller = streaming && out.status >= 200 && out.status < 300;
    bool too_big = false;
    ResponseReader::Sink sink = [&](std::string_view data) {
      if (body_to_caller) {
        if (shutdown_.load() || (req.cancel && req.cancel->cancelled())) return false;
        if (!(*on_data)(data)) {
          *stopped_by_caller = true;
          return false;
        }
        return true;
      }
      size_t limit = streaming ? kMaxErrorBody : kMaxBody;
      if (out.body.size() + data.size() > limit) {
        out.body.append(data.substr(0, limit - out.body.size()));
        too_big = !streaming;
        return streaming;  // an error body beyond the bound is read and dropped
      }
      out.body.append(data);
      return true;
    };
    bool reusable = false;
    auto f = reader.ReadBody(h, sink, &reusable);
    a.received = raw->received();
    finish();
    if (f) {
      a.failure = std::move(f);
      return a;
    }
    if (too_big) {
      a.failure = Failure{Stage::kRead, fmt::format("response body over {} MiB", kMaxBody >> 20)};
      return a;
    }
    if (reusable && !streaming)
      Release(std::move(conn));
    else
      conn->MarkUnclean();
    a.response = std::move(out);
    return a;
  }

  static std::string Describe(const Attempt& a) {
    std::string conn = a.reused ? fmt::format("a reused connection (idle {}, request {} on it)",
                                              IdleFor(a.idle), a.request_on_conn)
                                : "a new connection";
    std::string to = a.peer.empty() ? "" : " to " + a.peer;
    std::string s = fmt::format("{} failed on {}{}: {}", StageName(a.failure->stage), conn, to,
                                a.failure->detail);
    if (a.failure->stage == Stage::kWrite || a.failure->stage == Stage::kRead) {
      s += fmt::format(" ({} of {} request bytes written, {} response bytes received)", a.written,
                       a.total, a.received);
    }
    return s;
  }

  Result<HttpResponse> Run(const HttpRequest& req,
                           const std::function<bool(std::string_view)>* on_data) {
    bool retried_auth = false;
    while (true) {
      auto r = RunOnce(req, on_data, retried_auth);
      // A rotated token: re-read the file and retry once.
      if (r.ok() && r->status == 401 && tokens_.FromFile() && !retried_auth) {
        retried_auth = true;
        continue;
      }
      return r;
    }
  }

  Result<HttpResponse> RunOnce(const HttpRequest& req,
                               const std::function<bool(std::string_view)>* on_data,
                               bool force_token) {
    if (shutdown_.load()) return TransportError("client is shut down", true);
    static const std::set<std::string> kMethods = {"GET", "POST", "PUT", "PATCH", "DELETE"};
    if (!kMethods.count(req.method)) return TransportError("unsupported method " + req.method);
    if (on_data && req.method != "GET") return TransportError("streaming supports GET only");
    std::string token = tokens_.Get(force_token);
    std::string what = fmt::format("{} {}:{}{}{}", req.method, cfg_.host, cfg_.port, cfg_.base_path,
                                   StripQuery(req.path));
    std::string first;
    for (int attempt = 0; attempt < 2; ++attempt) {
      bool stopped_by_caller = false;
      Attempt a = RunAttempt(req, on_data, token, attempt > 0, &stopped_by_caller);
      bool cancelled = req.cancel && req.cancel->cancelled();
      if (a.response) {
        if (shutdown_.load() && !stopped_by_caller && on_data)
          return TransportError("client is shut down", true);
        if (cancelled && on_data && !stopped_by_caller)
          return TransportError("call cancelled", true);
        return std::move(*a.response);
      }
      if (shutdown_.load()) return TransportError("client is shut down", true);
      if (cancelled || a.failure->stopped) return TransportError("call cancelled", true);
      const Failure& f = *a.failure;
      bool stale = a.reused && f.closed && !f.timed_out && a.received == 0 &&
                   (f.stage == Stage::kWrite || f.stage == Stage::kRead);
      if (attempt == 0 && stale && req.resend_on_closed_connection) {
        // The server closed this idle connection as we sent on it: send again on a new one.
        ++retries_;
        first = Describe(a);
        log::debug("kube: API connection closed by the server; retrying on a new connection",
                   {{"request", what}, {"error", first}});
        continue;
      }
      std::string msg = fmt::format("{}: {}", what, Describe(a));
      if (!first.empty()) msg += "; first attempt: " + first;
      return TransportError(std::move(msg));
    }
    return TransportError(what + ": unreachable");
  }

  static std::string StripQuery(const std::string& p) { return p.substr(0, p.find('?')); }

  ClientConfig cfg_;
  TokenSource tokens_;
  std::string host_header_;
  SSL_CTX* ctx_ = nullptr;
  bool verify_ = true;
  std::atomic<bool> shutdown_{false};
  std::atomic<uint64_t> opened_{0}, reused_{0}, stale_{0}, expired_{0}, retries_{0};
  Mutex mu_;
  std::vector<std::unique_ptr<Conn>> idle_ GUARDED_BY(mu_);  // the pool, most recently used last
  std::set<Conn*> in_flight_ GUARDED_BY(mu_);                // stopped by Shutdown
};

StatusOr<std::unique_ptr<Transport>> NewHttpsTransport(const ClientConfig& config) {
  // OpenSSL writes to sockets with write(2): a connection the server closed (e.g. a pooled
  // keep-alive connection across an API server restart) would raise SIGPIPE and kill the process.
  // Ignore it unless the program installed its own handler.
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  auto t = std::make_unique<HttpsTransport>(config);
  if (std::string err; !t->Init(&err)) return Status::InvalidArgument(std::move(err));
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace aw::kube
