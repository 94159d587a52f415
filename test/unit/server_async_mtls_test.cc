// ConnectionServer's asynchronous handler (Responder) and client-certificate verification, over
// real TLS sockets on 127.0.0.1 (a Boost.Asio/Beast client; certificates made in memory).
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <prometheus/registry.h>

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

#include <unistd.h>

#include "server/connection_server.h"
#include "server/tls_context.h"
#include "server/tls_keypair.h"

namespace aw::server {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

// Frees what OpenSslFree (tls_keypair.h) does not cover.
struct LocalFree {
  void operator()(BIO* b) const { BIO_free(b); }
  void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
};

std::string ToPem(auto write) {
  std::unique_ptr<BIO, LocalFree> bio(BIO_new(BIO_s_mem()));
  write(bio.get());
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(len));
}

// An ECDSA P-256 certificate for `cn`, signed by `issuer` (self-signed when null).
struct Cert {
  std::unique_ptr<EVP_PKEY, OpenSslFree> key;
  std::unique_ptr<X509, OpenSslFree> x509;
  std::string cert_pem() const {
    return ToPem([&](BIO* b) { PEM_write_bio_X509(b, x509.get()); });
  }
  std::string key_pem() const {
    return ToPem(
        [&](BIO* b) { PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr); });
  }
};

void AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, LocalFree> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  ASSERT_TRUE(ext);
  X509_add_ext(cert, ext.get(), -1);
}

Cert MakeCert(const std::string& cn, const Cert* issuer, bool ca, const char* eku = nullptr) {
  static std::atomic<long> serial{1};
  Cert c;
  c.key.reset(EVP_EC_gen("P-256"));
  c.x509.reset(X509_new());
  X509* x = c.x509.get();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, c.key.get());
  X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* issuer_x = issuer ? issuer->x509.get() : x;
  X509_set_issuer_name(x, X509_get_subject_name(issuer_x));
  AddExt(x, issuer_x, NID_basic_constraints, ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
  if (ca) AddExt(x, issuer_x, NID_key_usage, "critical,keyCertSign,digitalSignature");
  if (eku) AddExt(x, issuer_x, NID_ext_key_usage, eku);
  if (!ca && !eku) AddExt(x, issuer_x, NID_subject_alt_name, "IP:127.0.0.1");
  X509_sign(x, issuer ? issuer->key.get() : c.key.get(), EVP_sha256());
  return c;
}

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
    ASSERT_TRUE(std::holds_alternative<std::shared_ptr<const CaBundle>>(r)) << std::get<1>(r);
    std::lock_guard lock(mu);
    bundle = std::get<0>(r);
  }
};

// One TLS client connection; Request() returns the answer, or std::nullopt with `error` set when
// the handshake, write or read failed (a refused client, or a connection closed without answer).
class Client {
 public:
  Client(int port, const Cert* client_cert) : ctx_(MakeContext(client_cert)), stream_(ioc_, ctx_) {
    beast::error_code ec;
    stream_.next_layer().connect(tcp::endpoint(net::ip::make_address("127.0.0.1"),
                                               static_cast<unsigned short>(port)),
                                 ec);
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
