// The HTTPS transport against a real local TLS server (OpenSSL, in this file) that misbehaves on
// cue: keep-alive reuse, a pooled connection the server closed while idle (dropped before use), a
// server that closes a reused connection as the next request arrives (one retry on a new
// connection), resets, partial responses, failures on new connections (never retried), TLS
// verification failures, and the messages that say what failed. No timing assertions. Every call
// is an asynchronous one, awaited (Do, Stream below): the blocking API is not used.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/transport.h"
#include "net/https_client.h"

namespace aw::kube {
namespace {

struct SslFree {
  void operator()(X509* x) const { X509_free(x); }
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};

struct TestCert {
  std::unique_ptr<X509, SslFree> cert;
  std::unique_ptr<EVP_PKEY, SslFree> key;
  std::string cert_pem;
};

// A self-signed ECDSA P-256 certificate for 127.0.0.1 (IP SAN), made in memory.
TestCert MakeCert(const std::string& cn) {
  TestCert c;
  c.key.reset(EVP_EC_gen("P-256"));
  c.cert.reset(X509_new());
  X509* x = c.cert.get();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 7);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, c.key.get());
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  for (auto [nid, value] : {std::pair{NID_subject_alt_name, "IP:127.0.0.1"},
                            std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }
  X509_sign(x, c.key.get(), EVP_sha256());
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, x);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  c.cert_pem.assign(data, static_cast<size_t>(len));
  BIO_free(bio);
  return c;
}

// What the server does with one request (or, for request -1, right after accept).
enum class Act {
  kRespond,            // 200 with "<conn>-<req>:<request body>", keep-alive
  kRespondThenClose,   // the same, then close the connection (an idle close)
  kCloseAfterRequest,  // read the request, close without answering
  kPartialStatusLine,  // "HTTP/1.1 20", then close
  kPartialBody,        // headers announcing 100 bytes, 3 bytes, then close
  kChunked,            // 200, chunked: "a", "bc", "def"
  kHang,               // read the request, never answer
  kHugeHeader,         // 200 with an 8 KiB header
  kBigBody,            // 200 with a 10,000-byte body
  kWatchLines,         // 200, chunked: three line-delimited JSON events split across chunks
  kWatchThenHang,      // 200, chunked: one event, then the stream stays open (a quiet watch)
  kResetOnAccept,      // (request -1 only) RST before the TLS handshake
  kProceed,            // (request -1 only) handshake and serve
};

class TestServer {
 public:
  using Script = std::function<Act(int conn, int req)>;

  TestServer(Script script, const TestCert& cert) : script_(std::move(script)) {
    ctx_.reset(SSL_CTX_new(TLS_server_method()));
    SSL_CTX_use_certificate(ctx_.get(), cert.cert.get());
    SSL_CTX_use_PrivateKey(ctx_.get(), cert.key.get());
    listen_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(listen_, 16), 0);
    socklen_t len = sizeof(a);
    getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }

  ~TestServer() {
    stopping_.store(true);
    ::shutdown(listen_, SHUT_RDWR);
    acceptor_.join();
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : conns_) t.join();
    ::close(listen_);
  }

  int port() const { return port_; }
  int connections() const { return connections_.load(); }
  int requests() const { return requests_.load(); }

  // Blocks until `n` connections have been closed by the server (bounded, so a bug fails).
  bool WaitClosed(int n) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, std::chrono::seconds(20), [&] { return closed_ >= n; });
  }
  bool WaitRequests(int n) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, std::chrono::seconds(20), [&] { return requests_.load() >= n; });
  }

 private:
  void AcceptLoop() {
    while (!stopping_.load()) {
      int fd = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      int conn = connections_++;
      std::lock_guard<std::mutex> lk(mu_);
      open_fds_.push_back(fd);
      conns_.emplace_back([this, fd, conn] { Serve(fd, conn); });
    }
  }

  static bool ReadRequest(SSL* ssl, std::string* body) {
    std::string buf;
    char tmp[4096];
    size_t end;
    while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
      int n = SSL_read(ssl, tmp, sizeof(tmp));
      if (n <= 0) return false;
      buf.append(tmp, static_cast<size_t>(n));
    }
    size_t len = 0;
    auto cl = buf.find("Content-Length: ");
    if (cl != std::string::npos && cl < end) len = std::stoul(buf.substr(cl + 16));
    while (buf.size() < end + 4 + len) {
      int n = SSL_read(ssl, tmp, sizeof(tmp));
      if (n <= 0) return false;
      buf.append(tmp, static_cast<size_t>(n));
    }
    *body = buf.substr(end + 4, len);
    return true;
  }

  static void Write(SSL* ssl, const std::string& s) {
    if (!s.empty()) SSL_write(ssl, s.data(), static_cast<int>(s.size()));
  }

  void Serve(int fd, int conn) {
    if (script_(conn, -1) == Act::kResetOnAccept) {
      linger l{1, 0};
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
      Close(fd, nullptr);
      return;
    }
    SSL* ssl = SSL_new(ctx_.get());
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) != 1) {
      ERR_clear_error();
      Close(fd, ssl);
      return;
    }
    for (int req = 0;; ++req) {
      std::string body;
      if (!ReadRequest(ssl, &body)) break;
      Act act = script_(conn, req);
      {
        std::lock_guard<std::mutex> lk(mu_);
        ++requests_;
      }
      cv_.notify_all();
      std::string payload = std::to_string(conn) + "-" + std::to_string(req) + ":" + body;
      std::string ok = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                       std::to_string(payload.size()) + "\r\n\r\n" + payload;
      if (act == Act::kRespond) {
        Write(ssl, ok);
        continue;
      }
      if (act == Act::kRespondThenClose) Write(ssl, ok);
      if (act == Act::kPartialStatusLine) Write(ssl, "HTTP/1.1 20");
      if (act == Act::kPartialBody) Write(ssl, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc");
      if (act == Act::kChunked) {
        Write(ssl, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        Write(ssl, "1\r\na\r\n");
        Write(ssl, "2;ext=1\r\nbc\r\n");
        Write(ssl, "3\r\ndef\r\n0\r\n\r\n");
        continue;
      }
      if (act == Act::kHugeHeader) {
        Write(ssl, "HTTP/1.1 200 OK\r\nX-Big: " + std::string(8192, 'h') +
                       "\r\nContent-Length: 2\r\n\r\nok");
        continue;
      }
      if (act == Act::kBigBody) {
        Write(ssl, "HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n" + std::string(10000, 'b'));
        continue;
      }
      if (act == Act::kWatchLines) {
        Write(ssl, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        Write(ssl, "10\r\n{\"type\":\"ADDED\"}\r\n");
        Write(ssl, "14\r\n\n{\"type\":\"MODIFIED\"}\r\n");
        Write(ssl, "14\r\n\n{\"type\":\"DELETED\"}\n\r\n0\r\n\r\n");
        continue;
      }
      if (act == Act::kWatchThenHang) {
        Write(ssl, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        Write(ssl, "11\r\n{\"type\":\"ADDED\"}\n\r\n");
      }
      if (act == Act::kHang || act == Act::kWatchThenHang) {
        char tmp[64];
        while (SSL_read(ssl, tmp, sizeof(tmp)) > 0) {
        }
      }
      if (act == Act::kRespondThenClose) {
        // Close, and wait until the client's kernel has acknowledged the FIN (FIN_WAIT2), so
        // that the client's socket shows the close before the test's next request.
        SSL_shutdown(ssl);
        ::shutdown(fd, SHUT_WR);
        for (int i = 0; i < 2000; ++i) {
          tcp_info info{};
          socklen_t len = sizeof(info);
          if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) break;
          if (info.tcpi_state == TCP_FIN_WAIT2 || info.tcpi_state == TCP_CLOSE) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        Close(fd, ssl);
        return;
      }
      break;
    }
    SSL_shutdown(ssl);
    Close(fd, ssl);
  }

  void Close(int fd, SSL* ssl) {
    ERR_clear_error();
    {
      std::lock_guard<std::mutex> lk(mu_);
      std::erase(open_fds_, fd);
      ::close(fd);
      if (ssl) SSL_free(ssl);
      ++closed_;
    }
    cv_.notify_all();
  }

  Script script_;
  std::unique_ptr<SSL_CTX, SslFree> ctx_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> requests_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> open_fds_;
  std::vector<std::thread> conns_;
  int closed_ = 0;
};

std::unique_ptr<Transport> NewTransport(int port, const std::string& ca_pem) {
  ClientConfig c;
  c.host = "127.0.0.1";
  c.port = port;
  c.ca_pem = ca_pem;
  StatusOr<std::unique_ptr<Transport>> t = NewHttpsTransport(c);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(t).value() : nullptr;
}

HttpRequest Req(const std::string& method, const std::string& path, const std::string& body = "") {
  HttpRequest r;
  r.method = method;
  r.path = path;
  r.body = body;
  if (!body.empty()) r.content_type = "application/json";
  r.timeout = std::chrono::seconds(20);
  return r;
}

// The asynchronous calls, awaited by the test's thread: the transport's and the HTTPS client's
// callbacks run on their I/O thread; a stream's `on_data` answers each piece (false: stop).
using OnData = std::function<bool(std::string_view)>;

Result<HttpResponse> Do(Transport& t, const HttpRequest& req) {
  std::promise<Result<HttpResponse>> p;
  auto f = p.get_future();
  t.DoAsync(req, [&p](Result<HttpResponse> r) { p.set_value(std::move(r)); });
  return f.get();
}

Result<HttpResponse> Stream(Transport& t, const HttpRequest& req, const OnData& on_data) {
  std::promise<Result<HttpResponse>> p;
  auto f = p.get_future();
  t.StreamAsync(
      req, [&on_data](std::string_view d, Transport::Resume resume) { resume(on_data(d)); },
      [&p](Result<HttpResponse> r) { p.set_value(std::move(r)); });
  return f.get();
}

StatusOr<net::Response> Do(net::HttpsClient& c, net::Request req) {
  std::promise<StatusOr<net::Response>> p;
  auto f = p.get_future();
  c.Do(std::move(req), [&p](StatusOr<net::Response> r) { p.set_value(std::move(r)); });
  return f.get();
}

StatusOr<net::Response> Stream(net::HttpsClient& c, net::Request req, const OnData& on_data) {
  std::promise<StatusOr<net::Response>> p;
  auto f = p.get_future();
  c.Stream(
      std::move(req),
      [&on_data](std::string_view d, net::HttpsClient::Resume resume) { resume(on_data(d)); },
      [&p](StatusOr<net::Response> r) { p.set_value(std::move(r)); });
  return f.get();
}

class TransportTest : public ::testing::Test {
 protected:
  TestCert cert_ = MakeCert("127.0.0.1");
};

TEST_F(TransportTest, ReusesKeepAliveConnectionsAndSendsBodies) {
  TestServer server([](int, int) { return Act::kRespond; }, cert_);
  auto t = NewTransport(server.port(), cert_.cert_pem);
  auto a = Do(*t, Req("GET", "/api/v1/namespaces?limit=1"));
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  EXPECT_EQ(a->status, 200);
  EXPECT_EQ(a->body, "0-0:");
  auto b = Do(*t, Req("PATCH", "/apis/agones.dev/v1/gameservers/x", R"([{"op":"test"}])"));
  ASSERT_TRUE(b.ok()) << b.error().ToString();
  EXPECT_EQ(b->body, R"(0-1:[{"op":"test"}])");
  EXPECT_EQ(server.connections(), 1);
  auto c = t->counters();
  EXPECT_EQ(c.connections_opened, 1u);
  EXPECT_EQ(c.connections_reused, 1u);
  EXPECT_EQ(c.stale_retries, 0u);
}

TEST_F(TransportTest, StreamsChunkedBodiesAndStopsWhenTheCallerSaysSo) {
  TestServer server([](int, int) { return Act::kChunked; }, cert_);
  auto t = NewTransport(server.port(), cert_.cert_pem);
  std::string got;
  auto r = Stream(*t, Req("GET", "/watch"), [&](std::string_view d) {
    got.append(d);
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(got, "abcdef");
  got.clear();
  r = Stream(*t, Req("GET", "/watch"), [&](std::string_view d) {
    got.append(d);
    return false;
  });
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  // The caller stopped after its first piece: a piece is handed on as soon as it is parsed, so
  // the first one is the first chunk's data.
  EXPECT_EQ(got, "a");
  // A chunked answer to a plain request is decoded too.
  auto d = Do(*t, Req("GET", "/x"));
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  EXPECT_EQ(d->body, "abcdef");
}

// The server closes a pooled connection while it is idle: the transport sees it before use and
// opens a new connection, without a failed attempt.
TEST_F(TransportTest, PooledConnectionClosedWhileIdleIsDroppedBeforeUse) {
  TestServer server(
      [](int conn, int) { return conn == 0 ? Act::kRespondThenClose : Act::kRespond; }, cert_);
  auto t = NewTransport(server.port(), cert_.cert_pem);
  ASSERT_TRUE(Do(*t, Req("GET", "/a")).ok());
  ASSERT_TRUE(server.WaitClosed(1));
  auto r = Do(*t, Req("PUT", "/b", "{}"));
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->body, "1-0:{}");
  EXPECT_EQ(server.connections(), 2);
  auto c = t->counters();
  EXPECT_EQ(c.stale_discarded, 1u);
  EXPECT_EQ(c.stale_retries, 0u);
}

// (a) The server closes the reused connection as the next request arrives (kube-apiserver's idle
// close racing our write): the request is sent again at once on a new connection, exactly once,
// and the caller never sees an error.
TEST_F(TransportTest, ReusedConnectionClosedByTheServerIsRetriedOnceOnANewConnection) {
  TestServer server(
      [](int conn, int req) {
        return conn == 0 && req == 1 ? Act::kCloseAfterRequest : Act::kRespond;
      },
      cert_);
  auto t = NewTransport(server.port(), cert_.cert_pem);
  ASSERT_TRUE(Do(*t, Req("GET", "/a")).ok());
  auto r = Do(
      *t, Req("PATCH", "/apis/agones.dev/v1/namespaces/ns/gameservers/gs", R"([{"op":"test"}])"));
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, R"(1-0:[{"op":"test"}])");
  EXPECT_EQ(server.connections(), 2);
  EXPECT_EQ(server.requests(), 3);
  EXPECT_EQ(t->counters().stale_retries, 1u);
  // The new connection went back to the pool.
  ASSERT_TRUE(Do(*t, Req("GET", "/c")).ok());
  EXPECT_EQ(server.connections(), 2);
}

TEST_F(TransportTest, RetryThatFailsToReportsBothAttempts) {
  TestServer server(
      [](int conn, int req) {
        return conn == 0 && req == 0 ? Act::kRespond : Act::kCloseAfterRequest;
      },
      cert_);
  auto t = NewTransport(server.port(), cert_.cert_pem);
  ASSERT_TRUE(Do(*t, Req("GET", "/a")).ok());
  auto r = Do(*t, Req("POST", "/api/v1/namespaces/ns/events", "{}"));
  ASSERT_FALSE(r.ok());
  std::string m = r.error().ToString();
  EXPECT_TRUE(r.error().IsTransport());
  EXPECT_NE(m.find("POST 127.0.0.1:" + std::to_string(server.port()) +
                   "/api/v1/namespaces/ns/events: read failed on a new connection"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("first attempt: read failed on a reused connection"), std::string::npos) << m;
  EXPECT_EQ(server.connections(), 2);
  EXPECT_EQ(t->counters().stale_retries, 1u);
}

// (b) Every connection is reset: a clear error naming the stage and the errno text.
TEST_F(TransportTest, ResetConnectionsGiveAClearError) {
  TestServer server([](int, int req) { return req == -1 ? Act::kResetOnAccept : Act::kRespond; },
                    cert_);
  auto t = NewTransport(server.port(), cert_.cert_pem);
  auto r = Do(*t, Req("GET", "/api"));
  ASSERT_FALSE(r.ok());
  std::string m = r.error().message;
  // The reset reaches the client while it completes the TCP connect or during the TLS handshake.
  std::string prefix = "GET 127.0.0.1:" + std::to_string(server.port()) + "/api: ";
  EXPECT_TRUE(m.rfind(prefix + "TLS handshake failed on a new connection to 127.0.0.1:", 0) == 0 ||
              m.rfind(prefix + "connect failed on a new connection: 127.0.0.1:", 0) == 0)
      << m;
  EXPECT_TRUE(m.find("Connection reset by peer") != std::string::npos ||
              m.find("Broken pipe") != std::string::npos)
      << m;
  EXPECT_TRUE(r.error().IsRetryable());
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(t->counters().stale_retries, 0u);
}

TEST_F(TransportTest, UnverifiableServerCertificateSaysWhy) {
  TestCert other = MakeCert("127.0.0.1");
  TestServer server([](int, int) { return Act::kRespond; }, cert_);
  auto t = NewTransport(server.port(), other.cert_pem);
  auto r = Do(*t, Req("GET", "/api"));
  ASSERT_FALSE(r.ok());
  std::string m = r.error().message;
  EXPECT_NE(m.find("TLS handshake failed on a new connection"), std::string::npos) << m;
  EXPECT_NE(m.find("certificate verify failed"), std::string::npos) << m;
  EXPECT_EQ(server.requests(), 0);
}

TEST_F(TransportTest, ConnectFailureSaysWhy) {
  int port = 0;
  {
    TestServer gone([](int, int) { return Act::kRespond; }, cert_);
    port = gone.port();
  }
  auto t = NewTransport(port, cert_.cert_pem);
  auto r = Do(*t, Req("GET", "/api"));
  ASSERT_FALSE(r.ok());
  std::string m = r.error().message;
  EXPECT_NE(m.find("connect failed on a new connection"), std::string::npos) << m;
  EXPECT_NE(m.find("Connection refused"), std::string::npos) << m;
}

// (c) The server closes after part of a response: never retried (the request may have applied).
TEST_F(TransportTest, PartialResponseOnAReusedConnectionIsNotRetried) {
  for (Act partial : {Act::kPartialStatusLine, Act::kPartialBody}) {
    TestServer server([partial](int, int req) { return req == 1 ? partial : Act::kRespond; },
                      cert_);
    auto t = NewTransport(server.port(), cert_.cert_pem);
    ASSERT_TRUE(Do(*t, Req("GET", "/a")).ok());
    auto r = Do(*t, Req("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", "{}"));
    ASSERT_FALSE(r.ok());
    std::string m = r.error().message;
    EXPECT_NE(m.find("read failed on a reused connection"), std::string::npos) << m;
    EXPECT_NE(m.find("closed by the server"), std::string::npos) << m;
    EXPECT_EQ(m.find("0 response bytes received"), std::string::npos) << m;
    EXPECT_EQ(m.find("first attempt"), std::string::npos) << m;
    EXPECT_EQ(server.connections(), 1);
    EXPECT_EQ(t->counters().stale_retries, 0u);
  }
}

// (d) A failure on a new connection is not retried, even before any response byte.
TEST_F(TransportTest, FailureOnANewConnectionIsNotRetried) {
  TestServer server([](int, int) { return Act::kCloseAfterRequest; }, cert_);
  auto t = NewTransport(server.port(), cert_.cert_pem);
  auto r = Do(*t, Req("PATCH", "/apis/agones.dev/v1/namespaces/ns/gameservers/gs", "[]"));
  ASSERT_FALSE(r.ok());
  std::string m = r.error().message;
  EXPECT_NE(
      m.find("PATCH 127.0.0.1:" + std::to_string(server.port()) +
             "/apis/agones.dev/v1/namespaces/ns/gameservers/gs: read failed on a new connection"),
      std::string::npos)
      << m;
  EXPECT_NE(m.find("closed by the server"), std::string::npos) << m;
  EXPECT_NE(m.find(" request bytes written, 0 response bytes received"), std::string::npos) << m;
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(t->counters().stale_retries, 0u);
}

TEST_F(TransportTest, ShutdownCancelsACallInFlight) {
  TestServer server([](int, int) { return Act::kHang; }, cert_);
  auto t = NewTransport(server.port(), cert_.cert_pem);
  std::optional<Result<HttpResponse>> got;
  std::thread caller([&] { got.emplace(Do(*t, Req("GET", "/hang"))); });
  ASSERT_TRUE(server.WaitRequests(1));
  t->Shutdown();
  caller.join();
  ASSERT_TRUE(got.has_value());
  ASSERT_FALSE(got->ok());
  EXPECT_TRUE(got->error().cancelled);
  EXPECT_FALSE(Do(*t, Req("GET", "/after")).ok());
}

TEST_F(TransportTest, CancellationStopsAStream) {
  TestServer server([](int, int) { return Act::kHang; }, cert_);
  auto t = NewTransport(server.port(), cert_.cert_pem);
  Cancellation cancel;
  HttpRequest req = Req("GET", "/watch");
  req.cancel = &cancel;
  std::optional<Result<HttpResponse>> got;
  std::thread caller([&] { got.emplace(Stream(*t, req, [](std::string_view) { return true; })); });
  ASSERT_TRUE(server.WaitRequests(1));
  cancel.Cancel();
  caller.join();
  ASSERT_TRUE(got.has_value());
  ASSERT_FALSE(got->ok());
  EXPECT_TRUE(got->error().cancelled);
}

// The one HTTPS client (net/https_client.h) directly, with small limits.
std::unique_ptr<net::IoThreadClient> NewNetClient(int port, const std::string& ca_pem) {
  net::ClientOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.ca_pem = ca_pem;
  o.max_header_bytes = 4096;
  o.max_body = 4096;
  auto c = net::IoThreadClient::Create(o);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? std::move(c).value() : nullptr;
}

net::Request NetReq(const std::string& method, const std::string& path,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  net::Request r;
  r.method = method;
  r.path = path;
  r.timeout = timeout;
  if (method != "GET") {
    r.body = "{}";
    r.content_type = "application/json";
  }
  return r;
}

TEST_F(TransportTest, ReadDeadlineExpiresWithAClearErrorAndNoRetry) {
  TestServer server(
      [](int conn, int req) { return conn == 0 && req == 0 ? Act::kRespond : Act::kHang; }, cert_);
  auto c = NewNetClient(server.port(), cert_.cert_pem);
  ASSERT_TRUE(Do(c->async(), NetReq("GET", "/a")).ok());
  // On the reused connection: a timeout is never retried, whatever the verb.
  auto r = Do(c->async(), NetReq("GET", "/hang", std::chrono::milliseconds(300)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kUnavailable);
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("GET 127.0.0.1:" + std::to_string(server.port()) +
                   "/hang: read failed on a reused connection"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("timed out after 300ms"), std::string::npos) << m;
  EXPECT_EQ(m.find("first attempt"), std::string::npos) << m;
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(c->counters().stale_retries, 0u);
}

// A non-idempotent call (resend_on_closed_connection = false) on a reused connection the server
// closes as the request arrives: the caller gets the error, the request is never sent twice.
TEST_F(TransportTest, NonIdempotentRequestIsNeverResentOnANewConnection) {
  TestServer server(
      [](int conn, int req) {
        return conn == 0 && req == 1 ? Act::kCloseAfterRequest : Act::kRespond;
      },
      cert_);
  auto c = NewNetClient(server.port(), cert_.cert_pem);
  ASSERT_TRUE(Do(c->async(), NetReq("GET", "/a")).ok());
  net::Request post = NetReq("POST", "/gameserverallocation");
  post.resend_on_closed_connection = false;
  auto r = Do(c->async(), post);
  ASSERT_FALSE(r.ok());
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("read failed on a reused connection"), std::string::npos) << m;
  EXPECT_NE(m.find("closed by the server"), std::string::npos) << m;
  EXPECT_EQ(server.requests(), 2);
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(c->counters().stale_retries, 0u);
  // The same failure of an idempotent call is retried once (the default).
  ASSERT_TRUE(Do(c->async(), NetReq("GET", "/b")).ok());
}

TEST_F(TransportTest, OversizedHeaderAndBodyAreClearErrors) {
  for (Act act : {Act::kHugeHeader, Act::kBigBody}) {
    TestServer server([act](int, int) { return act; }, cert_);
    auto c = NewNetClient(server.port(), cert_.cert_pem);
    auto r = Do(c->async(), NetReq("GET", "/big"));
    ASSERT_FALSE(r.ok());
    const std::string& m = r.status().message();
    if (act == Act::kHugeHeader) {
      EXPECT_NE(m.find("malformed response: response headers over 4 KiB"), std::string::npos) << m;
    } else {
      EXPECT_NE(m.find("response body over 4 KiB"), std::string::npos) << m;
    }
    EXPECT_EQ(c->counters().stale_retries, 0u);
  }
}

// A watch: chunked, line-delimited JSON events cut across chunk boundaries arrive in order, piece
// by piece, and the caller may stop the stream after any piece.
TEST_F(TransportTest, ChunkedWatchStreamDeliversEveryPiece) {
  TestServer server([](int, int) { return Act::kWatchLines; }, cert_);
  auto c = NewNetClient(server.port(), cert_.cert_pem);
  std::string got;
  int pieces = 0;
  auto r = Stream(c->async(), NetReq("GET", "/watch"), [&](std::string_view d) {
    got.append(d);
    ++pieces;
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(got, "{\"type\":\"ADDED\"}\n{\"type\":\"MODIFIED\"}\n{\"type\":\"DELETED\"}\n");
  EXPECT_GE(pieces, 1);
  got.clear();
  r = Stream(c->async(), NetReq("GET", "/watch"), [&](std::string_view d) {
    got.append(d);
    return false;
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(got.empty());
  EXPECT_TRUE(std::string("{\"type\":\"ADDED\"}\n{\"type\":\"MODIFIED\"}\n").starts_with(got) ||
              got.starts_with("{\"type\":\"ADDED\"}"))
      << got;
}

// A quiet watch: an event reaches the caller as soon as its chunk arrived, while the server keeps
// the stream open (not when the stream ends, nor when 16 KiB of events have piled up).
TEST_F(TransportTest, WatchEventArrivesWhileTheStreamStaysOpen) {
  TestServer server([](int, int) { return Act::kWatchThenHang; }, cert_);
  auto c = NewNetClient(server.port(), cert_.cert_pem);
  std::string got;
  auto r =
      Stream(c->async(), NetReq("GET", "/watch", std::chrono::seconds(5)), [&](std::string_view d) {
        got.append(d);
        return got.find('\n') == std::string::npos;  // stop after the first whole event
      });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(got, "{\"type\":\"ADDED\"}\n");
}

TEST_F(TransportTest, StreamOfANonGetIsRefused) {
  TestServer server([](int, int) { return Act::kRespond; }, cert_);
  auto c = NewNetClient(server.port(), cert_.cert_pem);
  auto r = Stream(c->async(), NetReq("POST", "/x"), [](std::string_view) { return true; });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(server.requests(), 0);
}

}  // namespace
}  // namespace aw::kube
