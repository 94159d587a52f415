// The Buffer autoscaling endpoint (autoscale/endpoint.h) and its per-fleet counts
// (autoscale/io/fleet_counts.h): Allocating servers count as allocated; hostile requests get a
// clear 4xx, never a crash.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <random>
#include <string>

#include "autoscale/endpoint.h"
#include "autoscale/io/fleet_counts.h"

namespace aw::autoscale {
namespace {

rapidjson::Document Doc(std::string_view json) {
  rapidjson::Document d;
  d.Parse(json.data(), json.size());
  return d;
}

GameServerFacts Gs(std::string fleet, bool allocating) { return {std::move(fleet), allocating}; }

TEST(AutoscaleCountsTest, FactsOfAGameServer) {
  auto f = FactsOf(policy::ParseGameServer(
      Doc(R"({"metadata":{"labels":{"agones.dev/fleet":"f1"}},"status":{"state":"Allocating"}})")));
  EXPECT_EQ(f.fleet, "f1");
  EXPECT_TRUE(f.allocating);
  f = FactsOf(policy::ParseGameServer(
      Doc(R"({"metadata":{"labels":{"agones.dev/fleet":"f1"}},"status":{"state":"Allocated"}})")));
  EXPECT_FALSE(f.allocating);
  f = FactsOf(policy::ParseGameServer(Doc(R"({"metadata":{},"status":{"state":"Allocating"}})")));
  EXPECT_EQ(f.fleet, "");
  for (const char* odd :
       {"null", "[]", "7", R"({"metadata":[],"status":"x"})",
        R"({"metadata":{"labels":{"agones.dev/fleet":3}},"status":{"state":1}})"}) {
    f = FactsOf(policy::ParseGameServer(Doc(odd)));
    EXPECT_EQ(f.fleet, "") << odd;
    EXPECT_FALSE(f.allocating) << odd;
  }
}

TEST(AutoscaleCountsTest, FollowsUpsertsAndDeletes) {
  FleetCounts c;
  EXPECT_FALSE(c.Synced());
  c.Upsert("ns", "a", Gs("f", false));
  c.Upsert("ns", "b", Gs("f", true));
  c.Upsert("ns", "c", Gs("f", true));
  c.Upsert("other", "d", Gs("f", true));  // same fleet name, other namespace
  c.Upsert("ns", "e", Gs("", true));      // no fleet
  EXPECT_EQ(c.Lookup("ns", "f").servers, 3);
  EXPECT_EQ(c.Lookup("ns", "f").allocating, 2);
  EXPECT_EQ(c.Lookup("other", "f").allocating, 1);
  c.Upsert("ns", "b", Gs("f", true));  // unchanged: counted once
  EXPECT_EQ(c.Lookup("ns", "f").allocating, 2);
  c.Upsert("ns", "b", Gs("f", false));  // promoted to Allocated
  EXPECT_EQ(c.Lookup("ns", "f").allocating, 1);
  c.Upsert("ns", "c", Gs("g", true));  // relabelled
  EXPECT_EQ(c.Lookup("ns", "f").allocating, 0);
  EXPECT_EQ(c.Lookup("ns", "g").allocating, 1);
  c.Upsert("ns", "e", Gs("g", true));  // label added later
  EXPECT_EQ(c.Lookup("ns", "g").allocating, 2);
  c.Remove("ns", "c");
  c.Remove("ns", "c");  // twice: no effect
  c.Remove("ns", "nope");
  EXPECT_EQ(c.Lookup("ns", "g").servers, 1);
  c.Remove("ns", "e");
  EXPECT_EQ(c.Lookup("ns", "g").servers, 0);
  EXPECT_EQ(c.Fleets().size(), 2u);  // ns/f and other/f
  c.MarkSynced();
  EXPECT_TRUE(c.Synced());
}

constexpr std::string_view kPath = "/autoscale/buffer/bufferSize=2/maxReplicas=100";

std::string Review(std::string_view fleet, int replicas, int allocated,
                   std::string_view uid = "uid-1") {
  return std::string(R"({"request":{"uid":")") + std::string(uid) + R"(","name":")" +
         std::string(fleet) + R"(","namespace":"default","status":{"replicas":)" +
         std::to_string(replicas) +
         R"(,"readyReplicas":0,"reservedReplicas":0,"allocatedReplicas":)" +
         std::to_string(allocated) + R"(}},"response":null})";
}

ReviewAnswer Post(const FleetCounts& c, std::string_view body, std::string_view path = kPath,
                  std::string_view query = "", std::string_view ct = "application/json") {
  return HandleBufferReview({"POST", path, query, ct, body, false}, c);
}

FleetCounts& Fleet(FleetCounts& c, int servers, int allocating) {
  for (int i = 0; i < servers; ++i) {
    c.Upsert("default", "gs-" + std::to_string(i), Gs("fleet", i < allocating));
  }
  c.MarkSynced();
  return c;
}

TEST(AutoscaleEndpointTest, IssueScenario) {
  // Fleet of 4, buffer 2: 2 Allocated + 2 Ready in Agones' eyes... here 2 Allocating, 0 Ready.
  // Stock Agones: allocatedReplicas 0 -> 0 + 2 = 2 replicas (no scale-up). Ours: 2 + 2 = 4.
  FleetCounts c;
  Fleet(c, 2, 2);
  ReviewAnswer a = Post(c, Review("fleet", 2, 0));
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.result, ReviewResult::kScaled);
  EXPECT_EQ(a.replicas, 4);
  EXPECT_EQ(a.allocating, 2);
  EXPECT_EQ(a.body, R"({"apiVersion":"autoscaling.agones.dev/v1","kind":"FleetAutoscaleReview",)"
                    R"("response":{"uid":"uid-1","scale":true,"replicas":4}})");
}

TEST(AutoscaleEndpointTest, AllocatingAddsToAllocated) {
  FleetCounts c;
  Fleet(c, 10, 3);
  // 7 Allocated per the fleet status + 3 Allocating = 10, buffer 5 -> 15.
  ReviewAnswer a =
      Post(c, Review("fleet", 10, 7), "/autoscale/buffer/bufferSize=5/maxReplicas=100");
  EXPECT_EQ(a.replicas, 15);
  // 20%: ceil(10 / 0.8) = 13.
  a = Post(c, Review("fleet", 10, 7), "/autoscale/buffer",
           "bufferSize=20%25&minReplicas=1&maxReplicas=100");
  EXPECT_EQ(a.replicas, 13);
  // max clamps.
  a = Post(c, Review("fleet", 10, 7), "/autoscale/buffer/bufferSize=5/maxReplicas=12");
  EXPECT_EQ(a.replicas, 12);
  EXPECT_TRUE(a.limited);
  // min clamps.
  a = Post(c, Review("fleet", 10, 7),
           "/autoscale/buffer/bufferSize=5/minReplicas=40/maxReplicas=50");
  EXPECT_EQ(a.replicas, 40);
  EXPECT_TRUE(a.limited);
}

TEST(AutoscaleEndpointTest, UnknownAndEmptyFleets) {
  FleetCounts c;
  Fleet(c, 3, 1);
  // A fleet with replicas but no opted-in server: scale false, replicas = status.replicas.
  ReviewAnswer a = Post(c, Review("not-gated", 6, 2));
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.result, ReviewResult::kUnknownFleet);
  EXPECT_EQ(a.body, R"({"apiVersion":"autoscaling.agones.dev/v1","kind":"FleetAutoscaleReview",)"
                    R"("response":{"uid":"uid-1","scale":false,"replicas":6}})");
  // An empty fleet (new, or scaled to 0) is computed: never left at 0.
  a = Post(c, Review("new-fleet", 0, 0));
  EXPECT_EQ(a.result, ReviewResult::kScaled);
  EXPECT_EQ(a.replicas, 2);
}

TEST(AutoscaleEndpointTest, UnavailableUntilSynced) {
  FleetCounts c;
  ReviewAnswer a = Post(c, Review("fleet", 1, 0));
  EXPECT_EQ(a.status, 503);
  EXPECT_EQ(a.result, ReviewResult::kUnavailable);
  EXPECT_NE(a.body.find("not synced"), std::string::npos);
  EXPECT_EQ(a.body.back(), '\n');
}

TEST(AutoscaleEndpointTest, HttpErrors) {
  FleetCounts c;
  Fleet(c, 1, 0);
  ReviewAnswer a = HandleBufferReview({"GET", kPath, "", "application/json", "", false}, c);
  EXPECT_EQ(a.status, 405);
  EXPECT_EQ(a.allow, "POST");
  a = Post(c, Review("fleet", 1, 0), kPath, "", "text/plain");
  EXPECT_EQ(a.status, 415);
  a = Post(c, Review("fleet", 1, 0), kPath, "", "Application/JSON; charset=utf-8");
  EXPECT_EQ(a.status, 200);
  a = HandleBufferReview({"POST", kPath, "", "application/json", "", true}, c);
  EXPECT_EQ(a.status, 413);
  a = Post(c, std::string(kMaxReviewBytes + 1, ' '));
  EXPECT_EQ(a.status, 413);
  a = Post(c, Review("fleet", 1, 0), "/autoscale/buffer/bufferSize=0/maxReplicas=3");
  EXPECT_EQ(a.status, 400);
  EXPECT_NE(a.body.find("bad Buffer policy parameters: bufferSize is 0"), std::string::npos)
      << a.body;
  a = Post(c, Review("fleet", 1, 0), "/autoscale/buffer");
  EXPECT_EQ(a.status, 400);
  EXPECT_NE(a.body.find("bufferSize is missing"), std::string::npos);
  a = Post(
      c,
      R"({"request":{"uid":"u","name":"fleet","namespace":"default","status":{"replicas":1,"allocatedReplicas":-1}}})");
  EXPECT_EQ(a.status, 400);
  EXPECT_NE(a.body.find("bad FleetAutoscaleReview: request.status.allocatedReplicas is -1"),
            std::string::npos)
      << a.body;
}

// Random and mutated bodies: every answer is 200/400/413/415 with a body, nothing else.
TEST(AutoscaleEndpointTest, HostileBodiesNeverCrash) {
  FleetCounts c;
  Fleet(c, 4, 2);
  std::mt19937 rng(12);
  const std::string seed = Review("fleet", 4, 1);
  const std::string alphabet = "{}[]\",:0123456789-.eE truefalsnul\\u00%\x01\xff";
  for (int i = 0; i < 20000; ++i) {
    std::string body = seed;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % (body.size() + 1);
      switch (rng() % 3) {
        case 0:
          body.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 1:
          if (pos < body.size()) body.erase(pos, 1);
          break;
        default:
          if (pos < body.size()) body[pos] = alphabet[rng() % alphabet.size()];
          break;
      }
    }
    ReviewAnswer a = Post(c, body);
    ASSERT_TRUE(a.status == 200 || a.status == 400) << a.status << " " << body;
    ASSERT_FALSE(a.body.empty());
    if (a.status == 200) {
      rapidjson::Document d;
      d.Parse(a.body.c_str());
      ASSERT_FALSE(d.HasParseError()) << a.body;
      ASSERT_TRUE(d["response"]["replicas"].GetInt() >= 0) << a.body;
    }
  }
  // Hostile parameters too.
  for (int i = 0; i < 5000; ++i) {
    std::string path = "/autoscale/buffer/";
    const int n = static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) path.push_back("=/%?&abufferSizemaxReplicas0129-"[rng() % 32]);
    ReviewAnswer a = Post(c, seed, path, path.substr(rng() % path.size()));
    ASSERT_TRUE(a.status == 200 || a.status == 400) << a.status << " " << path;
  }
}

}  // namespace
}  // namespace aw::autoscale
