// Unit tests of the pure controller logic: lease decisions (client-go semantics), the CRD enum
// check and repair patch, and the event token bucket.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <chrono>
#include <string>

#include "kube/core/crd_enum.h"
#include "kube/core/lease_logic.h"
#include "kube/events.h"

namespace aw::kube {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::seconds;

LeaseRecord Held(const std::string& who, int secs = 15, int transitions = 3) {
  return LeaseRecord{who, secs, "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:05.000000Z",
                     transitions};
}

TEST(LeaseLogicTest, Decisions) {
  auto t0 = Clock::time_point() + seconds(1000);
  EXPECT_EQ(DecideLease({std::nullopt, "me", t0, t0}), LeaseAction::kCreate);
  EXPECT_EQ(DecideLease({Held("me"), "me", t0, t0 + seconds(100)}), LeaseAction::kRenew);
  EXPECT_EQ(DecideLease({Held(""), "me", t0, t0}), LeaseAction::kTakeOver);
  // Valid for leaseDurationSeconds after WE last saw it change, whatever its renewTime says.
  EXPECT_EQ(DecideLease({Held("other"), "me", t0, t0 + seconds(14)}), LeaseAction::kWait);
  EXPECT_EQ(DecideLease({Held("other"), "me", t0, t0 + seconds(15)}), LeaseAction::kTakeOver);
  EXPECT_EQ(DecideLease({Held("other", 1), "me", t0, t0 + seconds(2)}), LeaseAction::kTakeOver);
}

TEST(LeaseLogicTest, NextRecords) {
  auto renew = NextLeaseRecord(LeaseAction::kRenew, Held("me"), "me", 15, "NOW");
  EXPECT_EQ(renew.holder_identity, "me");
  EXPECT_EQ(renew.acquire_time, "2026-01-01T00:00:00.000000Z");  // kept
  EXPECT_EQ(renew.renew_time, "NOW");
  EXPECT_EQ(renew.lease_transitions, 3);
  auto take = NextLeaseRecord(LeaseAction::kTakeOver, Held("other"), "me", 15, "NOW");
  EXPECT_EQ(take.acquire_time, "NOW");
  EXPECT_EQ(take.lease_transitions, 4);
  EXPECT_EQ(take.lease_duration_seconds, 15);
  auto create = NextLeaseRecord(LeaseAction::kCreate, std::nullopt, "me", 15, "NOW");
  EXPECT_EQ(create.lease_transitions, 0);
  auto rel = ReleasedLeaseRecord(Held("me"), "NOW");
  EXPECT_EQ(rel.holder_identity, "");
  EXPECT_EQ(rel.lease_duration_seconds, 1);
  EXPECT_EQ(rel.lease_transitions, 3);
}

TEST(LeaseLogicTest, RecordRoundTripAndMicroTime) {
  rapidjson::Document d;
  d.Parse(
      R"({"metadata":{"name":"l","resourceVersion":"7"},"spec":{"holderIdentity":"a","leaseDurationSeconds":15,"leaseTransitions":2,"acquireTime":"x","renewTime":"y"}})");
  LeaseRecord r = LeaseRecordFromObject(d);
  EXPECT_EQ(r, (LeaseRecord{"a", 15, "x", "y", 2}));
  r.holder_identity = "b";
  WriteLeaseRecord(r, &d);
  EXPECT_EQ(LeaseRecordFromObject(d), r);
  EXPECT_STREQ(d["metadata"]["resourceVersion"].GetString(), "7");
  rapidjson::Document empty;
  empty.Parse("{}");
  EXPECT_EQ(LeaseRecordFromObject(empty), LeaseRecord{});
  auto t = std::chrono::system_clock::time_point(std::chrono::microseconds(1700000000123456LL));
  EXPECT_EQ(FormatMicroTime(t), "2023-11-14T22:13:20.123456Z");
}

constexpr const char* kStockCrd =
    R"({"metadata":{"name":"gameservers.agones.dev"},"spec":{"versions":[
 {"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{
   "status":{"type":"object","properties":{"state":{"type":"string","enum":["Ready","Allocated"]}}}}}}},
 {"name":"v0","served":false,"schema":{"openAPIV3Schema":{"properties":{"status":{"properties":{"state":{"enum":["Ready"]}}}}}}}
]}})";

TEST(CrdEnumTest, StockEnumLacksAllocating) {
  rapidjson::Document d;
  d.Parse(kStockCrd);
  auto c = CheckStateEnum(d);
  EXPECT_TRUE(c.valid);
  EXPECT_FALSE(c.accepts);
  ASSERT_EQ(c.versions.size(), 2u);
  EXPECT_EQ(c.versions[0].enum_json, R"(["Ready","Allocated"])");
  EXPECT_EQ(
      BuildEnumPatch(c),
      R"([{"op":"test","path":"/spec/versions/0/schema/openAPIV3Schema/properties/status/properties/state/enum","value":["Ready","Allocated"]},)"
      R"({"op":"add","path":"/spec/versions/0/schema/openAPIV3Schema/properties/status/properties/state/enum/-","value":"Allocating"}])");
  EXPECT_NE(c.summary.find("v1: missing Allocating"), std::string::npos);
}

TEST(CrdEnumTest, AcceptsWhenListedOrFreeForm) {
  rapidjson::Document d;
  d.Parse(
      R"({"spec":{"versions":[{"name":"v1","served":true,"schema":{"openAPIV3Schema":{"properties":{"status":{"properties":{"state":{"enum":["Ready","Allocating"]}}}}}}}]}})");
  auto c = CheckStateEnum(d);
  EXPECT_TRUE(c.accepts);
  EXPECT_EQ(BuildEnumPatch(c), "");
  d.Parse(
      R"({"spec":{"versions":[{"name":"v1","served":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}})");
  EXPECT_TRUE(CheckStateEnum(d).accepts);
}

TEST(CrdEnumTest, OddShapes) {
  rapidjson::Document d;
  for (const char* s : {"{}", "[]", R"({"spec":{}})", R"({"spec":{"versions":{}}})"}) {
    d.Parse(s);
    auto c = CheckStateEnum(d);
    EXPECT_FALSE(c.valid) << s;
    EXPECT_FALSE(c.accepts) << s;
    EXPECT_EQ(BuildEnumPatch(c), "") << s;
  }
  d.Parse(R"({"spec":{"versions":[{"name":"v1","served":false}]}})");
  EXPECT_FALSE(CheckStateEnum(d).accepts);  // nothing served: the webhook must fail open
  d.Parse(
      R"({"spec":{"versions":[{"name":"v1","served":true,"schema":{"openAPIV3Schema":{"properties":{"status":{"properties":{"state":{"enum":["Ready",5,"a\"b"]}}}}}}}]}})");
  auto c = CheckStateEnum(d);
  EXPECT_FALSE(c.accepts);
  EXPECT_NE(BuildEnumPatch(c).find(R"(["Ready",5,"a\"b"])"), std::string::npos);
}

TEST(TokenBucketTest, BurstThenRate) {
  TokenBucket b(2.0, 3.0);
  auto t = Clock::time_point() + seconds(10);
  std::chrono::milliseconds wait{0};
  EXPECT_TRUE(b.TryTake(t, &wait));
  EXPECT_TRUE(b.TryTake(t, &wait));
  EXPECT_TRUE(b.TryTake(t, &wait));
  EXPECT_FALSE(b.TryTake(t, &wait));
  EXPECT_GE(wait.count(), 490);
  EXPECT_LE(wait.count(), 510);
  EXPECT_TRUE(b.TryTake(t + std::chrono::milliseconds(500), &wait));
  EXPECT_FALSE(b.TryTake(t + std::chrono::milliseconds(500), &wait));
  // Never more than the burst, however long the pause.
  auto later = t + seconds(3600);
  int n = 0;
  while (b.TryTake(later, &wait)) ++n;
  EXPECT_EQ(n, 3);
}

}  // namespace
}  // namespace aw::kube
