// The health port's /healthz (liveness) and /readyz (readiness) logic: the checks registered,
// what a failing one answers, and that a check that throws counts as failing.
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <stdexcept>

#include "server/health_server.h"

namespace aw::server {
namespace {

TEST(HealthServer, LivenessWithoutChecksIsAlive) {
  prometheus::Registry registry;
  HealthServer health("127.0.0.1", 0, registry);
  auto [alive, body] = health.Liveness(false);
  EXPECT_TRUE(alive);
  EXPECT_EQ(body, "ok\n");
}

TEST(HealthServer, AFailingLivenessCheckFailsLivenessButNotReadiness) {
  prometheus::Registry registry;
  HealthServer health("127.0.0.1", 0, registry);
  bool wedged = false;
  health.AddLivenessCheck("resolver-loop", [&wedged]() -> std::optional<std::string> {
    if (wedged) return "no pass for 61s";
    return std::nullopt;
  });
  EXPECT_TRUE(health.Liveness(false).first);
  EXPECT_EQ(health.Liveness(true).second, "[+] resolver-loop ok\nok\n");
  wedged = true;
  auto [alive, body] = health.Liveness(false);
  EXPECT_FALSE(alive);
  EXPECT_EQ(body, "[-] resolver-loop failed: no pass for 61s\nnot alive\n");
  EXPECT_TRUE(health.Readiness(false).first);  // liveness checks are not readiness checks
}

TEST(HealthServer, AThrowingCheckFails) {
  prometheus::Registry registry;
  HealthServer health("127.0.0.1", 0, registry);
  health.AddLivenessCheck("broken",
                          []() -> std::optional<std::string> { throw std::runtime_error("boom"); });
  auto [alive, body] = health.Liveness(false);
  EXPECT_FALSE(alive);
  EXPECT_EQ(body, "[-] broken failed: check failed: boom\nnot alive\n");
}

}  // namespace
}  // namespace aw::server
