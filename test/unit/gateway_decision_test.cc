// The gateway's wait/retry decision, row by row.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <string>

#include "gateway/decision.h"

namespace aw::gateway {
namespace {

constexpr const char* kOurs = "2026-01-02T03:04:05.5Z";

struct Gs {
  std::string state = "Allocating";
  std::string last_allocated = kOurs;
  std::string confirmed, outcome;
  std::string allocation = kOurs;
  std::string since = kOurs;
  std::string bypassed;
  bool opted_in = true;
};

Decision DecideFor(const Gs& g) {
  std::string ann = "{";
  auto add = [&ann](const char* k, const std::string& v) {
    if (v.empty()) return;
    if (ann.size() > 1) ann += ",";
    ann += "\"" + std::string(k) + "\":\"" + v + "\"";
  };
  add("agones.dev/last-allocated", g.last_allocated);
  add("allocating.agones.dev/allocation", g.allocation);
  add("allocating.agones.dev/confirmed", g.confirmed);
  add("allocating.agones.dev/outcome", g.outcome);
  add("allocating.agones.dev/since", g.since);
  add("allocating.agones.dev/bypassed", g.bypassed);
  ann += "}";
  const std::string labels =
      g.opted_in ? R"({"allocating.agones.dev/enabled":"true"})" : std::string("{}");
  const std::string json = R"({"metadata":{"name":"gs","labels":)" + labels + R"(,"annotations":)" +
                           ann + R"(},"status":{"state":")" + g.state + R"("}})";
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  EXPECT_FALSE(doc.HasParseError()) << json;
  const auto view = policy::ParseGameServer(doc);
  return Decide(&view, false, kOurs);
}

TEST(GatewayDecision, WaitsWhileAllocatingOrNotSeen) {
  EXPECT_EQ(DecideFor({}).verdict, Verdict::kWait);
  EXPECT_EQ(Decide(nullptr, false, kOurs).verdict, Verdict::kWait);
}

TEST(GatewayDecision, OlderCopyWaitsNewerAllocationRetries) {
  Gs older;
  older.state = "Ready";
  older.last_allocated = "2026-01-02T03:04:05.4Z";
  EXPECT_EQ(DecideFor(older).verdict, Verdict::kWait);
  older.last_allocated = "";
  EXPECT_EQ(DecideFor(older).verdict, Verdict::kWait);
  Gs newer;
  newer.state = "Allocating";
  newer.last_allocated = "2026-01-02T03:04:06Z";
  auto d = DecideFor(newer);
  EXPECT_EQ(d.verdict, Verdict::kRetry);
  EXPECT_EQ(d.reason, "allocated again by another request");
  // Same instant written differently counts as the same allocation.
  Gs same;
  same.last_allocated = "2026-01-02T03:04:05.50Z";
  EXPECT_EQ(DecideFor(same).verdict, Verdict::kWait);
}

TEST(GatewayDecision, ConfirmedAnswers) {
  Gs g;
  g.state = "Allocated";
  g.confirmed = kOurs;
  g.outcome = "Confirmed";
  auto d = DecideFor(g);
  EXPECT_EQ(d.verdict, Verdict::kAnswer);
  EXPECT_EQ(d.reason, "confirmed");
}

TEST(GatewayDecision, TimedOutAllocatedIsTheUsersChoice) {
  Gs g;
  g.state = "Allocated";
  g.outcome = "TimedOut";
  g.confirmed = kOurs;  // the resolver's on-timeout Allocated writes it
  auto d = DecideFor(g);
  EXPECT_EQ(d.verdict, Verdict::kAnswer);
  EXPECT_NE(d.reason.find("on-timeout: Allocated"), std::string::npos);
  g.confirmed = "";  // TimedOut without the resolver's confirmed: not the resolver's write
  EXPECT_EQ(DecideFor(g).verdict, Verdict::kWait);
}

TEST(GatewayDecision, AllocatedNotOptedInAnswers) {
  Gs g;
  g.state = "Allocated";
  g.allocation = g.since = "";
  g.opted_in = false;
  EXPECT_EQ(DecideFor(g).verdict, Verdict::kAnswer);
}

// Admission was unreachable: the allocator's write reached Allocated as written.
TEST(GatewayDecision, BypassedAllocationWaitsForTheConfirmationAfterTheFact) {
  Gs g;
  g.state = "Allocated";
  g.allocation = g.since = "";  // the gate never saw it
  auto d = DecideFor(g);
  EXPECT_EQ(d.verdict, Verdict::kWait);
  EXPECT_NE(d.reason.find("admission bypassed"), std::string::npos);
  // Forged keys (validation skipped) do not make it playable while it is unrecorded.
  g.confirmed = kOurs;
  g.outcome = "Confirmed";
  EXPECT_EQ(DecideFor(g).verdict, Verdict::kWait);
  g.since = kOurs;
  g.confirmed = g.outcome = "";
  EXPECT_EQ(DecideFor(g).verdict, Verdict::kWait);  // since, but no allocation
  // Recorded by the resolver: open until confirmed.
  g.allocation = g.bypassed = kOurs;
  d = DecideFor(g);
  EXPECT_EQ(d.verdict, Verdict::kWait);
  EXPECT_NE(d.reason.find("after the fact"), std::string::npos);
  g.confirmed = kOurs;
  g.outcome = "Confirmed";
  d = DecideFor(g);
  EXPECT_EQ(d.verdict, Verdict::kAnswer);
  EXPECT_EQ(d.reason, "confirmed");
  // on-timeout Allocated: the user's explicit choice.
  g.outcome = "TimedOut";
  EXPECT_EQ(DecideFor(g).verdict, Verdict::kAnswer);
  // Not confirmed by its deadline: left Allocated, another server is allocated.
  g.confirmed = "";
  g.outcome = "Unconfirmed";
  d = DecideFor(g);
  EXPECT_EQ(d.verdict, Verdict::kRetry);
  EXPECT_EQ(d.reason.rfind("timed out", 0), 0u);
}

TEST(GatewayDecision, AllocatedWithoutConfirmationWaits) {
  Gs g;
  g.state = "Allocated";  // the gate's marks, but nothing confirmed: never answered as playable
  EXPECT_EQ(DecideFor(g).verdict, Verdict::kWait);
  g.confirmed = "2026-01-01T00:00:00Z";  // an earlier allocation's
  g.outcome = "Confirmed";
  EXPECT_EQ(DecideFor(g).verdict, Verdict::kWait);
}

TEST(GatewayDecision, LostAllocationsRetry) {
  for (const char* state : {"Unhealthy", "Shutdown", "Error"}) {
    Gs g;
    g.state = state;
    auto d = DecideFor(g);
    EXPECT_EQ(d.verdict, Verdict::kRetry) << state;
    EXPECT_EQ(d.reason, std::string("became ") + state);
    g.outcome = "TimedOut";
    d = DecideFor(g);
    EXPECT_EQ(d.verdict, Verdict::kRetry);
    EXPECT_EQ(d.reason, std::string("timed out (not confirmed in time), now ") + state);
  }
  Gs ready;
  ready.state = "Ready";
  EXPECT_EQ(DecideFor(ready).verdict, Verdict::kRetry);
  auto del = Decide(nullptr, true, kOurs);
  EXPECT_EQ(del.verdict, Verdict::kRetry);
  EXPECT_EQ(del.reason, "deleted");
}

TEST(GatewayDecision, BadShapesNeverCrash) {
  for (const char* json : {"null", "[]", R"({"metadata":[]})", R"({"status":{"state":7}})",
                           R"({"metadata":{"annotations":{"agones.dev/last-allocated":5}}})"}) {
    rapidjson::Document doc;
    doc.Parse(json);
    const auto view = policy::ParseGameServer(doc);
    auto d = Decide(&view, false, kOurs);
    EXPECT_EQ(d.verdict, Verdict::kWait) << json;
  }
}

TEST(GatewayDecision, AttemptsLeft) {
  EXPECT_TRUE(AttemptsLeft(1, 3, std::chrono::seconds(1)));
  EXPECT_FALSE(AttemptsLeft(3, 3, std::chrono::seconds(1)));
  EXPECT_FALSE(AttemptsLeft(1, 3, std::chrono::seconds(0)));
}

}  // namespace
}  // namespace aw::gateway
