// The connection layer's pure decisions: 414 vs 431, body plans, eviction choice, query params.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/connection_registry.h"
#include "server/core/eviction.h"
#include "server/core/http_limits.h"
#include "server/health_server.h"

namespace aw::server {
namespace {

RequestLimits Limits() {
  RequestLimits l;
  l.max_request_line_bytes = 100;
  l.max_header_bytes = 1000;
  l.max_header_count = 5;
  l.max_body_bytes = 1000;
  l.max_discard_bytes = 5000;
  return l;
}

TEST(HeadOverflow, NoLineEndInTheBufferIsTheRequestLine) {
  EXPECT_EQ(ClassifyHeadOverflow(std::nullopt, "GET /" + std::string(2000, 'a'), Limits()),
            HeadProblem::kRequestLineTooLong);
}

TEST(HeadOverflow, LineEndPastTheRequestLineLimitIsTheRequestLine) {
  EXPECT_EQ(
      ClassifyHeadOverflow(std::nullopt,
                           "GET /" + std::string(200, 'a') + " HTTP/1.1\r\nHost: x\r\n", Limits()),
      HeadProblem::kRequestLineTooLong);
}

TEST(HeadOverflow, ShortRequestLineThenHugeFieldsIsTheHeader) {
  std::string head = "POST /mutate/gameservers HTTP/1.1\r\nX-A: " + std::string(2000, 'b');
  EXPECT_EQ(ClassifyHeadOverflow(std::nullopt, head, Limits()), HeadProblem::kHeaderTooLarge);
}

TEST(HeadOverflow, RequestLineExactlyAtTheLimitIsTheHeader) {
  std::string line = "GET /" + std::string(100 - 14, 'a') + " HTTP/1.1";
  ASSERT_EQ(line.size(), 100u);
  EXPECT_EQ(ClassifyHeadOverflow(std::nullopt, line + "\r\nX: " + std::string(2000, 'c'), Limits()),
            HeadProblem::kHeaderTooLarge);
  EXPECT_EQ(ClassifyHeadOverflow(std::nullopt, line + "a\r\nX: y", Limits()),
            HeadProblem::kRequestLineTooLong);
}

TEST(HeadOverflow, BareLineFeedEndsTheRequestLine) {
  EXPECT_EQ(
      ClassifyHeadOverflow(std::nullopt, "GET / HTTP/1.1\nX: " + std::string(2000, 'c'), Limits()),
      HeadProblem::kHeaderTooLarge);
}

TEST(HeadOverflow, RequestLineAlreadyParsed) {
  // The parser took the request line: the buffer holds header fields only.
  EXPECT_EQ(ClassifyHeadOverflow(size_t{40}, std::string(2000, 'f'), Limits()),
            HeadProblem::kHeaderTooLarge);
  EXPECT_EQ(ClassifyHeadOverflow(size_t{101}, "X: y\r\n", Limits()),
            HeadProblem::kRequestLineTooLong);
}

TEST(CheckHead, Limits) {
  EXPECT_EQ(CheckHead(100, 1000, 5, Limits()), HeadProblem::kNone);
  EXPECT_EQ(CheckHead(101, 200, 1, Limits()), HeadProblem::kRequestLineTooLong);
  EXPECT_EQ(CheckHead(50, 1001, 1, Limits()), HeadProblem::kHeaderTooLarge);
  EXPECT_EQ(CheckHead(50, 500, 6, Limits()), HeadProblem::kTooManyHeaders);
}

TEST(CheckHead, StatusesAndMessages) {
  EXPECT_EQ(StatusOf(HeadProblem::kRequestLineTooLong), 414);
  EXPECT_EQ(StatusOf(HeadProblem::kHeaderTooLarge), 431);
  EXPECT_EQ(StatusOf(HeadProblem::kTooManyHeaders), 431);
  EXPECT_NE(MessageOf(HeadProblem::kHeaderTooLarge, Limits()).find("1000 bytes"),
            std::string::npos);
  EXPECT_NE(MessageOf(HeadProblem::kTooManyHeaders, Limits()).find("limit of 5"),
            std::string::npos);
  EXPECT_EQ(MessageOf(HeadProblem::kRequestLineTooLong, Limits()).back(), '\n');
}

TEST(PlanBody, WithinTheLimitIsRead) {
  EXPECT_EQ(PlanBody(std::nullopt, false, Limits()), BodyPlan::kRead);  // chunked or none
  EXPECT_EQ(PlanBody(1000, false, Limits()), BodyPlan::kRead);
  EXPECT_EQ(PlanBody(1000, true, Limits()), BodyPlan::kRead);  // 100 Continue, then read
}

TEST(PlanBody, OverTheLimitIsRefusedBeforeReading) {
  EXPECT_EQ(PlanBody(1001, false, Limits()), BodyPlan::kRefuseThenDiscard);
  EXPECT_EQ(PlanBody(6000, false, Limits()), BodyPlan::kRefuseThenDiscard);
  EXPECT_EQ(PlanBody(6001, false, Limits()), BodyPlan::kRefuseThenClose);
}

TEST(PlanBody, ExpectContinueOverTheLimitGets413AndClose) {
  EXPECT_EQ(PlanBody(1001, true, Limits()), BodyPlan::kRefuseThenClose);
}

using std::chrono::seconds;
const auto kT0 = std::chrono::steady_clock::time_point() + std::chrono::hours(1);

TEST(ChooseVictim, EmptyHasNone) { EXPECT_EQ(ChooseVictim({}), std::nullopt); }

TEST(ChooseVictim, IdleLongestFirst) {
  std::vector<ConnSnapshot> open = {
      {1, ConnPhase::kRequest, kT0 - seconds(30)},
      {2, ConnPhase::kIdle, kT0 - seconds(5)},
      {3, ConnPhase::kIdle, kT0 - seconds(50)},
      {4, ConnPhase::kHandshake, kT0 - seconds(60)},
  };
  EXPECT_EQ(ChooseVictim(open), 3u);
}

TEST(ChooseVictim, NoIdleMeansTheEarliestStarted) {
  std::vector<ConnSnapshot> open = {
      {1, ConnPhase::kRequest, kT0 - seconds(8)},
      {2, ConnPhase::kHandshake, kT0 - seconds(9)},
      {3, ConnPhase::kResponse, kT0 - seconds(1)},
      {4, ConnPhase::kRequest, kT0},
  };
  EXPECT_EQ(ChooseVictim(open), 2u);
}

TEST(ChooseVictim, SlowlorisCannotHoldTheCap) {
  // 1000 slow requests started over the last 10 s and one client that started 2 ms ago.
  std::vector<ConnSnapshot> open;
  for (uint64_t i = 0; i < 1000; ++i) {
    open.push_back({i, ConnPhase::kRequest, kT0 - std::chrono::milliseconds(10 * (1000 - i))});
  }
  open.push_back({5000, ConnPhase::kRequest, kT0 + std::chrono::milliseconds(98)});
  EXPECT_EQ(ChooseVictim(open), 0u);
}

// Issue 23: a request being served (an allocation waiting for its GameServer) is never evicted
// while an idle, unauthenticated or half-sent connection exists, however young those are.
TEST(ChooseVictim, WaitingRequestsGoLast) {
  std::vector<ConnSnapshot> open = {
      {1, ConnPhase::kWaiting, kT0 - seconds(60)},
      {2, ConnPhase::kHandshake, kT0},  // a bare TCP connect, just now
      {3, ConnPhase::kWaiting, kT0 - seconds(90)},
  };
  EXPECT_EQ(ChooseVictim(open), 2u);
  open[1].phase = ConnPhase::kRequest;
  EXPECT_EQ(ChooseVictim(open), 2u);
  open[1].phase = ConnPhase::kResponse;
  EXPECT_EQ(ChooseVictim(open), 2u);
  open[1].phase = ConnPhase::kIdle;
  EXPECT_EQ(ChooseVictim(open), 2u);
  // Only waiting requests left: the one that has waited longest.
  open.erase(open.begin() + 1);
  EXPECT_EQ(ChooseVictim(open), 3u);
}

struct FakeConn final : Connection {
  void Cut() override { ++cuts; }
  void Drain() override {}
  int cuts = 0;
};

TEST(ConnectionRegistry, AdmitsAtTheCapByEvictingIdle) {
  ConnectionRegistry reg(2);
  auto a = std::make_shared<FakeConn>(), b = std::make_shared<FakeConn>(),
       c = std::make_shared<FakeConn>();
  EXPECT_FALSE(reg.Admit(1, a, ConnPhase::kRequest));
  EXPECT_FALSE(reg.Admit(2, b, ConnPhase::kRequest));
  reg.SetPhase(2, ConnPhase::kIdle);
  auto evicted = reg.Admit(3, c, ConnPhase::kHandshake);
  ASSERT_TRUE(evicted);
  EXPECT_EQ(evicted->conn.lock(), b);
  EXPECT_EQ(evicted->phase, ConnPhase::kIdle);
  EXPECT_EQ(reg.Size(), 2u);
  reg.Remove(2);  // the evicted one closing: already gone
  EXPECT_EQ(reg.Size(), 2u);
  reg.Remove(1);
  reg.Remove(3);
  EXPECT_TRUE(reg.WaitEmpty(std::chrono::steady_clock::now()));
}

TEST(HasQueryParam, Forms) {
  EXPECT_TRUE(HasQueryParam("verbose", "verbose"));
  EXPECT_TRUE(HasQueryParam("a=1&verbose=true", "verbose"));
  EXPECT_FALSE(HasQueryParam("verbosex", "verbose"));
  EXPECT_FALSE(HasQueryParam("", "verbose"));
  EXPECT_FALSE(HasQueryParam("a=verbose", "verbose"));
}

}  // namespace
}  // namespace aw::server
