// Server configuration flags and their validation.
#include <gtest/gtest.h>

#include "admission/io/config.h"
#include "util/io/log.h"

namespace aw::admission {
namespace {

struct Parsed {
  ServerConfig cfg;
  policy::Policy policy;
  log::Flags log;
  flags::FlagSet::Result result;
};

Parsed Parse(const std::vector<std::string>& args) {
  Parsed p;
  flags::FlagSet fs("allocating-webhook", "test");
  RegisterServerFlags(fs, &p.cfg);
  RegisterPolicyFlags(fs, &p.policy);
  log::RegisterFlags(fs, &p.log);
  p.result = fs.Parse(args);
  return p;
}

TEST(ServerConfig, Defaults) {
  auto p = Parse({});
  ASSERT_EQ(p.result.status, flags::FlagSet::Status::kOk);
  EXPECT_EQ(p.cfg.https.port, 8443);
  EXPECT_EQ(p.cfg.health_port, 8081);
  EXPECT_EQ(p.cfg.https.bind_address, "0.0.0.0");
  EXPECT_EQ(p.cfg.https.limits.max_body_bytes, 7u * 1024 * 1024);
  EXPECT_FALSE(p.cfg.crd_accepts_allocating);
  EXPECT_EQ(p.policy.agones_controller_users,
            std::vector<std::string>{"system:serviceaccount:agones-system:agones-controller"});
  EXPECT_EQ(p.policy.default_timeout, std::chrono::seconds(30));
  EXPECT_EQ(p.policy.max_timeout, std::chrono::minutes(10));
  EXPECT_EQ(p.policy.default_probe_period, std::chrono::milliseconds(250));
  // Certificates are required.
  Status err = Validate(p.cfg, p.policy);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.message().find("--tls-cert-file"), std::string::npos);
}

TEST(ServerConfig, AllFlagsSet) {
  auto p = Parse({"--port=9443", "--health-port", "9081", "--bind-address=127.0.0.1",
                  "--tls-cert-file=/c", "--tls-key-file=/k", "--crd-accepts-allocating",
                  "--trusted-users=a,b", "--agones-controller-users=c", "--default-timeout=1m",
                  "--max-timeout=20m", "--default-probe-period=1s", "--max-connections=10",
                  "--read-timeout=2s", "--write-timeout=3s", "--keep-alive-timeout=95s",
                  "--max-body-bytes=2048", "--log-level=debug", "--log-format=text"});
  ASSERT_EQ(p.result.status, flags::FlagSet::Status::kOk) << p.result.message;
  EXPECT_TRUE(Validate(p.cfg, p.policy).ok());
  EXPECT_EQ(p.cfg.https.port, 9443);
  EXPECT_EQ(p.cfg.health_port, 9081);
  EXPECT_TRUE(p.cfg.crd_accepts_allocating);
  EXPECT_EQ(p.policy.trusted_users, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(p.policy.agones_controller_users, std::vector<std::string>{"c"});
  EXPECT_EQ(p.policy.default_timeout, std::chrono::minutes(1));
  EXPECT_EQ(p.cfg.https.max_connections, 10u);
  EXPECT_EQ(p.cfg.https.read_timeout, std::chrono::seconds(2));
  EXPECT_EQ(p.cfg.https.idle_timeout, std::chrono::seconds(95));
  EXPECT_EQ(p.cfg.https.limits.max_body_bytes, 2048u);
  EXPECT_EQ(p.log.format, "text");
  EXPECT_EQ(p.log.level, "debug");
}

TEST(ServerConfig, InconsistentCombinationsRejected) {
  auto base = std::vector<std::string>{"--tls-cert-file=/c", "--tls-key-file=/k"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = Parse(args);
    EXPECT_EQ(p.result.status, flags::FlagSet::Status::kOk) << p.result.message;
    return !Validate(p.cfg, p.policy).ok();  // true: rejected
  };
  EXPECT_FALSE(with({}));
  EXPECT_TRUE(with({"--port=8081"}));
  EXPECT_TRUE(with({"--default-timeout=20m"}));
  EXPECT_TRUE(with({"--min-timeout=5m", "--max-timeout=1m"}));
  EXPECT_TRUE(with({"--default-probe-period=10ms"}));
  EXPECT_TRUE(with({"--min-probe-period=2s", "--max-probe-period=1s"}));
  EXPECT_TRUE(with({"--max-request-line-bytes=65536", "--max-header-bytes=4096"}));
}

TEST(ServerConfig, ConnectionLayerFlags) {
  auto d = Parse({});
  EXPECT_EQ(d.cfg.https.io_threads, 2u);
  EXPECT_EQ(d.cfg.https.handshake_timeout, std::chrono::seconds(5));
  EXPECT_EQ(d.cfg.https.limits.max_request_line_bytes, 8192u);
  EXPECT_EQ(d.cfg.https.limits.max_header_bytes, 32768u);
  EXPECT_EQ(d.cfg.https.limits.max_header_count, 100u);
  EXPECT_EQ(d.cfg.health.max_connections, 64u);
  auto p =
      Parse({"--io-threads=4", "--handshake-timeout=2s", "--max-request-line-bytes=1024",
             "--max-header-bytes=4096", "--max-header-count=20", "--health-max-connections=8"});
  ASSERT_EQ(p.result.status, flags::FlagSet::Status::kOk) << p.result.message;
  EXPECT_EQ(p.cfg.https.io_threads, 4u);
  EXPECT_EQ(p.cfg.https.handshake_timeout, std::chrono::seconds(2));
  EXPECT_EQ(p.cfg.https.limits.max_request_line_bytes, 1024u);
  EXPECT_EQ(p.cfg.https.limits.max_header_bytes, 4096u);
  EXPECT_EQ(p.cfg.https.limits.max_header_count, 20u);
  EXPECT_EQ(p.cfg.health.max_connections, 8u);
}

}  // namespace
}  // namespace aw::admission
