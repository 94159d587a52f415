// Key pair parsing and the certificate reloader (files on disk, no sockets).
#include <gtest/gtest.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <prometheus/registry.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>

#include "runtime/manager.h"
#include "server/cert_reloader.h"
#include "server/tls_keypair.h"

namespace aw::server {
namespace {

struct Pem {
  std::string cert, key;
};

// A self-signed ECDSA P-256 certificate with the given CN, made in memory.
Pem MakePair(const std::string& cn) {
  std::unique_ptr<EVP_PKEY, OpenSslFree> key(EVP_EC_gen("P-256"));
  std::unique_ptr<X509, OpenSslFree> cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  X509_sign(cert.get(), key.get(), EVP_sha256());
  auto to_string = [](auto write) {
    BIO* bio = BIO_new(BIO_s_mem());
    write(bio);
    char* data = nullptr;
    long len = BIO_get_mem_data(bio, &data);
    std::string out(data, static_cast<size_t>(len));
    BIO_free(bio);
    return out;
  };
  Pem pem;
  pem.cert = to_string([&](BIO* b) { PEM_write_bio_X509(b, cert.get()); });
  pem.key = to_string([&](BIO* b) {
    PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  });
  return pem;
}

std::shared_ptr<const KeyPair> Ok(const KeyPairResult& r) {
  if (!r.ok()) ADD_FAILURE() << r.status().message();
  return r.ok() ? *r : nullptr;
}

std::string Err(const KeyPairResult& r) { return r.ok() ? "" : r.status().message(); }

TEST(KeyPair, ParsesMatchingPair) {
  Pem pem = MakePair("webhook.test");
  auto pair = Ok(ParseKeyPair(pem.cert, pem.key));
  ASSERT_TRUE(pair);
  EXPECT_EQ(pair->subject(), "/CN=webhook.test");
  EXPECT_EQ(pair->fingerprint_sha256().size(), 64u);
  EXPECT_GT(pair->not_after(), std::chrono::system_clock::now());
  EXPECT_EQ(sk_X509_num(pair->chain()), 0);
}

TEST(KeyPair, ChainCertificatesKept) {
  Pem leaf = MakePair("leaf"), inter = MakePair("intermediate");
  auto pair = Ok(ParseKeyPair(leaf.cert + inter.cert, leaf.key));
  ASSERT_TRUE(pair);
  EXPECT_EQ(sk_X509_num(pair->chain()), 1);
}

TEST(KeyPair, MismatchedKeyRejected) {
  Pem a = MakePair("a"), b = MakePair("b");
  EXPECT_NE(Err(ParseKeyPair(a.cert, b.key, "tls.crt", "tls.key")).find("does not match"),
            std::string::npos);
}

TEST(KeyPair, GarbageRejected) {
  Pem a = MakePair("a");
  EXPECT_NE(Err(ParseKeyPair("", a.key)).find("empty"), std::string::npos);
  EXPECT_NE(Err(ParseKeyPair(a.cert, "")).find("empty"), std::string::npos);
  EXPECT_NE(Err(ParseKeyPair("not pem", a.key, "tls.crt")).find("tls.crt"), std::string::npos);
  EXPECT_NE(
      Err(ParseKeyPair(a.cert, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
                       "c", "tls.key"))
          .find("tls.key"),
      std::string::npos);
  // Key and certificate swapped.
  EXPECT_FALSE(Err(ParseKeyPair(a.key, a.cert)).empty());
  // Truncated certificate.
  EXPECT_FALSE(Err(ParseKeyPair(a.cert.substr(0, a.cert.size() / 2), a.key)).empty());
}

class ReloaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("aw-reloader-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Write(const Pem& pem) { Write(pem.cert, pem.key); }
  void Write(const std::string& cert, const std::string& key) {
    std::ofstream(dir_ / "tls.crt", std::ios::trunc) << cert;
    std::ofstream(dir_ / "tls.key", std::ios::trunc) << key;
  }
  double Value(const std::string& name) {
    for (const auto& family : registry_.Collect()) {
      if (family.name == name) return family.metric.at(0).counter.value;
    }
    ADD_FAILURE() << "no metric " << name;
    return -1;
  }
  std::unique_ptr<CertReloader> Make() {
    return std::make_unique<CertReloader>((dir_ / "tls.crt").string(), (dir_ / "tls.key").string(),
                                          registry_);
  }

  std::filesystem::path dir_;
  prometheus::Registry registry_;
};

TEST_F(ReloaderTest, InitialLoadFailsOnMissingFiles) {
  auto r = Make();
  Status err = r->LoadInitial();
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.message().find("tls.crt"), std::string::npos);
  EXPECT_FALSE(r->Loaded());
}

TEST_F(ReloaderTest, InstallsChangedValidPair) {
  Pem a = MakePair("a"), b = MakePair("b");
  Write(a);
  auto r = Make();
  ASSERT_TRUE(r->LoadInitial().ok());
  EXPECT_EQ(r->Current()->subject(), "/CN=a");
  EXPECT_FALSE(r->PollOnce()) << "unchanged files are not reloaded";
  EXPECT_EQ(Value("allocating_webhook_certificate_reloads_total"), 0);

  Write(b);
  EXPECT_TRUE(r->PollOnce());
  EXPECT_EQ(r->Current()->subject(), "/CN=b");
  EXPECT_EQ(Value("allocating_webhook_certificate_reloads_total"), 1);
  EXPECT_EQ(Value("allocating_webhook_certificate_reload_failures_total"), 0);
}

TEST_F(ReloaderTest, BadPairKeepsOldOneAndIsCountedOnce) {
  Pem a = MakePair("a"), b = MakePair("b");
  Write(a);
  auto r = Make();
  ASSERT_TRUE(r->LoadInitial().ok());
  auto before = r->Current();

  Write(b.cert, a.key);  // mismatched
  EXPECT_FALSE(r->PollOnce());
  EXPECT_FALSE(r->PollOnce());
  EXPECT_EQ(r->Current(), before);
  EXPECT_EQ(Value("allocating_webhook_certificate_reload_failures_total"), 1);

  std::filesystem::remove(dir_ / "tls.key");  // unreadable: a new, distinct failure
  EXPECT_FALSE(r->PollOnce());
  EXPECT_FALSE(r->PollOnce());
  EXPECT_EQ(Value("allocating_webhook_certificate_reload_failures_total"), 2);
  EXPECT_EQ(r->Current(), before);

  Write(b);
  EXPECT_TRUE(r->PollOnce());
  EXPECT_EQ(r->Current()->subject(), "/CN=b");
}

TEST_F(ReloaderTest, PreviousPairStaysValidWhileInUse) {
  Pem a = MakePair("a"), b = MakePair("b");
  Write(a);
  auto r = Make();
  ASSERT_TRUE(r->LoadInitial().ok());
  auto held = r->Current();  // like an in-progress handshake
  Write(b);
  ASSERT_TRUE(r->PollOnce());
  EXPECT_EQ(held->subject(), "/CN=a");
  EXPECT_EQ(X509_check_private_key(held->cert(), held->key()), 1);
}

// Under a manager, as in the binary: once started it polls (a new pair on disk is installed
// without any call from the test) and, asked to stop, it returns OK well before the manager's
// stop deadline. A Run that never polled, or ignored its stop request, fails here.
TEST_F(ReloaderTest, StartStopIsClean) {
  using namespace std::chrono_literals;
  Write(MakePair("a"));
  auto r = std::make_unique<CertReloader>((dir_ / "tls.crt").string(), (dir_ / "tls.key").string(),
                                          registry_, 10ms);
  ASSERT_TRUE(r->LoadInitial().ok());
  // The io_context its timer runs on (the health server's in the binaries).
  boost::asio::io_context ioc;
  auto work = boost::asio::make_work_guard(ioc);
  std::thread io([&ioc] { ioc.run(); });
  runtime::Manager m({"certificates"}, 30s);
  ASSERT_TRUE(m.Add(runtime::MakeService(
                        "certificates", [&] { return r->Start(ioc.get_executor()); },
                        [&r](std::chrono::steady_clock::time_point) {
                          r->Stop();
                          return Status::Ok();
                        }),
                    {"certificates"})
                  .ok());
  std::stop_source stop;
  Status result = Status::Internal("not run");
  std::jthread runner([&] { result = m.Run(stop.get_token()); });

  Write(MakePair("b"));
  const auto poll_deadline = std::chrono::steady_clock::now() + 10s;
  while (r->Current()->subject() != "/CN=b" && std::chrono::steady_clock::now() < poll_deadline) {
    std::this_thread::sleep_for(5ms);  // the reloader's own thread installs it; nothing to await
  }
  EXPECT_EQ(r->Current()->subject(), "/CN=b") << "the running reloader never polled";

  const auto asked = std::chrono::steady_clock::now();
  stop.request_stop();
  runner.join();
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 5s) << "Run did not return promptly on stop";
  EXPECT_TRUE(result.ok()) << result.ToString();
  work.reset();
  ioc.stop();
  io.join();
}

// On the timer, a changed pair that does not parse is looked at a second time (without sleeping
// on the io thread) and only then counted, once; the old pair keeps serving; a good pair written
// later is installed by the same timer.
TEST_F(ReloaderTest, TimerCountsABadPairOnceAndThenInstallsAGoodOne) {
  using namespace std::chrono_literals;
  Pem a = MakePair("a"), b = MakePair("b");
  Write(a);
  auto r = std::make_unique<CertReloader>((dir_ / "tls.crt").string(), (dir_ / "tls.key").string(),
                                          registry_, 10ms);
  ASSERT_TRUE(r->LoadInitial().ok());
  boost::asio::io_context ioc;
  auto work = boost::asio::make_work_guard(ioc);
  std::thread io([&ioc] { ioc.run(); });
  ASSERT_TRUE(r->Start(ioc.get_executor()).ok());
  Write(b.cert, a.key);  // mismatched
  auto eventually = [](auto pred) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!pred() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
    return pred();
  };
  EXPECT_TRUE(eventually(
      [&] { return Value("allocating_webhook_certificate_reload_failures_total") == 1; }));
  EXPECT_EQ(r->Current()->subject(), "/CN=a");
  Write(b);
  EXPECT_TRUE(eventually([&] { return r->Current()->subject() == "/CN=b"; }));
  EXPECT_EQ(Value("allocating_webhook_certificate_reload_failures_total"), 1);
  r->Stop();
  r->Stop();  // idempotent
  work.reset();
  ioc.stop();
  io.join();
}

}  // namespace
}  // namespace aw::server
