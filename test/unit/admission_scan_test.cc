// The one pass (admission/review_scan.h) against the document path it replaced on the hot route:
// admission::Handle must answer exactly what admission::HandleReference answers (status, content
// type, body, outcome, log fields), for every fixture on every route and policy, for the fixtures'
// decision space (states, writers, annotations), and for thousands of seeded mutations of them
// (bytes, JSON types, duplicate keys, escapes, nesting, NUL bytes). And the one pass is really
// taken for the reviews kube-apiserver sends (else the comparison would prove nothing).
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "admission/handle_reference.h"
#include "admission/review_scan.h"
#include "admission_test_util.h"

namespace aw::testing {
namespace {

using admission::HandlerResult;
using admission::Route;

int Iterations() {
  const char* v = std::getenv("AW_ROBUSTNESS_ITERATIONS");
  return v ? std::atoi(v) : 3000;
}

const std::vector<std::string>& FixtureNames() {
  static const std::vector<std::string> names = {"v1-allocator-update.json",
                                                 "v1-controller-shutdown.json",
                                                 "v1-create.json",
                                                 "v1-delete.json",
                                                 "v1-fleet-create-bad-timeout.json",
                                                 "v1-fleet-create-never-confirm.json",
                                                 "v1-fleet-create.json",
                                                 "v1-gameserverset-update.json",
                                                 "v1-gsa-create-owned-key.json",
                                                 "v1-gsa-create.json",
                                                 "v1-not-opted-in-update.json",
                                                 "v1-reject-mode-update.json",
                                                 "v1-resolver-promotion.json",
                                                 "v1-sdk-allocate-update.json",
                                                 "v1-sdk-patch-update.json",
                                                 "v1-untrusted-promotion.json",
                                                 "v1beta1-allocator-update.json",
                                                 "v1beta1-controller-shutdown.json",
                                                 "v1beta1-create.json",
                                                 "v1beta1-gsa-create.json",
                                                 "v1beta1-resolver-promotion.json",
                                                 "v1beta1-sdk-patch-update.json"};
  return names;
}

const std::vector<std::string>& Fixtures() {
  static const std::vector<std::string> bodies = [] {
    std::vector<std::string> out;
    for (const auto& n : FixtureNames()) out.push_back(ReadFixture("reviews/" + n));
    return out;
  }();
  return bodies;
}

std::string Describe(const HandlerResult& r) {
  std::string ks;
  for (const auto& k : r.neutralised) ks += k + ",";
  return std::to_string(r.http_status) + "|" + r.content_type + "|" + r.body + "|" +
         std::string(admission::OutcomeName(r.outcome)) + "|" + (r.fail_open ? "F" : "-") +
         (r.shutdown_held ? "H" : "-") + (r.scaled_down ? "S" : "-") +
         (r.shutdown_deferred ? "D" : "-") + "|" + ks + "|" + r.uid + "|" + r.namespace_ + "|" +
         r.name + "|" + r.reason;
}

size_t g_compared = 0;

void ExpectSame(Route route, const std::string& body, const admission::Context& ctx,
                const std::string& what) {
  const std::string fast = Describe(admission::Handle(route, body, ctx));
  const std::string reference = Describe(admission::HandleReference(route, body, ctx));
  ++g_compared;
  ASSERT_EQ(fast, reference) << what << "\nbody: " << body.substr(0, 400);
}

std::vector<policy::Policy> Policies() {
  std::vector<policy::Policy> out;
  out.push_back(TestPolicy());
  policy::Policy trusting = TestPolicy();
  trusting.trusted_users.emplace_back(kAllocator);
  trusting.trusted_users.emplace_back(kSdk);
  out.push_back(trusting);
  policy::Policy sdk = TestPolicy();
  sdk.sdk_service_account = "game-sa";
  sdk.agones_controller_users.clear();
  out.push_back(sdk);
  return out;
}

void ExpectSameEverywhere(const std::string& body, const std::string& what, bool all_routes) {
  static const std::vector<policy::Policy> policies = Policies();
  for (const auto& p : policies) {
    for (bool crd : {true, false}) {
      admission::Context ctx{p, crd, TestNow()};
      if (all_routes) {
        for (Route route : admission::AllRoutes()) {
          ExpectSame(route, body, ctx, what);
          if (::testing::Test::HasFatalFailure()) return;
        }
      } else {  // the routes the one pass answers
        for (Route route : {Route::kMutateGameServers, Route::kValidateGameServers}) {
          ExpectSame(route, body, ctx, what);
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(AdmissionScan, FixturesAnswerAsTheDocumentPath) {
  for (size_t i = 0; i < Fixtures().size(); ++i) {
    ExpectSameEverywhere(Fixtures()[i], FixtureNames()[i], true);
    if (HasFatalFailure()) return;
  }
}

// Every fixture kube-apiserver could send is regular: the one pass answers it.
TEST(AdmissionScan, FixturesTakeTheOnePass) {
  admission::ScannedReview scan;
  for (size_t i = 0; i < Fixtures().size(); ++i) {
    EXPECT_TRUE(admission::ScanReview(Fixtures()[i], &scan)) << FixtureNames()[i];
  }
  ASSERT_TRUE(admission::ScanReview(Fixtures()[0], &scan));
  EXPECT_EQ(scan.operation, "UPDATE");
  EXPECT_EQ(scan.username, kAllocator);
  EXPECT_TRUE(scan.object.present && scan.old_object.present);
  EXPECT_EQ(scan.object.state, "Allocated");
  EXPECT_EQ(scan.old_object.state, "Ready");
  EXPECT_TRUE(scan.object.annotations.present);
}

TEST(AdmissionScan, IrregularReviewsAreLeftToTheDocumentPath) {
  admission::ScannedReview scan;
  const std::string& good = Fixtures()[0];
  EXPECT_FALSE(admission::ScanReview(good + "x", &scan));
  // A NUL inside the body (the literal's length without its terminator).
  static constexpr char kWithNul[] = "{\"kind\":\"AdmissionReview\"\0}";
  EXPECT_FALSE(admission::ScanReview(std::string(kWithNul, sizeof(kWithNul) - 1), &scan));
  EXPECT_FALSE(admission::ScanReview("[]", &scan));
  EXPECT_FALSE(admission::ScanReview("{\"a\":1,\"a\":2}", &scan));
  std::string deep(600, '[');
  EXPECT_FALSE(admission::ScanReview(deep, &scan));
}

// Values the decision reads, set to every JSON type, removed, repeated, escaped.
TEST(AdmissionScan, FieldEditsAnswerAsTheDocumentPath) {
  const char* pointers[] = {
      "/kind",
      "/apiVersion",
      "/request",
      "/request/uid",
      "/request/operation",
      "/request/userInfo",
      "/request/userInfo/username",
      "/request/kind",
      "/request/kind/kind",
      "/request/namespace",
      "/request/name",
      "/request/subResource",
      "/request/object",
      "/request/oldObject",
      "/request/object/metadata",
      "/request/oldObject/metadata",
      "/request/object/metadata/name",
      "/request/object/metadata/namespace",
      "/request/object/metadata/generateName",
      "/request/object/metadata/uid",
      "/request/object/metadata/resourceVersion",
      "/request/object/metadata/deletionTimestamp",
      "/request/object/metadata/labels",
      "/request/oldObject/metadata/labels",
      "/request/object/metadata/annotations",
      "/request/oldObject/metadata/annotations",
      "/request/object/metadata/labels/allocating.agones.dev~1enabled",
      "/request/object/metadata/annotations/agones.dev~1last-allocated",
      "/request/object/status",
      "/request/oldObject/status",
      "/request/object/status/state",
      "/request/oldObject/status/state",
      "/request/object/spec",
      "/request/object/spec/template",
      "/request/object/spec/template/spec",
      "/request/object/spec/template/spec/serviceAccountName",
      "/request/object/spec/ports",
      "/request/object/spec/ports/0",
      "/request/object/spec/ports/0/name",
      "/request/oldObject/spec/ports",
      "/request/object/metadata/annotations/allocating.agones.dev~1probe-port",
      "/request/object/metadata/annotations/allocating-ready"};
  const char* values[] = {"null",
                          "1",
                          "[]",
                          "{}",
                          "\"x\"",
                          "true",
                          "\"\"",
                          "\"Allocated\"",
                          "{\"a\":\"b\"}",
                          "[\"x\"]",
                          "[{\"name\":\"x\"},{\"port\":1},{\"name\":null}]",
                          "\"default\"",
                          "\"st\\u0061te\""};
  size_t cases = 0;
  for (size_t f = 0; f < Fixtures().size(); ++f) {
    for (const char* pointer : pointers) {
      for (const char* value : values) {
        Obj o = Obj::FromJson(Fixtures()[f]);
        o.SetRaw(pointer, value);
        ExpectSameEverywhere(o.Json(), FixtureNames()[f] + " " + pointer + "=" + value, false);
        if (HasFatalFailure()) return;
        ++cases;
      }
    }
  }
  EXPECT_GT(cases, 5000u);
}

// The decision space of the allocator's review: states, writers, the opt-in, the cycle's
// annotations; both paths must agree on every rule of the table.
TEST(AdmissionScan, DecisionSpaceAnswersAsTheDocumentPath) {
  const char* states[] = {"Ready", "Allocated", "Allocating", "Shutdown", "Unhealthy", ""};
  const std::string_view users[] = {kResolver, kAllocator, kController, kSdk, kStranger};
  std::mt19937 rng(36);
  for (const char* os : states) {
    for (const char* ns : states) {
      for (std::string_view user : users) {
        for (int variant = 0; variant < 6; ++variant) {
          Obj o = Obj::FromJson(Fixtures()[0]);
          o.SetRaw("/request/oldObject/status/state", std::string("\"") + os + "\"");
          o.SetRaw("/request/object/status/state", std::string("\"") + ns + "\"");
          o.SetRaw("/request/userInfo/username", "\"" + std::string(user) + "\"");
          const char* anns[] = {"allocating.agones.dev~1since",
                                "allocating.agones.dev~1allocation",
                                "allocating.agones.dev~1confirmed",
                                "allocating.agones.dev~1outcome",
                                "allocating.agones.dev~1shutdown-requested",
                                "allocating.agones.dev~1on-scale-down",
                                "allocating.agones.dev~1mode",
                                "allocating-ready"};
          const char* vals[] = {"\"2026-12-02T14:29:59Z\"",
                                "\"a1\"",
                                "\"TimedOut\"",
                                "\"Hold\"",
                                "\"reject\"",
                                "\"x\""};
          for (const char* side : {"object", "oldObject"}) {
            for (const char* a : anns) {
              if (rng() % 3 == 0) {
                o.SetRaw(std::string("/request/") + side + "/metadata/annotations/" + a,
                         vals[rng() % std::size(vals)]);
              }
            }
          }
          if (variant == 1) o.SetRaw("/request/object/metadata/labels", "null");
          if (variant == 2) o.SetRaw("/request/oldObject/metadata/annotations", "null");
          if (variant == 3) o.SetRaw("/request/object/metadata/deletionTimestamp", "\"t\"");
          ExpectSameEverywhere(o.Json(), std::string(os) + "->" + ns + " by " + std::string(user),
                               false);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// Seeded byte and structure mutations of every fixture (the robustness suite's mutations).
TEST(AdmissionScan, MutatedReviewsAnswerAsTheDocumentPath) {
  std::mt19937 rng(20261205);
  const char* tokens[] = {"null",
                          "[]",
                          "{}",
                          "1",
                          "-1e999",
                          "\"x\"",
                          "true",
                          "\"\\u0000\"",
                          "\"\\ud800\"",
                          ",",
                          ":",
                          "\"",
                          "]",
                          "}",
                          "{\"a\":",
                          "\\",
                          "\"kind\":\"GameServer\",",
                          "\"state\":\"Ready\","};
  for (int i = 0; i < Iterations(); ++i) {
    std::string body = Fixtures()[rng() % Fixtures().size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !body.empty(); ++e) {
      const size_t pos = rng() % body.size();
      switch (rng() % 5) {
        case 0:
          body[pos] = static_cast<char>(rng() % 256);
          break;
        case 1:
          body.erase(pos, 1 + rng() % 16);
          break;
        case 2:
          body.insert(pos, tokens[rng() % std::size(tokens)]);
          break;
        case 3:
          body.insert(pos, body.substr(rng() % body.size(), rng() % 64));
          break;
        case 4:
          // A member repeated right after itself (a duplicate key when it lands on one).
          if (size_t q = body.find('"', pos); q != std::string::npos) {
            if (size_t c = body.find(',', q); c != std::string::npos) {
              body.insert(c + 1, body.substr(q, c - q) + ",");
            }
          }
          break;
      }
    }
    ExpectSameEverywhere(body, "mutation " + std::to_string(i), i % 10 == 0);
    if (HasFatalFailure()) return;
  }
  std::printf("admission scan: %zu answers compared with the document path\n", g_compared);
}

TEST(AdmissionScan, NestingAtTheLimitAnswersAsTheDocumentPath) {
  for (size_t depth : {505u, 508u, 509u, 510u, 511u, 512u, 513u, 600u}) {
    Obj o = Obj::FromJson(Fixtures()[0]);
    std::string nested(depth, '[');
    nested += std::string(depth, ']');
    o.SetRaw("/request/object/spec/deep", "0");
    std::string body = o.Json();
    const std::string marker = "\"deep\":0";
    body.replace(body.find(marker), marker.size(), "\"deep\":" + nested);
    ExpectSameEverywhere(body, "depth " + std::to_string(depth), false);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace aw::testing
