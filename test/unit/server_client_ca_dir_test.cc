// ClientCaReloader reading a directory of client CAs, as Agones' allocator-client-ca Secret is
// mounted: every *.crt / *.pem (hidden entries skipped), reloaded when the set or a file changes.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "server/client_ca_reloader.h"
#include "test_certs.h"

namespace aw::server {
namespace {

namespace fs = std::filesystem;
using testing::Cert;
using testing::MakeCert;

class ClientCaDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("client-ca-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  fs::path dir_;
  prometheus::Registry registry_;
};

TEST_F(ClientCaDirTest, EveryCrtAndPemIsTrustedAndChangesAreSeen) {
  Cert a = MakeCert("matchmaker-a", nullptr, true);
  Cert b = MakeCert("matchmaker-b", nullptr, true);
  Cert c = MakeCert("matchmaker-c", nullptr, true);
  Write("allocator-client.default.crt", a.cert_pem());
  Write("director.pem", b.cert_pem());
  Write("README.txt", "not a certificate, not read");
  fs::create_directories(dir_ / "..data");  // a Secret volume's internals: skipped
  Write("..data/hidden.crt", "junk");
  ClientCaReloader r(dir_.string(), registry_, std::chrono::milliseconds(50));
  ASSERT_TRUE(r.LoadInitial().ok());
  EXPECT_EQ(r.CurrentCa()->size(), 2u);
  EXPECT_FALSE(r.PollOnce());  // unchanged
  Write("third.crt", c.cert_pem());
  EXPECT_TRUE(r.PollOnce());
  EXPECT_EQ(r.CurrentCa()->size(), 3u);
  fs::remove(dir_ / "director.pem");
  EXPECT_TRUE(r.PollOnce());
  EXPECT_EQ(r.CurrentCa()->size(), 2u);
  // A file without a certificate is skipped (as agones-allocator does); the rest still count.
  Write("broken.crt", "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n");
  EXPECT_TRUE(r.PollOnce());
  EXPECT_EQ(r.CurrentCa()->size(), 2u);
}

TEST_F(ClientCaDirTest, DirectoryWithoutCertificatesIsAnErrorAndKeepsTheOldBundle) {
  ClientCaReloader empty(dir_.string(), registry_);
  Status s = empty.LoadInitial();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no *.crt or *.pem"), std::string::npos) << s.message();

  Cert a = MakeCert("matchmaker-a", nullptr, true);
  Write("a.crt", a.cert_pem());
  ClientCaReloader r(dir_.string(), registry_);
  ASSERT_TRUE(r.LoadInitial().ok());
  Write("a.crt", "garbage");
  EXPECT_FALSE(r.PollOnce());
  EXPECT_EQ(r.CurrentCa()->size(), 1u);  // the last good bundle keeps verifying
}

TEST_F(ClientCaDirTest, SingleFileStillWorks) {
  Cert a = MakeCert("matchmaker-a", nullptr, true);
  Write("ca.crt", a.cert_pem());
  ClientCaReloader r((dir_ / "ca.crt").string(), registry_);
  ASSERT_TRUE(r.LoadInitial().ok());
  EXPECT_EQ(r.CurrentCa()->size(), 1u);
}

// The reloader's timer on an io_context: once started it installs a change without any call from
// the test, and Stop() returns promptly.
TEST_F(ClientCaDirTest, StartedReloaderPicksUpAChangeAndStopsPromptly) {
  using namespace std::chrono_literals;
  Cert a = MakeCert("matchmaker-a", nullptr, true);
  Cert b = MakeCert("matchmaker-b", nullptr, true);
  Write("a.crt", a.cert_pem());
  // The io_context the reloader's timer runs on (the health server's in the binaries).
  boost::asio::io_context ioc;
  auto work = boost::asio::make_work_guard(ioc);
  std::thread io([&ioc] { ioc.run(); });
  ClientCaReloader r(dir_.string(), registry_, 10ms);
  ASSERT_TRUE(r.LoadInitial().ok());
  r.Start(ioc.get_executor());
  Write("b.crt", b.cert_pem());
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (r.CurrentCa()->size() != 2u && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);  // installed by the reloader's thread: nothing to await
  }
  EXPECT_EQ(r.CurrentCa()->size(), 2u) << "the started reloader never polled";
  const auto asked = std::chrono::steady_clock::now();
  r.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 2s);
  r.Stop();  // idempotent
  work.reset();
  ioc.stop();
  io.join();
}

}  // namespace
}  // namespace aw::server
