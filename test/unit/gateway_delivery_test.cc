// "No server lost": the gateway's annotations on a forwarded request, idempotency keys, the
// answer built from a GameServer for a retry, the gateway's patches, and the resolver's release
// of a server the gateway never delivered (table rows, Evaluate, the patch).
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <string>
#include <vector>

#include "contract/keys.h"
#include "gateway/delivery.h"
#include "policy/config.h"
#include "policy/decision_table.h"
#include "resolver/core/evaluate.h"
#include "resolver/core/patches.h"
#include "resolver_test_util.h"
#include "util/time_format.h"

namespace aw {
namespace {

using namespace std::chrono_literals;
using resolver::testing::AllocatingAnnotations;
using resolver::testing::GsSpec;
using resolver::testing::T0;
using resolver::testing::View;

rapidjson::Document Parse(const std::string& s) {
  rapidjson::Document d;
  d.Parse(s.data(), s.size());
  EXPECT_FALSE(d.HasParseError()) << s;
  return d;
}

std::string Annotation(const rapidjson::Document& d, std::string_view key) {
  const auto& ann = d["metadata"]["annotations"];
  auto it = ann.FindMember(rapidjson::StringRef(key.data(), key.size()));
  return it == ann.MemberEnd() ? "<absent>" : it->value.GetString();
}

TEST(IdempotencyKey, BoundedLengthAndCharset) {
  EXPECT_TRUE(gateway::ValidateIdempotencyKey("match-42:attempt_1.a~b").ok());
  EXPECT_TRUE(gateway::ValidateIdempotencyKey(std::string(128, 'k')).ok());
  Status empty = gateway::ValidateIdempotencyKey("");
  EXPECT_FALSE(empty.ok());
  EXPECT_NE(empty.message().find("1 to 128"), std::string::npos) << empty.message();
  EXPECT_FALSE(gateway::ValidateIdempotencyKey(std::string(129, 'k')).ok());
  for (const std::string& bad :
       std::vector<std::string>{"a b", "a/b", "é", "a\"b", "a\nb", std::string("a\0b", 3)}) {
    Status s = gateway::ValidateIdempotencyKey(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("X-Allocating-Idempotency-Key"), std::string::npos);
  }
}

TEST(GatewayAnnotations, AddedToTheRequestsMetadata) {
  std::string out;
  ASSERT_TRUE(gateway::WithGatewayAnnotations(
                  R"({"namespace":"ns1","metadata":{"labels":{"a":"b"},"annotations":{"x":"y"}}})",
                  "2026-01-02T03:04:05Z", "k-1", &out)
                  .ok());
  auto d = Parse(out);
  EXPECT_STREQ(d["namespace"].GetString(), "ns1");
  EXPECT_STREQ(d["metadata"]["labels"]["a"].GetString(), "b");
  EXPECT_EQ(Annotation(d, "x"), "y");
  EXPECT_EQ(Annotation(d, keys::kAnswerBy), "2026-01-02T03:04:05Z");
  EXPECT_EQ(Annotation(d, keys::kRequestKey), "k-1");

  // No metadata at all, no key: answer-by only.
  ASSERT_TRUE(gateway::WithGatewayAnnotations("{}", "T", "", &out).ok());
  d = Parse(out);
  EXPECT_EQ(Annotation(d, keys::kAnswerBy), "T");
  EXPECT_EQ(Annotation(d, keys::kRequestKey), "<absent>");
  // metadata: null, annotations: null
  ASSERT_TRUE(
      gateway::WithGatewayAnnotations(R"({"metadata":{"annotations":null}})", "T", "", &out).ok());
  EXPECT_EQ(Annotation(Parse(out), keys::kAnswerBy), "T");
}

TEST(GatewayAnnotations, ARequestMayNotSetTheGatewaysKeys) {
  for (std::string_view k : {keys::kAnswerBy, keys::kRequestKey, keys::kDelivered}) {
    std::string body = R"({"metadata":{"annotations":{")" + std::string(k) + R"(":"x"}}})";
    std::string out;
    Status s = gateway::WithGatewayAnnotations(body, "T", "", &out);
    ASSERT_FALSE(s.ok()) << k;
    EXPECT_NE(s.message().find(k), std::string::npos) << s.message();
  }
}

TEST(GatewayAnswer, BuiltFromTheGameServer) {
  GsSpec spec;
  spec.state = "Allocated";
  spec.annotations = AllocatingAnnotations(T0());
  spec.annotations[std::string(keys::kRequestKey)] = "k";
  auto gs = Parse(resolver::testing::GsJson(spec));
  std::string out;
  ASSERT_TRUE(gateway::AnswerFromGameServer(policy::ParseGameServer(gs), &out).ok());
  auto d = Parse(out);
  EXPECT_STREQ(d["gameServerName"].GetString(), "gs-1");
  EXPECT_STREQ(d["address"].GetString(), "127.0.0.1");
  EXPECT_STREQ(d["source"].GetString(), "local");
  ASSERT_TRUE(d["ports"].IsArray());
  ASSERT_EQ(d["ports"].Size(), 2u);
  EXPECT_STREQ(d["ports"][0]["name"].GetString(), "game");
  EXPECT_EQ(d["ports"][0]["port"].GetInt(), 7777);
  EXPECT_TRUE(d["addresses"].IsArray());
  EXPECT_TRUE(d["counters"].IsObject());
  EXPECT_TRUE(d["lists"].IsObject());
  EXPECT_EQ(Annotation(d, keys::kRequestKey), "k");
  EXPECT_STREQ(d["metadata"]["labels"]["allocating.agones.dev/enabled"].GetString(), "true");
  EXPECT_FALSE(gateway::AnswerFromGameServer(policy::ParseGameServer(Parse("[]")), &out).ok());
}

TEST(GatewayAnswer, HoldsRequest) {
  GsSpec spec;
  spec.annotations = AllocatingAnnotations(T0());
  EXPECT_TRUE(gateway::HoldsRequest(View(spec)));
  spec.state = "Allocated";
  EXPECT_TRUE(gateway::HoldsRequest(View(spec)));
  spec.annotations[std::string(keys::kOutcome)] = "Undelivered";
  EXPECT_FALSE(gateway::HoldsRequest(View(spec)));  // released
  spec.annotations.erase(std::string(keys::kOutcome));
  spec.deleting = true;
  EXPECT_FALSE(gateway::HoldsRequest(View(spec)));
  spec.deleting = false;
  for (std::string st : {"Ready", "Shutdown", "Unhealthy"}) {
    spec.state = st;
    EXPECT_FALSE(gateway::HoldsRequest(View(spec))) << st;
  }
}

TEST(GatewayPatches, DeliveriesAreAListWrittenByCompareAndSwap) {
  EXPECT_EQ(
      gateway::DeliveredPatch("7", "", "T1"),
      R"([{"op":"test","path":"/metadata/resourceVersion","value":"7"},)"
      R"({"op":"test","path":"/status/state","value":"Allocated"},)"
      R"({"op":"add","path":"/metadata/annotations/allocating.agones.dev~1delivered","value":"T1"}])");
  EXPECT_EQ(
      gateway::DeliveredPatch("8", "T1", "T2"),
      R"([{"op":"test","path":"/metadata/resourceVersion","value":"8"},)"
      R"({"op":"test","path":"/status/state","value":"Allocated"},)"
      R"({"op":"add","path":"/metadata/annotations/allocating.agones.dev~1delivered","value":"T1,T2"}])");
  // Another delivery stays: only this one is taken back, and answer-by is left alone.
  EXPECT_EQ(
      gateway::UndeliveredPatch("9", "T1,T2", "T2", "N"),
      R"([{"op":"test","path":"/metadata/resourceVersion","value":"9"},)"
      R"({"op":"add","path":"/metadata/annotations/allocating.agones.dev~1delivered","value":"T1"}])");
  // The last one: the mark goes and answer-by moves to now.
  EXPECT_EQ(
      gateway::UndeliveredPatch("9", "T1", "T1", "N"),
      R"([{"op":"test","path":"/metadata/resourceVersion","value":"9"},)"
      R"({"op":"remove","path":"/metadata/annotations/allocating.agones.dev~1delivered"},)"
      R"({"op":"add","path":"/metadata/annotations/allocating.agones.dev~1answer-by","value":"N"}])");
  EXPECT_EQ(gateway::DeliveriesOf("A,,B,"), (std::vector<std::string>{"A", "B"}));
  EXPECT_TRUE(gateway::DeliveriesOf("").empty());
  EXPECT_EQ(
      gateway::AnswerByPatch("N"),
      R"([{"op":"add","path":"/metadata/annotations/allocating.agones.dev~1answer-by","value":"N"}])");
  EXPECT_EQ(
      gateway::AnswerByPatch("N", "D"),
      R"([{"op":"test","path":"/metadata/annotations/allocating.agones.dev~1answer-by","value":"D"},)"
      R"({"op":"add","path":"/metadata/annotations/allocating.agones.dev~1answer-by","value":"N"}])");
}

// ---- The resolver's release ----

policy::GateConfig Config(std::map<std::string, std::string> ann = {}) {
  policy::Policy policy;
  std::map<std::string, std::string, std::less<>> m(ann.begin(), ann.end());
  return policy::ParseGateConfig(m, policy).config;
}

GsSpec FromGateway(std::string state, resolver::TimePoint answer_by) {
  GsSpec s;
  s.state = std::move(state);
  s.annotations = AllocatingAnnotations(T0());
  s.annotations[std::string(keys::kAnswerBy)] = util::FormatRfc3339Nano(answer_by);
  return s;
}

TEST(ResolverRelease, TableRows) {
  policy::ResolveInput in{.opted_in = true,
                          .phase = policy::Phase::kAllocating,
                          .delivery = policy::Delivery::kOverdue};
  EXPECT_EQ(policy::DecideResolve(in).verdict, policy::ResolveVerdict::kRelease);
  in.ready = true;  // released even when playable: nobody was told its address
  EXPECT_EQ(policy::DecideResolve(in).verdict, policy::ResolveVerdict::kRelease);
  in.phase = policy::Phase::kAllocated;
  EXPECT_EQ(policy::DecideResolve(in).verdict, policy::ResolveVerdict::kRelease);
  in.delivery = policy::Delivery::kPending;
  EXPECT_EQ(policy::DecideResolve(in).verdict, policy::ResolveVerdict::kWait);
  in.delivery = policy::Delivery::kNone;
  EXPECT_EQ(policy::DecideResolve(in).verdict, policy::ResolveVerdict::kIgnore);
  in.delivery = policy::Delivery::kOverdue;
  in.phase = policy::Phase::kOutside;  // already released or otherwise out of the cycle
  EXPECT_EQ(policy::DecideResolve(in).verdict, policy::ResolveVerdict::kIgnore);
  in.phase = policy::Phase::kAllocating;
  in.deleting = true;
  EXPECT_EQ(policy::DecideResolve(in).verdict, policy::ResolveVerdict::kIgnore);
  in.deleting = false;
  in.opted_in = false;
  EXPECT_EQ(policy::DecideResolve(in).verdict, policy::ResolveVerdict::kIgnore);
}

TEST(ResolverRelease, DeliveryOf) {
  const resolver::TimePoint by = T0() + 10s;
  resolver::TimePoint at{};
  GsSpec s = FromGateway("Allocating", by);
  EXPECT_EQ(resolver::DeliveryOf(View(s), by + 2s, 3s, &at), policy::Delivery::kPending);
  EXPECT_EQ(at, by + 3s);
  EXPECT_EQ(resolver::DeliveryOf(View(s), by + 3s, 3s, &at), policy::Delivery::kOverdue);
  s.annotations[std::string(keys::kDelivered)] = "x";
  EXPECT_EQ(resolver::DeliveryOf(View(s), by + 60s, 3s, &at), policy::Delivery::kNone);
  s.annotations.erase(std::string(keys::kDelivered));
  s.annotations[std::string(keys::kOutcome)] = "Undelivered";
  EXPECT_EQ(resolver::DeliveryOf(View(s), by + 60s, 3s, &at), policy::Delivery::kNone);
  s.annotations.erase(std::string(keys::kOutcome));
  s.annotations[std::string(keys::kAnswerBy)] = "not a time";  // broken: never held for nobody
  EXPECT_EQ(resolver::DeliveryOf(View(s), T0(), 3s, &at), policy::Delivery::kOverdue);
  s.annotations.erase(std::string(keys::kAnswerBy));  // not allocated through the gateway
  EXPECT_EQ(resolver::DeliveryOf(View(s), by + 60s, 3s, &at), policy::Delivery::kNone);
}

TEST(ResolverRelease, Evaluate) {
  const resolver::TimePoint by = T0() + 10s;
  // Allocating and undelivered past answer-by + grace: released with on-undelivered.
  GsSpec s = FromGateway("Allocating", by);
  auto ev = resolver::Evaluate(View(s), Config(), nullptr, by + 3s, T0(), 3s);
  EXPECT_EQ(ev.verdict, resolver::Verdict::kRelease);
  EXPECT_EQ(ev.release_action, policy::OnUndelivered::kShutdown);
  ev = resolver::Evaluate(View(s), Config({{"allocating.agones.dev/on-undelivered", "Unhealthy"}}),
                          nullptr, by + 3s, T0(), 3s);
  EXPECT_EQ(ev.release_action, policy::OnUndelivered::kUnhealthy);
  // Before: waits; the requeue comes no later than answer-by + grace.
  ev = resolver::Evaluate(View(s), Config(), nullptr, by, T0(), 3s);
  EXPECT_EQ(ev.verdict, resolver::Verdict::kWait);
  ASSERT_TRUE(ev.release_at.has_value());
  EXPECT_EQ(*ev.release_at, by + 3s);
  // Allocated (confirmed) and never delivered: waits, then is released.
  s = FromGateway("Allocated", by);
  s.annotations[std::string(keys::kConfirmed)] = s.annotations[std::string(keys::kAllocation)];
  s.annotations[std::string(keys::kOutcome)] = "Confirmed";
  ev = resolver::Evaluate(View(s), Config(), nullptr, by + 1s, T0(), 3s);
  EXPECT_EQ(ev.verdict, resolver::Verdict::kWait);
  EXPECT_EQ(ev.deadline, by + 3s);
  ev = resolver::Evaluate(View(s), Config(), nullptr, by + 4s, T0(), 3s);
  EXPECT_EQ(ev.verdict, resolver::Verdict::kRelease);
  // Delivered: left alone for good.
  s.annotations[std::string(keys::kDelivered)] = "x";
  ev = resolver::Evaluate(View(s), Config(), nullptr, by + 4s, T0(), 3s);
  EXPECT_EQ(ev.verdict, resolver::Verdict::kIgnore);
}

TEST(ResolverRelease, Patch) {
  GsSpec s = FromGateway("Allocated", T0());
  std::string alloc = s.annotations[std::string(keys::kAllocation)];
  EXPECT_EQ(
      resolver::ReleasePatch(View(s), policy::OnUndelivered::kShutdown),
      R"([{"op":"test","path":"/metadata/resourceVersion","value":"100"},)"
      R"({"op":"test","path":"/metadata/annotations/allocating.agones.dev~1allocation","value":")" +
          alloc +
          R"("},{"op":"replace","path":"/status/state","value":"Shutdown"},)"
          R"({"op":"add","path":"/metadata/annotations/allocating.agones.dev~1outcome","value":"Undelivered"}])");
  EXPECT_NE(
      resolver::ReleasePatch(View(s), policy::OnUndelivered::kUnhealthy).find("\"Unhealthy\""),
      std::string::npos);
}

TEST(ResolverRelease, OnUndeliveredParsed) {
  policy::Policy policy;
  std::map<std::string, std::string, std::less<>> m{
      {"allocating.agones.dev/on-undelivered", "Keep"}};
  auto r = policy::ParseGateConfig(m, policy);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.ErrorText().find("on-undelivered"), std::string::npos);
}

}  // namespace
}  // namespace aw
