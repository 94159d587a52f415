// The resolver's pure parts: GameServer parsing, readiness evaluation, deadline arithmetic and
// the patches it writes.
#include <gtest/gtest.h>

#include "policy/config.h"
#include "resolver/core/evaluate.h"
#include "resolver/core/patches.h"
#include "resolver_test_util.h"

namespace aw::resolver {
namespace {

using namespace std::chrono_literals;
using testing::AllocatingAnnotations;
using testing::GsSpec;
using testing::T0;
using testing::View;

const std::string kReady(keys::kSdkReady);
const std::string kAlloc(keys::kAllocation);
const std::string kLast(keys::kLastAllocated);

policy::GateConfig Config(std::map<std::string, std::string> ann = {}) {
  policy::Policy policy;
  std::map<std::string, std::string, std::less<>> m(ann.begin(), ann.end());
  return policy::ParseGateConfig(m, policy).config;
}

GsSpec Allocating(std::map<std::string, std::string> extra = {}, TimePoint since = T0()) {
  GsSpec s;
  s.annotations = AllocatingAnnotations(since);
  for (auto& [k, v] : extra) s.annotations[k] = v;
  return s;
}

TEST(ParseGameServer, ReadsFields) {
  GsSpec s = Allocating({{kLast, "2026-01-02T03:04:05.5Z"}});
  s.ports = {{"game", 7000}, {"probe", 7001}};
  GameServerView v = View(s);
  EXPECT_EQ(v.namespace_, "default");
  EXPECT_EQ(v.name, "gs-1");
  EXPECT_EQ(v.resource_version, "100");
  EXPECT_EQ(v.state, "Allocating");
  EXPECT_TRUE(v.OptedIn());
  EXPECT_FALSE(v.deleting);
  EXPECT_TRUE(v.annotations.present());
  ASSERT_EQ(v.ports.size(), 2u);
  EXPECT_EQ(v.ports[1].name, "probe");
  EXPECT_EQ(v.ports[1].port, 7001);
  EXPECT_EQ(v.allocation, util::FormatRfc3339Nano(T0()));
  ASSERT_TRUE(v.since.has_value());
  EXPECT_EQ(*v.since, T0());
  EXPECT_EQ(v.Key(), "default/gs-1");
}

TEST(ParseGameServer, ToleratesGarbage) {
  for (const char* json :
       {"null", "[]", "{}", "{\"metadata\":3}", "{\"metadata\":{\"annotations\":[1]}}",
        "{\"status\":{\"ports\":{\"a\":1},\"state\":7}}",
        "{\"status\":{\"ports\":[1,{\"port\":\"x\"}]}}",
        "{\"metadata\":{\"labels\":{\"allocating.agones.dev/enabled\":true}}}"}) {
    rapidjson::Document d;
    d.Parse(json);
    GameServerView v = ParseGameServer(d);
    EXPECT_FALSE(v.OptedIn()) << json;
    EXPECT_TRUE(v.state.empty()) << json;
  }
  GsSpec s = Allocating();
  s.annotations[std::string(keys::kSince)] = "yesterday";
  EXPECT_FALSE(View(s).since.has_value());
}

TEST(Readiness, AnnotationMustEqualAllocationId) {
  GsSpec s = Allocating({}, T0());
  s.annotations[kAlloc] = "2026-01-02T03:00:00.123456789Z";
  s.annotations[kLast] = "2026-01-02T03:00:00.123456789Z";
  EXPECT_TRUE(ReadinessAnnotationProblem(View(s)).has_value());  // not set
  s.annotations[kReady] = "2026-01-02T03:00:00.123456789Z";
  EXPECT_FALSE(ReadinessAnnotationProblem(View(s)).has_value());
}

TEST(Readiness, StaleValueFromPreviousAllocationIsIgnored) {
  GsSpec s = Allocating();
  s.annotations[kAlloc] = "2026-01-02T03:00:00.2Z";
  s.annotations[kLast] = "2026-01-02T03:00:00.2Z";
  s.annotations[kReady] = "2026-01-02T02:00:00.1Z";  // the previous match
  auto problem = ReadinessAnnotationProblem(View(s));
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("stale"), std::string::npos) << *problem;
  Evaluation ev = Evaluate(View(s), Config(), nullptr, T0() + 1s, T0());
  EXPECT_EQ(ev.verdict, Verdict::kWait);
}

TEST(Readiness, TrueOnlyWithoutLastAllocated) {
  GsSpec s = Allocating({{kReady, "true"}});
  EXPECT_FALSE(ReadinessAnnotationProblem(View(s)).has_value());
  s.annotations[kLast] = "2026-01-02T03:00:00Z";
  auto problem = ReadinessAnnotationProblem(View(s));
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find(kLast), std::string::npos);
}

TEST(Readiness, NoAllocationIdNeverConfirms) {
  GsSpec s;
  s.annotations = {{kReady, "true"}};
  EXPECT_TRUE(ReadinessAnnotationProblem(View(s)).has_value());
  Evaluation ev = Evaluate(View(s),
                           Config({{"allocating.agones.dev/require-annotation", "false"},
                                   {"allocating.agones.dev/probe-port", "game"}}),
                           nullptr, T0(), T0());
  EXPECT_NE(ev.verdict, Verdict::kPromote);
}

TEST(Evaluate, IgnoresWhatIsNotAllocating) {
  GsSpec s = Allocating({{kReady, "true"}});
  s.state = "Allocated";
  EXPECT_EQ(Evaluate(View(s), Config(), nullptr, T0(), T0()).verdict, Verdict::kIgnore);
  s.state = "Allocating";
  s.opted_in = false;
  EXPECT_EQ(Evaluate(View(s), Config(), nullptr, T0(), T0()).verdict, Verdict::kIgnore);
  s.opted_in = true;
  s.deleting = true;
  EXPECT_EQ(Evaluate(View(s), Config(), nullptr, T0(), T0()).verdict, Verdict::kIgnore);
}

TEST(Evaluate, PromotesWhenAnnotationMatches) {
  GsSpec s = Allocating({{kReady, util::FormatRfc3339Nano(T0())}});
  Evaluation ev = Evaluate(View(s), Config(), nullptr, T0() + 1s, T0());
  EXPECT_EQ(ev.verdict, Verdict::kPromote);
  EXPECT_TRUE(ev.failed.empty());
}

TEST(Evaluate, DeadlineArithmetic) {
  GsSpec s = Allocating({}, T0());
  auto cfg = Config({{"allocating.agones.dev/timeout", "1m30s"}});
  Evaluation ev = Evaluate(View(s), cfg, nullptr, T0() + 89s, T0());
  EXPECT_EQ(ev.verdict, Verdict::kWait);
  EXPECT_EQ(ev.deadline, T0() + 90s);
  EXPECT_EQ(Evaluate(View(s), cfg, nullptr, T0() + 90s - 1ns, T0()).verdict, Verdict::kWait);
  ev = Evaluate(View(s), cfg, nullptr, T0() + 90s, T0());
  EXPECT_EQ(ev.verdict, Verdict::kTimeOut);
  EXPECT_EQ(ev.action, policy::OnTimeout::kUnhealthy);
  ASSERT_EQ(ev.failed.size(), 1u);
  EXPECT_NE(ev.failed[0].find("not set"), std::string::npos);
  // Default timeout from the policy (30s).
  EXPECT_EQ(Evaluate(View(s), Config(), nullptr, T0(), T0()).deadline, T0() + 30s);
  // Long past (a leader that was down): resolved at once.
  EXPECT_EQ(Evaluate(View(s), cfg, nullptr, T0() + 1h, T0() + 1h).verdict, Verdict::kTimeOut);
}

TEST(Evaluate, DeadlineFromFirstSeenWithoutSince) {
  GsSpec s = Allocating();
  s.annotations.erase(std::string(keys::kSince));
  Evaluation ev = Evaluate(View(s), Config(), nullptr, T0() + 10s, T0() + 5s);
  EXPECT_EQ(ev.deadline, T0() + 35s);
}

TEST(Evaluate, OnTimeoutActions) {
  GsSpec s = Allocating();
  for (auto [text, want] : {std::pair{"Allocated", policy::OnTimeout::kAllocated},
                            std::pair{"Shutdown", policy::OnTimeout::kShutdown},
                            std::pair{"Unhealthy", policy::OnTimeout::kUnhealthy}}) {
    Evaluation ev = Evaluate(View(s), Config({{"allocating.agones.dev/on-timeout", text}}), nullptr,
                             T0() + 31s, T0());
    EXPECT_EQ(ev.verdict, Verdict::kTimeOut);
    EXPECT_EQ(ev.action, want);
  }
}

TEST(Evaluate, HeldScaleDownTimesOutToShutdownNotUnhealthy) {
  // The Agones controller asked to shut it down while Allocating: an Unhealthy server would never
  // be replaced by it, so Unhealthy becomes Shutdown; the other actions stay.
  GsSpec s = Allocating({{std::string(keys::kShutdownRequested), "2026-12-02T14:00:00Z"}});
  for (auto [text, want] : {std::pair{"Allocated", policy::OnTimeout::kAllocated},
                            std::pair{"Shutdown", policy::OnTimeout::kShutdown},
                            std::pair{"Unhealthy", policy::OnTimeout::kShutdown}}) {
    Evaluation ev = Evaluate(View(s), Config({{"allocating.agones.dev/on-timeout", text}}), nullptr,
                             T0() + 31s, T0());
    EXPECT_EQ(ev.verdict, Verdict::kTimeOut);
    EXPECT_EQ(ev.action, want) << text;
  }
}

TEST(Evaluate, ReadyWinsOverDeadline) {
  GsSpec s = Allocating({{kReady, util::FormatRfc3339Nano(T0())}});
  EXPECT_EQ(Evaluate(View(s), Config(), nullptr, T0() + 1h, T0()).verdict, Verdict::kPromote);
}

TEST(Evaluate, ProbeMustPassForTheCurrentTargetAndAllocation) {
  GsSpec s = Allocating({{kReady, util::FormatRfc3339Nano(T0())}});
  auto cfg = Config({{"allocating.agones.dev/probe-port", "http"},
                     {"allocating.agones.dev/probe-path", "/ready"}});
  GameServerView v = View(s);
  Evaluation ev = Evaluate(v, cfg, nullptr, T0() + 1s, T0());
  EXPECT_EQ(ev.verdict, Verdict::kWait);
  ASSERT_TRUE(ev.probe.has_value());
  EXPECT_EQ(ev.probe->type, probe::Type::kHttp);
  EXPECT_EQ(ev.probe->host, "127.0.0.1");
  EXPECT_EQ(ev.probe->port, 8080);
  EXPECT_EQ(ev.probe->path, "/ready");
  ASSERT_EQ(ev.failed.size(), 1u);
  EXPECT_NE(ev.failed[0].find("has not answered"), std::string::npos);

  ProbeObservation bad{v.allocation, *ev.probe, {probe::Status::kFailure, "http 503"}};
  ev = Evaluate(v, cfg, &bad, T0() + 1s, T0());
  EXPECT_EQ(ev.verdict, Verdict::kWait);
  ASSERT_EQ(ev.failed.size(), 1u);
  EXPECT_NE(ev.failed[0].find("http 503"), std::string::npos) << ev.failed[0];

  ProbeObservation good{v.allocation, *ev.probe, {probe::Status::kSuccess, "http 200"}};
  EXPECT_EQ(Evaluate(v, cfg, &good, T0() + 1s, T0()).verdict, Verdict::kPromote);

  ProbeObservation other_alloc{"an earlier one", *ev.probe, {probe::Status::kSuccess, ""}};
  EXPECT_EQ(Evaluate(v, cfg, &other_alloc, T0() + 1s, T0()).verdict, Verdict::kWait);
  ProbeObservation other_target = good;
  other_target.target.port = 9999;
  EXPECT_EQ(Evaluate(v, cfg, &other_target, T0() + 1s, T0()).verdict, Verdict::kWait);

  // Probe passes but annotation missing: still waiting, and both are reported at the deadline.
  s.annotations.erase(kReady);
  ev = Evaluate(View(s), cfg, &bad, T0() + 31s, T0());
  EXPECT_EQ(ev.verdict, Verdict::kTimeOut);
  EXPECT_EQ(ev.failed.size(), 2u);
}

TEST(Evaluate, RequireAnnotationFalseUsesOnlyTheProbe) {
  GsSpec s = Allocating();
  auto cfg = Config({{"allocating.agones.dev/require-annotation", "false"},
                     {"allocating.agones.dev/probe-port", "7777"},
                     {"allocating.agones.dev/probe-type", "udp"}});
  GameServerView v = View(s);
  Evaluation ev = Evaluate(v, cfg, nullptr, T0(), T0());
  ASSERT_TRUE(ev.probe.has_value());
  EXPECT_EQ(ev.probe->type, probe::Type::kUdp);
  EXPECT_EQ(ev.probe->port, 7777);
  ProbeObservation good{v.allocation, *ev.probe, {probe::Status::kSuccess, ""}};
  EXPECT_EQ(Evaluate(v, cfg, &good, T0(), T0()).verdict, Verdict::kPromote);
}

TEST(Evaluate, MissingPortsAndAddress) {
  GsSpec s = Allocating({{kReady, util::FormatRfc3339Nano(T0())}});
  auto cfg = Config({{"allocating.agones.dev/probe-port", "query"}});
  Evaluation ev = Evaluate(View(s), cfg, nullptr, T0(), T0());
  EXPECT_EQ(ev.verdict, Verdict::kWait);
  EXPECT_FALSE(ev.probe.has_value());
  ASSERT_EQ(ev.failed.size(), 1u);
  EXPECT_NE(ev.failed[0].find("\"query\" not found in status.ports"), std::string::npos);

  s.ports.clear();
  EXPECT_FALSE(
      Evaluate(View(s), Config({{"allocating.agones.dev/probe-port", "game"}}), nullptr, T0(), T0())
          .probe.has_value());
  s.ports = {{"game", 7777}};
  s.address = "";
  ev = Evaluate(View(s), Config({{"allocating.agones.dev/probe-port", "game"}}), nullptr, T0(),
                T0());
  EXPECT_FALSE(ev.probe.has_value());
  EXPECT_NE(ev.failed[0].find("status.address"), std::string::npos);
}

TEST(Evaluate, NeitherCheckNeverPromotes) {
  GsSpec s = Allocating();
  auto cfg = Config({{"allocating.agones.dev/require-annotation", "false"}});
  EXPECT_EQ(Evaluate(View(s), cfg, nullptr, T0(), T0()).verdict, Verdict::kWait);
  EXPECT_EQ(Evaluate(View(s), cfg, nullptr, T0() + 31s, T0()).verdict, Verdict::kTimeOut);
}

TEST(Patches, PromoteTestsVersionAndAllocation) {
  GsSpec s = Allocating();
  s.annotations[kAlloc] = "a/b~c";
  std::string p = PromotePatch(View(s));
  EXPECT_EQ(p,
            "[{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"100\"},"
            "{\"op\":\"test\",\"path\":\"/metadata/annotations/allocating.agones.dev~1allocation\","
            "\"value\":\"a/b~c\"},"
            "{\"op\":\"replace\",\"path\":\"/status/state\",\"value\":\"Allocated\"},"
            "{\"op\":\"add\",\"path\":\"/metadata/annotations/allocating.agones.dev~1confirmed\","
            "\"value\":\"a/b~c\"},"
            "{\"op\":\"add\",\"path\":\"/metadata/annotations/allocating.agones.dev~1outcome\","
            "\"value\":\"Confirmed\"}]");
}

TEST(Patches, TimeoutActions) {
  GameServerView v = View(Allocating());
  std::string unhealthy = TimeoutPatch(v, policy::OnTimeout::kUnhealthy);
  EXPECT_NE(unhealthy.find("\"value\":\"Unhealthy\""), std::string::npos);
  EXPECT_NE(unhealthy.find("\"value\":\"TimedOut\""), std::string::npos);
  EXPECT_EQ(unhealthy.find("confirmed"), std::string::npos);
  std::string allocated = TimeoutPatch(v, policy::OnTimeout::kAllocated);
  EXPECT_NE(allocated.find("confirmed\",\"value\":\"" + v.allocation), std::string::npos);
  EXPECT_NE(TimeoutPatch(v, policy::OnTimeout::kShutdown).find("\"Shutdown\""), std::string::npos);
}

TEST(Patches, AddsTheAnnotationsMapWhenAbsent) {
  rapidjson::Document d;
  d.Parse(
      "{\"metadata\":{\"name\":\"x\",\"resourceVersion\":\"7\"},\"status\":{\"state\":"
      "\"Allocating\"}}");
  std::string p = TimeoutPatch(ParseGameServer(d), policy::OnTimeout::kUnhealthy);
  EXPECT_NE(p.find("{\"op\":\"add\",\"path\":\"/metadata/annotations\",\"value\":{"
                   "\"allocating.agones.dev/outcome\":\"TimedOut\"}}"),
            std::string::npos)
      << p;
}

}  // namespace
}  // namespace aw::resolver

namespace aw::resolver {
namespace {

using testing::GsSpec;
using testing::T0;
using testing::View;
using namespace std::chrono_literals;

// Issue 27: an opted-in server that reached Allocated without the gate (admission unreachable).
TEST(EvaluateBypass, RecordCountsFromTheAllocation) {
  policy::Policy policy;
  policy::GateConfig cfg =
      policy::ParseGateConfig(std::map<std::string, std::string, std::less<>>{}, policy).config;
  GsSpec s;
  s.state = "Allocated";
  s.annotations = {{std::string(keys::kLastAllocated), util::FormatRfc3339Nano(T0())}};
  Evaluation ev = Evaluate(View(s), cfg, nullptr, T0() + 5s, T0() + 5s);
  EXPECT_EQ(ev.verdict, Verdict::kRecordBypass);
  EXPECT_EQ(ev.bypass_allocation, util::FormatRfc3339Nano(T0()));
  EXPECT_EQ(ev.bypass_since, T0());
  EXPECT_EQ(ev.bypass_since_text, util::FormatRfc3339Nano(T0()));
  // `since` keeps last-allocated's own text (trailing zeros written by a client other than Agones).
  const std::string padded = "2026-12-04T10:56:52.563377300Z";
  s.annotations[std::string(keys::kLastAllocated)] = padded;
  ev = Evaluate(View(s), cfg, nullptr, *util::ParseRfc3339(padded) + 5s,
                *util::ParseRfc3339(padded) + 5s);
  EXPECT_EQ(ev.verdict, Verdict::kRecordBypass);
  EXPECT_EQ(ev.bypass_allocation, padded);
  EXPECT_EQ(ev.bypass_since_text, padded);
  s.annotations[std::string(keys::kLastAllocated)] = util::FormatRfc3339Nano(T0());
  // A last-allocated in the future (skewed or forged clock) counts from now; the id stays.
  ev = Evaluate(View(s), cfg, nullptr, T0() - 1h, T0() - 1h);
  EXPECT_EQ(ev.bypass_since, T0() - 1h);
  EXPECT_EQ(ev.bypass_since_text, util::FormatRfc3339Nano(T0() - 1h));
  EXPECT_EQ(ev.bypass_allocation, util::FormatRfc3339Nano(T0()));
  // Unparsable last-allocated: still the id; counts from now.
  s.annotations[std::string(keys::kLastAllocated)] = "yesterday";
  ev = Evaluate(View(s), cfg, nullptr, T0(), T0());
  EXPECT_EQ(ev.verdict, Verdict::kRecordBypass);
  EXPECT_EQ(ev.bypass_allocation, "yesterday");
  EXPECT_EQ(ev.bypass_since, T0());
  // Not opted in, or being deleted: nothing.
  s.opted_in = false;
  EXPECT_EQ(Evaluate(View(s), cfg, nullptr, T0(), T0()).verdict, Verdict::kIgnore);
  s.opted_in = true;
  s.deleting = true;
  EXPECT_EQ(Evaluate(View(s), cfg, nullptr, T0(), T0()).verdict, Verdict::kIgnore);
}

TEST(EvaluateBypass, OpenBypassGetsTheSameChecksAndNeverAnAction) {
  policy::Policy policy;
  policy::GateConfig cfg =
      policy::ParseGateConfig(
          std::map<std::string, std::string, std::less<>>{{"allocating.agones.dev/timeout", "10s"}},
          policy)
          .config;
  const std::string id = util::FormatRfc3339Nano(T0());
  GsSpec s;
  s.state = "Allocated";
  s.annotations = {{std::string(keys::kLastAllocated), id},
                   {std::string(keys::kSince), id},
                   {std::string(keys::kAllocation), id},
                   {std::string(keys::kBypassed), id}};
  Evaluation ev = Evaluate(View(s), cfg, nullptr, T0() + 5s, T0() + 5s);
  EXPECT_EQ(ev.verdict, Verdict::kWait);
  EXPECT_EQ(ev.deadline, T0() + 10s);
  ev = Evaluate(View(s), cfg, nullptr, T0() + 10s, T0() + 5s);
  EXPECT_EQ(ev.verdict, Verdict::kBypassDeadline);
  ASSERT_NE(ev.bypass_action, nullptr);
  EXPECT_EQ(ev.bypass_action->outcome, "Unconfirmed");
  // A stale readiness value never counts; the current id does, even past the deadline.
  s.annotations[std::string(keys::kSdkReady)] = "2020-01-01T00:00:00Z";
  EXPECT_EQ(Evaluate(View(s), cfg, nullptr, T0() + 5s, T0()).verdict, Verdict::kWait);
  s.annotations[std::string(keys::kSdkReady)] = id;
  EXPECT_EQ(Evaluate(View(s), cfg, nullptr, T0() + 1h, T0()).verdict, Verdict::kConfirmBypass);
}

}  // namespace
}  // namespace aw::resolver
