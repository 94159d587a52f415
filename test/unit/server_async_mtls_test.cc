// ConnectionServer's asynchronous handler (Responder) and client-certificate verification, over
// real TLS sockets on 127.0.0.1 (a Boost.Asio/Beast client; certificates made in memory).
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "server/connection_server.h"
#include "server/tls_context.h"
#include "server/tls_keypair.h"
#include "test_certs.h"

namespace aw::server {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

using testing::Cert;
using testing::MakeCert;

struct FixedKeyPair final : KeyPairSource {
  std::shared_ptr<const KeyPair> pair;
  std::shared_ptr<const KeyPair> Current() const override { return pair; }
};

struct SwappableCa final : ClientCaSource {
  mutable std::mutex mu;
  std::shared_ptr<const CaBundle> bundle;
  std::shared_ptr<const CaBundle> CurrentCa() const override {
    std::lock_guard lock(mu);
    return bundle;
  }
  void Set(const std::string& pem) {
    auto r = ParseCaBundle(pem, "test CA");
    ASSERT_TRUE(r.ok()) << r.status().message();
    std::lock_guard lock(mu);
    bundle = *r;
  }
};

// One TLS client connection; Request() returns the answer, or std::nullopt with `error` set when
// the handshake, write or read failed (a refused client, or a connection closed without answer).
class Client {
 public:
  Client(int port, const Cert* client_cert) : ctx_(MakeContext(client_cert)), stream_(ioc_, ctx_) {
    beast::error_code ec;
    stream_.next_layer().connect(
        tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)), ec);
    if (!ec) stream_.handshake(ssl::stream_base::client, ec);
    if (ec) error = ec.message();
  }

  std::optional<http::response<http::string_body>> Request(const std::string& target) {
    if (!error.empty()) return std::nullopt;
    http::request<http::string_body> req(http::verb::post, target, 11);
    req.set(http::field::host, "127.0.0.1");
    req.body() = "{}";
    req.prepare_payload();
    beast::error_code ec;
    http::write(stream_, req, ec);
    http::response<http::string_body> res;
    if (!ec) http::read(stream_, buf_, res, ec);
    if (ec) {
      error = ec.message();
      return std::nullopt;
    }
    return res;
  }

  std::string error;

 private:
  static ssl::context MakeContext(const Cert* client_cert) {
    ssl::context ctx(ssl::context::tls_client);
    ctx.set_verify_mode(ssl::verify_none);
    if (client_cert != nullptr) {
      const std::string cert = client_cert->cert_pem(), key = client_cert->key_pem();
      ctx.use_certificate(net::buffer(cert), ssl::context::pem);
      ctx.use_private_key(net::buffer(key), ssl::context::pem);
    }
    return ctx;
  }

  net::io_context ioc_;
  ssl::context ctx_;
  ssl::stream<tcp::socket> stream_;
  beast::flat_buffer buf_;
};

class AsyncMtlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ca_ = MakeCert("serving-ca", nullptr, true);
    Cert leaf = MakeCert("gateway", &ca_, false);
    auto kp = ParseKeyPair(leaf.cert_pem(), leaf.key_pem());
    ASSERT_TRUE(kp.ok()) << kp.status().message();
    keypair_.pair = *kp;
    client_ca_ = MakeCert("client-ca", nullptr, true);
    good_ = MakeCert("director", &client_ca_, false, "clientAuth");
    cas_.Set(client_ca_.cert_pem());
  }
  void TearDown() override {
    if (server_) {
      server_->Stop();
      server_->WaitStopped(std::chrono::seconds(5));
    }
    for (auto& t : answerers_) t.join();
  }

  // Starts a TLS listener on a free port with `handler`; mtls: verify client certificates.
  int Start(AsyncHttpHandler handler, bool mtls) {
    for (int attempt = 0; attempt < 20; ++attempt) {
      ConnectionOptions o;
      o.name = "test";
      o.bind_address = "127.0.0.1";
      o.port = 20000 + static_cast<int>((::getpid() * 7 + attempt * 131) % 30000);
      o.io_threads = 2;
      o.max_concurrent_handshakes = handshake_limit_;
      o.max_connections = max_connections_;
      server_ = std::make_unique<ConnectionServer>(o, handler, &keypair_, mtls ? &cas_ : nullptr,
                                                   registry_);
      if (server_->Start().ok()) return o.port;
    }
    ADD_FAILURE() << "no free port";
    return 0;
  }

  Cert ca_, client_ca_, good_;
  FixedKeyPair keypair_;
  SwappableCa cas_;
  prometheus::Registry registry_;
  std::unique_ptr<ConnectionServer> server_;
  std::vector<std::thread> answerers_;
  std::mutex mu_;
  size_t handshake_limit_ = 64;
  size_t max_connections_ = 1024;
};

// The answer comes later, from another thread; no thread of the server waits for it.
TEST_F(AsyncMtlsTest, AnswersFromAnotherThreadLater) {
  std::atomic<int> handled{0};
  const int port = Start(
      [this, &handled](const HttpRequest& req, Responder respond) {
        ++handled;
        std::string path(req.path);
        std::lock_guard lock(mu_);
        answerers_.emplace_back([respond, path] {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          respond({200, "text/plain", "late " + path, {}});
        });
      },
      false);
  Client c(port, nullptr);
  const auto start = std::chrono::steady_clock::now();
  auto res = c.Request("/one");
  ASSERT_TRUE(res) << c.error;
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(190));
  EXPECT_EQ(res->result_int(), 200);
  EXPECT_EQ(res->body(), "late /one");
  // Keep-alive: a second request on the same connection.
  res = c.Request("/two");
  ASSERT_TRUE(res) << c.error;
  EXPECT_EQ(res->body(), "late /two");
  EXPECT_EQ(handled.load(), 2);
}

// Only the first call of a Responder answers; the connection stays usable.
TEST_F(AsyncMtlsTest, SecondAnswerIgnored) {
  const int port = Start(
      [](const HttpRequest&, Responder respond) {
        respond({201, "text/plain", "first", {}});
        respond({500, "text/plain", "second", {}});
      },
      false);
  Client c(port, nullptr);
  auto res = c.Request("/");
  ASSERT_TRUE(res) << c.error;
  EXPECT_EQ(res->result_int(), 201);
  EXPECT_EQ(res->body(), "first");
  res = c.Request("/");
  ASSERT_TRUE(res) << c.error;
  EXPECT_EQ(res->body(), "first");
}

// Dropping the Responder without answering closes the connection without an answer.
TEST_F(AsyncMtlsTest, DroppedResponderClosesTheConnection) {
  const int port = Start([](const HttpRequest&, Responder) {}, false);
  Client c(port, nullptr);
  auto res = c.Request("/");
  EXPECT_FALSE(res) << "got HTTP " << res->result_int();
  EXPECT_FALSE(c.error.empty());
}

TEST_F(AsyncMtlsTest, HandlerExceptionIs500) {
  const int port =
      Start([](const HttpRequest&, Responder) { throw std::runtime_error("boom"); }, false);
  Client c(port, nullptr);
  auto res = c.Request("/");
  ASSERT_TRUE(res) << c.error;
  EXPECT_EQ(res->result_int(), 500);
}

AsyncHttpHandler Echo() {
  return [](const HttpRequest&, Responder respond) { respond({200, "text/plain", "ok", {}}); };
}

TEST_F(AsyncMtlsTest, ClientWithTrustedCertificateServed) {
  const int port = Start(Echo(), true);
  Client c(port, &good_);
  auto res = c.Request("/");
  ASSERT_TRUE(res) << c.error;
  EXPECT_EQ(res->body(), "ok");
}

TEST_F(AsyncMtlsTest, ClientWithoutCertificateRefused) {
  const int port = Start(Echo(), true);
  Client c(port, nullptr);
  EXPECT_FALSE(c.Request("/"));
  EXPECT_FALSE(c.error.empty());
}

TEST_F(AsyncMtlsTest, ClientFromAnotherCaRefused) {
  const int port = Start(Echo(), true);
  Cert other_ca = MakeCert("other-ca", nullptr, true);
  Cert intruder = MakeCert("intruder", &other_ca, false, "clientAuth");
  Client c(port, &intruder);
  EXPECT_FALSE(c.Request("/"));
  // A self-signed client certificate is refused as well.
  Cert self = MakeCert("self", nullptr, false, "clientAuth");
  Client s(port, &self);
  EXPECT_FALSE(s.Request("/"));
}

TEST_F(AsyncMtlsTest, ServerOnlyCertificateRefusedForClientAuth) {
  const int port = Start(Echo(), true);
  Cert server_only = MakeCert("not-a-client", &client_ca_, false, "serverAuth");
  Client c(port, &server_only);
  EXPECT_FALSE(c.Request("/"));
}

// The bundle is read at each handshake: after the CA is replaced, the old client is refused and
// one from the new CA is served.
TEST_F(AsyncMtlsTest, ReplacedCaAppliesToNewHandshakes) {
  const int port = Start(Echo(), true);
  {
    Client c(port, &good_);
    ASSERT_TRUE(c.Request("/")) << c.error;
  }
  Cert new_ca = MakeCert("client-ca-2", nullptr, true);
  Cert new_client = MakeCert("director-2", &new_ca, false, "clientAuth");
  cas_.Set(new_ca.cert_pem());
  Client old_client(port, &good_);
  EXPECT_FALSE(old_client.Request("/"));
  Client c(port, &new_client);
  auto res = c.Request("/");
  ASSERT_TRUE(res) << c.error;
  EXPECT_EQ(res->body(), "ok");
}

}  // namespace
}  // namespace aw::server

namespace aw::server {
namespace {

// With one handshake at a time, clients connecting together are served one after the other.
TEST_F(AsyncMtlsTest, HandshakesBeyondTheLimitWaitTheirTurnAndAllSucceed) {
  handshake_limit_ = 1;
  const int port = Start(Echo(), true);
  constexpr int kClients = 16;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&] {
      Client c(port, &good_);
      auto res = c.Request("/");
      if (res && res->body() == "ok") ++ok;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), kClients);
}

// A connection that sends nothing does not take the only handshake slot from the next client.
TEST_F(AsyncMtlsTest, ASilentConnectionHoldsNoHandshakeSlot) {
  handshake_limit_ = 1;
  const int port = Start(Echo(), true);
  net::io_context ioc;
  tcp::socket silent(ioc);
  silent.connect(
      tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = std::chrono::steady_clock::now();
  Client c(port, &good_);
  auto res = c.Request("/");
  ASSERT_TRUE(res) << c.error;
  EXPECT_EQ(res->body(), "ok");
  // Well before the silent connection's 5 s handshake timeout would have freed a slot.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

// Issue 23: a client that closes its connection while its request waits is noticed at once (the
// connection is read meanwhile), and the handler's on_abandoned runs, once.
TEST_F(AsyncMtlsTest, ClientThatLeavesWhileWaitingIsNoticed) {
  std::atomic<int> abandoned{0};
  std::vector<Responder> held;  // never answered
  const int port = Start(
      [&](const HttpRequest& req, Responder r) {
        ASSERT_TRUE(req.on_abandoned);
        req.on_abandoned([&abandoned] { abandoned.fetch_add(1); });
        std::lock_guard lock(mu_);
        held.push_back(std::move(r));
      },
      false);
  {
    net::io_context ioc;
    ssl::context ctx(ssl::context::tls_client);
    ctx.set_verify_mode(ssl::verify_none);
    ssl::stream<tcp::socket> s(ioc, ctx);
    s.next_layer().connect(
        tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    s.handshake(ssl::stream_base::client);
    http::request<http::string_body> req(http::verb::post, "/x", 11);
    req.set(http::field::host, "127.0.0.1");
    req.body() = "{}";
    req.prepare_payload();
    http::write(s, req);
    for (int i = 0; i < 200; ++i) {
      std::lock_guard lock(mu_);
      if (!held.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // The client gives up: the socket closes (no TLS close_notify, like a killed process).
  }
  for (int i = 0; i < 200 && abandoned.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(abandoned.load(), 1);
  std::lock_guard lock(mu_);
  ASSERT_EQ(held.size(), 1u);
  held.front()(HttpResponse{200, "text/plain", "late\n", {}});  // ignored: nobody to answer
  EXPECT_EQ(abandoned.load(), 1);
}

// An answered request never reports abandonment, and bytes the client pipelines while it waits
// are kept for its next request.
TEST_F(AsyncMtlsTest, AnsweredRequestIsNotAbandonedAndPipelinedBytesAreKept) {
  std::atomic<int> abandoned{0};
  std::atomic<int> served{0};
  std::vector<Responder> held;
  const int port = Start(
      [&](const HttpRequest& req, Responder r) {
        req.on_abandoned([&abandoned] { abandoned.fetch_add(1); });
        if (served.fetch_add(1) == 0) {
          std::lock_guard lock(mu_);
          held.push_back(std::move(r));  // the first waits
          return;
        }
        r(HttpResponse{200, "text/plain", "second\n", {}});
      },
      false);
  net::io_context ioc;
  ssl::context ctx(ssl::context::tls_client);
  ctx.set_verify_mode(ssl::verify_none);
  ssl::stream<tcp::socket> s(ioc, ctx);
  s.next_layer().connect(
      tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  s.handshake(ssl::stream_base::client);
  http::request<http::string_body> req(http::verb::post, "/x", 11);
  req.set(http::field::host, "127.0.0.1");
  req.body() = "{}";
  req.prepare_payload();
  http::write(s, req);
  http::write(s, req);  // pipelined while the first waits
  for (int i = 0; i < 200; ++i) {
    {
      std::lock_guard lock(mu_);
      if (!held.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the second's bytes arrive
  {
    std::lock_guard lock(mu_);
    ASSERT_EQ(held.size(), 1u);
    held.front()(HttpResponse{200, "text/plain", "first\n", {}});
  }
  beast::flat_buffer buf;
  http::response<http::string_body> a, b;
  http::read(s, buf, a);
  http::read(s, buf, b);
  EXPECT_EQ(a.body(), "first\n");
  EXPECT_EQ(b.body(), "second\n");
  EXPECT_EQ(abandoned.load(), 0);
}

// Issue 23: at the connection cap, bare TCP connects evict each other, never a waiting request.
TEST_F(AsyncMtlsTest, WaitingRequestSurvivesAFloodOfBareConnects) {
  max_connections_ = 3;
  std::vector<Responder> held;
  std::atomic<int> abandoned{0};
  const int port = Start(
      [&](const HttpRequest& req, Responder r) {
        req.on_abandoned([&abandoned] { abandoned.fetch_add(1); });
        std::lock_guard lock(mu_);
        held.push_back(std::move(r));
      },
      false);
  net::io_context ioc;
  ssl::context ctx(ssl::context::tls_client);
  ctx.set_verify_mode(ssl::verify_none);
  ssl::stream<tcp::socket> s(ioc, ctx);
  s.next_layer().connect(
      tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  s.handshake(ssl::stream_base::client);
  http::request<http::string_body> req(http::verb::post, "/x", 11);
  req.set(http::field::host, "127.0.0.1");
  req.body() = "{}";
  req.prepare_payload();
  http::write(s, req);
  for (int i = 0; i < 200; ++i) {
    {
      std::lock_guard lock(mu_);
      if (!held.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<std::unique_ptr<tcp::socket>> bare;
  for (int i = 0; i < 20; ++i) {
    auto b = std::make_unique<tcp::socket>(ioc);
    b->connect(
        tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    bare.push_back(std::move(b));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(abandoned.load(), 0);
  {
    std::lock_guard lock(mu_);
    ASSERT_EQ(held.size(), 1u);
    held.front()(HttpResponse{200, "text/plain", "kept\n", {}});
  }
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  beast::error_code ec;
  http::read(s, buf, res, ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(res.body(), "kept\n");
}

}  // namespace
}  // namespace aw::server
