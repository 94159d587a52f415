// Gate configuration annotations (policy/config.h): defaults, values, bounds, messages.
#include <gtest/gtest.h>

#include "contract/keys.h"
#include "policy/config.h"

namespace aw::policy {
namespace {

using Map = std::map<std::string, std::string, std::less<>>;
namespace keys = aw::keys;

TEST(GateConfig, DefaultsFromPolicy) {
  Policy p;
  p.default_timeout = std::chrono::seconds(42);
  p.default_probe_period = std::chrono::milliseconds(300);
  GateConfigResult r = ParseGateConfig(Map{}, p);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.config.timeout, std::chrono::seconds(42));
  EXPECT_EQ(r.config.probe_period, std::chrono::milliseconds(300));
  EXPECT_EQ(r.config.on_timeout, OnTimeout::kUnhealthy);
  EXPECT_EQ(r.config.mode, GateMode::kRewrite);
  EXPECT_TRUE(r.config.require_annotation);
  EXPECT_FALSE(r.config.probe_port);
  EXPECT_EQ(r.config.probe_type, ProbeType::kHttp);
  EXPECT_EQ(r.config.probe_path, "/");
  EXPECT_FALSE(r.config.CanNeverConfirm());
  EXPECT_TRUE(r.warnings.empty());
}

TEST(GateConfig, ParsesEveryKey) {
  Map m = {
      {std::string(keys::kTimeout), "1m30s"},    {std::string(keys::kOnTimeout), "shutdown"},
      {std::string(keys::kMode), "Reject"},      {std::string(keys::kRequireAnnotation), "FALSE"},
      {std::string(keys::kProbePort), "game"},   {std::string(keys::kProbeType), "UDP"},
      {std::string(keys::kProbePeriod), "500ms"}};
  GateConfigResult r = ParseGateConfig(m, Policy{});
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  EXPECT_EQ(r.config.timeout, std::chrono::seconds(90));
  EXPECT_EQ(r.config.on_timeout, OnTimeout::kShutdown);
  EXPECT_EQ(r.config.mode, GateMode::kReject);
  EXPECT_FALSE(r.config.require_annotation);
  ASSERT_TRUE(r.config.probe_port);
  EXPECT_EQ(r.config.probe_port->name, "game");
  EXPECT_FALSE(r.config.probe_port->IsNumber());
  EXPECT_EQ(r.config.probe_type, ProbeType::kUdp);
  EXPECT_EQ(r.config.probe_period, std::chrono::milliseconds(500));
  EXPECT_FALSE(r.config.CanNeverConfirm());
  m[std::string(keys::kProbePort)] = "7654";
  m[std::string(keys::kProbeType)] = "http";
  m[std::string(keys::kProbePath)] = "/ready?x=1";
  m[std::string(keys::kOnTimeout)] = "Allocated";
  r = ParseGateConfig(m, Policy{});
  ASSERT_TRUE(r.ok()) << r.ErrorText();
  EXPECT_EQ(r.config.probe_port->number, 7654);
  EXPECT_EQ(r.config.probe_path, "/ready?x=1");
  EXPECT_EQ(r.config.on_timeout, OnTimeout::kAllocated);
  EXPECT_EQ(OnTimeoutName(r.config.on_timeout), "Allocated");
  EXPECT_EQ(GateModeName(GateMode::kReject), "reject");
  EXPECT_EQ(ProbeTypeName(ProbeType::kTcp), "tcp");
}

TEST(GateConfig, BoundsAreInclusive) {
  Policy p;
  for (auto [v, ok] :
       {std::pair{"1s", true}, {"10m", true}, {"999ms", false}, {"10m1ns", false}, {"0", false}}) {
    GateConfigResult r = ParseGateConfig(Map{{std::string(keys::kTimeout), v}}, p);
    EXPECT_EQ(r.ok(), ok) << v;
  }
  for (auto [v, ok] : {std::pair{"50ms", true}, {"1m", true}, {"49ms", false}, {"61s", false}}) {
    GateConfigResult r = ParseGateConfig(Map{{std::string(keys::kProbePeriod), v}}, p);
    EXPECT_EQ(r.ok(), ok) << v;
  }
}

TEST(GateConfig, ErrorsNameKeyAndValueAndKeepDefaults) {
  Map m = {{std::string(keys::kTimeout), "90x"}, {std::string(keys::kMode), "strict"}};
  GateConfigResult r = ParseGateConfig(m, Policy{});
  ASSERT_EQ(r.errors.size(), 2u);
  ASSERT_EQ(r.error_keys.size(), 2u);
  EXPECT_EQ(r.errors[0],
            "allocating.agones.dev/timeout: \"90x\" is not a duration (e.g. 30s, 1m30s)");
  EXPECT_EQ(r.error_keys[0], keys::kTimeout);
  EXPECT_EQ(r.errors[1], "allocating.agones.dev/mode: \"strict\" is not one of rewrite, reject");
  EXPECT_EQ(r.error_keys[1], keys::kMode);
  EXPECT_EQ(r.config.timeout, std::chrono::seconds(30));
  EXPECT_EQ(r.config.mode, GateMode::kRewrite);
  EXPECT_NE(r.ErrorText().find("; "), std::string::npos);
  GateConfigResult b = ParseGateConfig(Map{{std::string(keys::kTimeout), "20m"}}, Policy{});
  EXPECT_EQ(b.errors[0],
            "allocating.agones.dev/timeout: \"20m\" is out of bounds (must be between 1s and "
            "10m0s)");
}

TEST(GateConfig, HostileValuesAreQuotedAndTruncated) {
  GateConfigResult r = ParseGateConfig(
      Map{{std::string(keys::kMode), std::string("a\"b\n") + std::string(500, 'z')}}, Policy{});
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("a\\\"b\\x0a"), std::string::npos) << r.errors[0];
  EXPECT_LT(r.errors[0].size(), 200u);
}

TEST(GateConfig, CanNeverConfirm) {
  GateConfigResult r =
      ParseGateConfig(Map{{std::string(keys::kRequireAnnotation), "false"}}, Policy{});
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.config.CanNeverConfirm());
  EXPECT_NE(CanNeverConfirmMessage().find("allocating.agones.dev/require-annotation"),
            std::string::npos);
  // An invalid probe-port does not count as a probe.
  GateConfigResult bad = ParseGateConfig(
      Map{{std::string(keys::kRequireAnnotation), "false"}, {std::string(keys::kProbePort), "0"}},
      Policy{});
  EXPECT_TRUE(bad.config.CanNeverConfirm());
}

TEST(GateConfig, Warnings) {
  GateConfigResult r = ParseGateConfig(Map{{std::string(keys::kProbeType), "tcp"}}, Policy{});
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(
      r.warnings[0],
      "allocating.agones.dev/probe-type has no effect without allocating.agones.dev/probe-port");
  GateConfigResult t = ParseGateConfig(Map{{std::string(keys::kProbePort), "1"},
                                           {std::string(keys::kProbeType), "tcp"},
                                           {std::string(keys::kProbePath), "/x"}},
                                       Policy{});
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("probe-path has no effect"), std::string::npos);
}

TEST(GateConfig, LookupFunctionOverload) {
  GateConfigResult r = ParseGateConfig(
      [](std::string_view k) -> std::optional<std::string_view> {
        if (k == keys::kTimeout) return "2m";
        return std::nullopt;
      },
      Policy{});
  EXPECT_EQ(r.config.timeout, std::chrono::minutes(2));
  EXPECT_EQ(ConfigAnnotationKeys().size(), 10u);
}

TEST(GateConfig, OnScaleDown) {
  auto parse = [](std::optional<std::string_view> v) {
    return ParseGateConfig(
        [v](std::string_view k) -> std::optional<std::string_view> {
          if (k == keys::kOnScaleDown) return v;
          return std::nullopt;
        },
        Policy{});
  };
  EXPECT_EQ(parse(std::nullopt).config.on_scale_down, OnScaleDown::kShutdown);
  EXPECT_EQ(parse("Hold").config.on_scale_down, OnScaleDown::kHold);
  EXPECT_EQ(parse("hold").config.on_scale_down, OnScaleDown::kHold);
  EXPECT_EQ(parse("SHUTDOWN").config.on_scale_down, OnScaleDown::kShutdown);
  GateConfigResult bad = parse("Drain");
  EXPECT_EQ(bad.config.on_scale_down, OnScaleDown::kShutdown);
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_EQ(bad.error_keys[0], keys::kOnScaleDown);
  EXPECT_NE(bad.errors[0].find("\"Drain\" is not one of Shutdown, Hold"), std::string::npos)
      << bad.errors[0];
  EXPECT_EQ(OnScaleDownName(OnScaleDown::kHold), "Hold");
}

}  // namespace
}  // namespace aw::policy
