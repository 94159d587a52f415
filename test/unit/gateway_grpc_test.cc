// The gateway's gRPC front-end: the pure wire rules (gateway/grpc_wire.h) and GrpcService
// (gateway/io/grpc_service.h) against a stand-in for Gateway::Handle that records what REST got.
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <chrono>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gateway/grpc_wire.h"
#include "gateway/io/grpc_service.h"
#include "gateway/io/protobuf_log.h"
#include "proto/allocation/allocation.pb.h"
#include "proto/grpc/health/v1/health.pb.h"
#include "util/io/log.h"

namespace aw::gateway {
namespace {

using namespace std::chrono_literals;

TEST(GrpcTimeout, ParsesEveryUnit) {
  EXPECT_EQ(ParseGrpcTimeout("1H"), std::chrono::hours(1));
  EXPECT_EQ(ParseGrpcTimeout("2M"), std::chrono::minutes(2));
  EXPECT_EQ(ParseGrpcTimeout("30S"), 30s);
  EXPECT_EQ(ParseGrpcTimeout("2500m"), 2500ms);
  EXPECT_EQ(ParseGrpcTimeout("7u"), 7us);
  EXPECT_EQ(ParseGrpcTimeout("99999999n"), 99999999ns);
  EXPECT_EQ(ParseGrpcTimeout("0m"), 0ms);
}

TEST(GrpcTimeout, RejectsMalformed) {
  for (const char* bad :
       {"", "S", "5", "5s", "5x", "-5S", " 5S", "5S ", "123456789S", "1.5S", "5SS"}) {
    EXPECT_FALSE(ParseGrpcTimeout(bad).has_value()) << bad;
  }
}

TEST(GrpcFrame, RoundTrip) {
  const std::string framed = FrameMessage("hello");
  ASSERT_EQ(framed.size(), 10u);
  EXPECT_EQ(framed.substr(0, 5), std::string("\0\0\0\0\5", 5));
  std::string_view payload;
  ASSERT_EQ(ReadUnaryMessage(framed, &payload), FrameResult::kOk);
  EXPECT_EQ(payload, "hello");
  ASSERT_EQ(ReadUnaryMessage(FrameMessage(""), &payload), FrameResult::kOk);
  EXPECT_EQ(payload, "");
}

TEST(GrpcFrame, RejectsBadFraming) {
  std::string_view payload;
  EXPECT_EQ(ReadUnaryMessage("", &payload), FrameResult::kTruncated);
  EXPECT_EQ(ReadUnaryMessage(std::string("\0\0\0", 3), &payload), FrameResult::kTruncated);
  const std::string framed = FrameMessage("hello");
  EXPECT_EQ(ReadUnaryMessage(framed.substr(0, 8), &payload), FrameResult::kTruncated);
  EXPECT_EQ(ReadUnaryMessage(framed + framed, &payload), FrameResult::kTrailingData);
  std::string compressed = framed;
  compressed[0] = 1;
  EXPECT_EQ(ReadUnaryMessage(compressed, &payload), FrameResult::kCompressed);
  // A length near 4 GiB with a short body: truncated, no overflow.
  EXPECT_EQ(ReadUnaryMessage(std::string("\0\xff\xff\xff\xff", 5) + "x", &payload),
            FrameResult::kTruncated);
}

TEST(GrpcDeadline, CappedAndAnsweredBeforeTheClient) {
  EXPECT_EQ(GatewayDeadline(10s, 10min), 9500ms);  // 5%
  EXPECT_EQ(GatewayDeadline(60s, 10min), 59s);     // at most 1 s earlier
  EXPECT_EQ(GatewayDeadline(1h, 10min), 599s);     // capped at --max-deadline first
  EXPECT_EQ(GatewayDeadline(0s, 10min), 1ms);      // never zero
}

TEST(GrpcStatusOfRest, UsesTheBodyCodeElseTheHttpTable) {
  auto s = GrpcStatusOfRest(429, R"({"code":8,"message":"there is no available GameServer"})");
  EXPECT_EQ(s.code, 8);
  EXPECT_EQ(s.message, "there is no available GameServer");
  EXPECT_EQ(GrpcStatusOfRest(503, R"({"code":14,"message":"shutting down"})").code, 14);
  EXPECT_EQ(GrpcStatusOfRest(400, R"({"code":3,"message":"bad"})").code, 3);
  // agones-allocator's gRPC answer to an invalid request: grpc-status 422, as its REST body says.
  EXPECT_EQ(GrpcStatusOfRest(500, R"({"code":422,"message":"invalid"})").code, 422);
  EXPECT_EQ(GrpcStatusOfRest(500, R"({"code":0,"message":"odd"})").code, 2);
  EXPECT_EQ(GrpcStatusOfRest(413, "too large\n").code, 8);
  EXPECT_EQ(GrpcStatusOfRest(503, "busy").code, 14);
  EXPECT_EQ(GrpcStatusOfRest(404, "").code, 12);
  EXPECT_EQ(GrpcStatusOfRest(400, "x").code, 13);
  EXPECT_EQ(GrpcStatusOfRest(418, "x").code, 2);
  EXPECT_EQ(GrpcStatusOfRest(500, std::string(100000, '[')).code, 2);  // deep: no crash
}

TEST(GrpcMessage, PercentEncoded) {
  EXPECT_EQ(PercentEncodeGrpcMessage("a b%c\n\xc3\xa9"), "a b%25c%0A%C3%A9");
}

// ---- GrpcService ----

struct Recorded {
  std::string method, path, content_type, body, deadline, key;
  bool http2 = false;
  bool abandon_hook = false;
};

class GrpcServiceTest : public ::testing::Test {
 protected:
  GrpcServiceTest()
      : service_(
            {.max_deadline = std::chrono::minutes(10)},
            [this](const server::HttpRequest& req, server::Responder r) {
              Recorded rec;
              rec.method = std::string(req.method);
              rec.path = std::string(req.path);
              rec.content_type = std::string(req.content_type);
              rec.body = std::string(req.body);
              rec.deadline = std::string(req.header("x-allocating-deadline"));
              rec.key = std::string(req.header("X-Allocating-Idempotency-Key"));
              rec.http2 = req.http2;
              rec.abandon_hook = static_cast<bool>(req.on_abandoned);
              seen_ = rec;
              r(rest_answer_);
            },
            [this] { return serving_; }, registry_) {}

  // A gRPC request on HTTP/2 with `metadata` (lower-case names).
  std::optional<server::HttpResponse> Call(
      std::string path, std::string body,
      std::vector<std::pair<std::string, std::string>> metadata = {},
      std::string content_type = "application/grpc", bool http2 = true, bool too_large = false) {
    server::HttpRequest req;
    req.method = "POST";
    req.path = path;
    req.content_type = content_type;
    req.body = body;
    req.body_too_large = too_large;
    req.http2 = http2;
    req.header = [&metadata](std::string_view name) -> std::string_view {
      for (auto& [n, v] : metadata) {
        if (n.size() == name.size() &&
            std::equal(n.begin(), n.end(), name.begin(),
                       [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
          return v;
        }
      }
      return {};
    };
    req.on_abandoned = [](std::function<void()>) {};
    std::optional<server::HttpResponse> out;
    handled_ = service_.Handle(req, [&out](server::HttpResponse r) { out = std::move(r); });
    return out;
  }

  static std::string Field(const server::HttpResponse& r, const std::string& name) {
    for (auto* fields : {&r.headers, &r.trailers}) {
      for (auto& [n, v] : *fields) {
        if (n == name) return v;
      }
    }
    return "<absent>";
  }

  static std::string AllocateBody(const allocation::AllocationRequest& req) {
    return FrameMessage(req.SerializeAsString());
  }

  prometheus::Registry registry_;
  server::HttpResponse rest_answer_;
  bool serving_ = true;
  bool handled_ = false;
  std::optional<Recorded> seen_;
  GrpcService service_;
};

TEST_F(GrpcServiceTest, AllocateGoesThroughRestAsJson) {
  allocation::AllocationRequest req;
  req.set_namespace_("team-a");
  (*req.mutable_metadata()->mutable_labels())["mode"] = "ranked";
  req.add_gameserverselectors()->mutable_matchlabels()->insert({"agones.dev/fleet", "f"});
  (*req.mutable_counters())["players"].mutable_amount()->set_value(2);
  rest_answer_.status = 200;
  rest_answer_.content_type = "application/json";
  rest_answer_.body =
      R"({"gameServerName":"gs-1","ports":[{"name":"default","port":7654}],"address":"10.0.0.1",)"
      R"("addresses":[{"type":"InternalIP","address":"10.0.0.1"}],"nodeName":"n1","source":"local",)"
      R"("metadata":{"labels":{"a":"b"},"annotations":{"x":"y"}},"counters":{"players":{"count":"2","capacity":10}},)"
      R"("lists":{},"somethingNew":{"deep":[1,2]}})";
  bool written = false;
  rest_answer_.on_written = [&written](bool ok) { written = ok; };
  auto res = Call("/allocation.AllocationService/Allocate", AllocateBody(req),
                  {{"grpc-timeout", "10S"}, {"x-allocating-idempotency-key", "k-1"}});
  ASSERT_TRUE(handled_);
  ASSERT_TRUE(seen_);
  EXPECT_EQ(seen_->method, "POST");
  EXPECT_EQ(seen_->path, "/gameserverallocation");
  EXPECT_EQ(seen_->content_type, "application/json");
  EXPECT_NE(seen_->body.find(R"("namespace":"team-a")"), std::string::npos) << seen_->body;
  EXPECT_NE(seen_->body.find(R"("gameServerSelectors":[{"matchLabels":{"agones.dev/fleet":"f"}}])"),
            std::string::npos)
      << seen_->body;
  EXPECT_NE(seen_->body.find(R"("amount":"2")"), std::string::npos) << seen_->body;
  EXPECT_EQ(seen_->deadline, "9.5s");
  EXPECT_EQ(seen_->key, "k-1");
  EXPECT_TRUE(seen_->http2);
  EXPECT_TRUE(seen_->abandon_hook);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->content_type, "application/grpc");
  EXPECT_EQ(Field(*res, "grpc-status"), "0");
  std::string_view payload;
  ASSERT_EQ(ReadUnaryMessage(res->body, &payload), FrameResult::kOk);
  allocation::AllocationResponse out;
  ASSERT_TRUE(out.ParseFromArray(payload.data(), static_cast<int>(payload.size())));
  EXPECT_EQ(out.gameservername(), "gs-1");
  ASSERT_EQ(out.ports_size(), 1);
  EXPECT_EQ(out.ports(0).port(), 7654);
  EXPECT_EQ(out.addresses(0).type(), "InternalIP");
  EXPECT_EQ(out.source(), "local");
  EXPECT_EQ(out.metadata().annotations().at("x"), "y");
  EXPECT_EQ(out.counters().at("players").count().value(), 2);
  EXPECT_EQ(out.counters().at("players").capacity().value(), 10);
  ASSERT_TRUE(res->on_written);
  res->on_written(true);
  EXPECT_TRUE(written);
}

TEST_F(GrpcServiceTest, ExplicitDeadlineMetadataWins) {
  rest_answer_.status = 200;
  rest_answer_.body = "{}";
  Call("/allocation.AllocationService/Allocate", AllocateBody({}),
       {{"grpc-timeout", "10S"}, {"x-allocating-deadline", "3s"}});
  ASSERT_TRUE(seen_);
  EXPECT_EQ(seen_->deadline, "3s");
  seen_.reset();
  Call("/allocation.AllocationService/Allocate", AllocateBody({}));
  ASSERT_TRUE(seen_);
  EXPECT_EQ(seen_->deadline, "");  // the gateway's default applies
}

TEST_F(GrpcServiceTest, RestErrorsBecomeGrpcStatus) {
  rest_answer_.status = 429;
  rest_answer_.body =
      R"({"code":8,"message":"there is no available GameServer to allocate","details":[]})";
  auto res = Call("/allocation.AllocationService/Allocate", AllocateBody({}));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_TRUE(res->body.empty());  // trailers-only
  EXPECT_EQ(Field(*res, "grpc-status"), "8");
  EXPECT_EQ(Field(*res, "grpc-message"), "there is no available GameServer to allocate");
  rest_answer_.status = 503;
  rest_answer_.body = R"({"code":14,"message":"the gateway is shutting down"})";
  EXPECT_EQ(Field(*Call("/allocation.AllocationService/Allocate", AllocateBody({})), "grpc-status"),
            "14");
  rest_answer_.status = 200;
  rest_answer_.body = "not json";
  EXPECT_EQ(Field(*Call("/allocation.AllocationService/Allocate", AllocateBody({})), "grpc-status"),
            "13");
}

TEST_F(GrpcServiceTest, BadCallsAnsweredClearly) {
  const std::string path = "/allocation.AllocationService/Allocate";
  auto status = [&](std::optional<server::HttpResponse> r) {
    return r ? Field(*r, "grpc-status") : std::string("<no answer>");
  };
  EXPECT_EQ(status(Call(path, "", {}, "application/grpc", true, true)), "8");  // too large
  EXPECT_EQ(status(Call(path, "\0\0\0", {})), "13");                           // truncated
  EXPECT_EQ(status(Call(path, FrameMessage("x") + FrameMessage("y"))), "13");  // two messages
  EXPECT_EQ(status(Call(path, FrameMessage("\xff\xff\xff"))), "13");           // not a message
  std::string compressed = FrameMessage("abc");
  compressed[0] = 1;
  EXPECT_EQ(status(Call(path, compressed)), "13");
  EXPECT_EQ(status(Call(path, compressed, {{"grpc-encoding", "gzip"}})), "12");
  EXPECT_EQ(status(Call("/allocation.AllocationService/Other", FrameMessage(""))), "12");
  EXPECT_EQ(status(Call("/some.Service/Method", FrameMessage(""))), "12");
  EXPECT_EQ(status(Call(path, FrameMessage(""), {{"grpc-timeout", "soon"}})), "13");
  EXPECT_FALSE(seen_) << "no bad call may reach the gateway";
  // Wrong content-type on a gRPC path: 415, as grpc-go.
  auto r = Call(path, "{}", {}, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 415);
  // gRPC over HTTP/1.1.
  r = Call(path, FrameMessage(""), {}, "application/grpc", false);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 505);
  // REST is not taken.
  Call("/gameserverallocation", "{}", {}, "application/json");
  EXPECT_FALSE(handled_);
  Call("/allocation.AllocationService/Allocate", "{}", {}, "application/json", false);
  EXPECT_FALSE(handled_);
}

TEST_F(GrpcServiceTest, HealthCheck) {
  auto check = [&](const std::string& service) {
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    auto r = Call("/grpc.health.v1.Health/Check", FrameMessage(req.SerializeAsString()));
    EXPECT_TRUE(r);
    if (!r || Field(*r, "grpc-status") != "0")
      return std::string("status ") + Field(*r, "grpc-status");
    std::string_view payload;
    EXPECT_EQ(ReadUnaryMessage(r->body, &payload), FrameResult::kOk);
    grpc::health::v1::HealthCheckResponse out;
    EXPECT_TRUE(out.ParseFromArray(payload.data(), static_cast<int>(payload.size())));
    return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(out.status());
  };
  EXPECT_EQ(check(""), "SERVING");
  EXPECT_EQ(check("allocation.AllocationService"), "SERVING");
  EXPECT_EQ(check("nope"), "status 5");
  serving_ = false;
  EXPECT_EQ(check(""), "NOT_SERVING");
  EXPECT_EQ(check("allocation.AllocationService"), "NOT_SERVING");
  auto watch = Call("/grpc.health.v1.Health/Watch", FrameMessage(""));
  ASSERT_TRUE(watch);
  EXPECT_EQ(Field(*watch, "grpc-status"), "12");
}

// A string field with invalid UTF-8 (issue 35): the client is told which field, INVALID_ARGUMENT,
// and libprotobuf's own line goes to the structured log (debug, rate-limited), never raw to stderr.
TEST_F(GrpcServiceTest, InvalidUtf8IsInvalidArgumentAndLoggedOnce) {
  const std::string path = "/allocation.AllocationService/Allocate";
  // Field 1 (namespace, a proto3 string), length 2, bytes that are not UTF-8.
  const std::string bad = FrameMessage(std::string("\x0a\x02\xff\xfe", 4));
  testing::internal::CaptureStderr();
  auto r = Call(path, bad);
  const std::string quiet = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r);
  EXPECT_EQ(Field(*r, "grpc-status"), "3");
  EXPECT_NE(Field(*r, "grpc-message").find("allocation.AllocationRequest.namespace"),
            std::string::npos)
      << Field(*r, "grpc-message");
  EXPECT_FALSE(seen_) << "an undecodable request may not reach the gateway";
  EXPECT_EQ(quiet, "") << "at the default level nothing is written";

  // At debug level: structured records only, at most kProtobufLinesPerSecond per second.
  log::SetLevel(log::Level::kDebug);
  testing::internal::CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  constexpr int kCalls = 50;
  for (int i = 0; i < kCalls; ++i) {
    auto again = Call(path, bad);
    ASSERT_TRUE(again);
    EXPECT_EQ(Field(*again, "grpc-status"), "3");
  }
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start)
          .count();
  const std::string logged = testing::internal::GetCapturedStderr();
  log::SetLevel(log::Level::kInfo);
  std::istringstream lines(logged);
  int records = 0;
  for (std::string line; std::getline(lines, line);) {
    ++records;
    EXPECT_NE(line.find("\"library\":\"protobuf\""), std::string::npos) << line;
    EXPECT_NE(line.find("invalid UTF-8"), std::string::npos) << line;
    EXPECT_EQ(line.find("[libprotobuf"), std::string::npos) << "libprotobuf's own format: " << line;
  }
  EXPECT_GE(records, 1);
  EXPECT_LE(records, kProtobufLinesPerSecond * (seconds + 2)) << logged;
  EXPECT_LT(records, kCalls);

  // Health/Check decodes the same way.
  auto health = Call("/grpc.health.v1.Health/Check", bad);
  ASSERT_TRUE(health);
  EXPECT_EQ(Field(*health, "grpc-status"), "3");
  // A message that is not protobuf at all stays INTERNAL, as grpc-go answers it.
  auto junk = Call(path, FrameMessage("\xff\xff\xff"));
  ASSERT_TRUE(junk);
  EXPECT_EQ(Field(*junk, "grpc-status"), "13");
}

}  // namespace
}  // namespace aw::gateway
