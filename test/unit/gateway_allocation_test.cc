// The gateway's wire formats: AllocationRequest checks, AllocationResponse reading, the metadata
// refresh and grpc-gateway's error bodies.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <string>

#include "gateway/allocation.h"

namespace aw::gateway {
namespace {

AllocationRequest ParseOk(const std::string& body) {
  AllocationRequest r;
  Status s = ParseAllocationRequest(body, &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return r;
}

std::string ParseError(const std::string& body) {
  AllocationRequest r;
  Status s = ParseAllocationRequest(body, &r);
  EXPECT_FALSE(s.ok()) << body;
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  return s.message();
}

TEST(GatewayRequest, ReadsNamespaceAndIgnoresUnknownFields) {
  auto r = ParseOk(R"({"namespace":"games","gameServerSelectors":[{"matchLabels":{"a":"b"}}],
                       "somethingNew":{"x":1},"metadata":{"labels":{"l":"v"}}})");
  EXPECT_EQ(r.namespace_, "games");
  EXPECT_FALSE(r.deadline);
  EXPECT_EQ(ParseOk("{}").namespace_, "");
  EXPECT_EQ(ParseOk(R"({"namespace":null})").namespace_, "");
}

TEST(GatewayRequest, RejectsMalformedBodiesWithThePath) {
  EXPECT_NE(ParseError("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(ParseError("{} {}").find("not valid JSON"), std::string::npos);
  EXPECT_NE(ParseError("[1]").find("must be a JSON object, not array"), std::string::npos);
  EXPECT_NE(ParseError(R"({"namespace":5})").find("namespace is a number"), std::string::npos);
  EXPECT_NE(ParseError(R"({"metadata":[]})").find("metadata is a array"), std::string::npos);
  EXPECT_NE(ParseError(R"({"metadata":{"labels":{"a":1}}})").find("metadata.labels[\"a\"]"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"metaPatch":{"annotations":"x"}})").find("metaPatch.annotations"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"gameServerSelectors":{}})").find("gameServerSelectors"),
            std::string::npos);
}

TEST(GatewayRequest, DeadlineAnnotation) {
  auto r =
      ParseOk(R"({"metadata":{"annotations":{"allocating.agones.dev/gateway-deadline":"1m30s"}}})");
  ASSERT_TRUE(r.deadline);
  EXPECT_EQ(*r.deadline, std::chrono::seconds(90));
  EXPECT_NE(ParseError(
                R"({"metadata":{"annotations":{"allocating.agones.dev/gateway-deadline":"soon"}}})")
                .find("gateway-deadline"),
            std::string::npos);
  EXPECT_NE(
      ParseError(R"({"metadata":{"annotations":{"allocating.agones.dev/gateway-deadline":"0s"}}})")
          .find("above 0"),
      std::string::npos);
}

TEST(GatewayRequest, DeadlineBounds) {
  std::chrono::nanoseconds d{};
  EXPECT_TRUE(ParseDeadline("10s", "h", std::chrono::minutes(1), &d).ok());
  EXPECT_EQ(d, std::chrono::seconds(10));
  Status s = ParseDeadline("2m", "X-Allocating-Deadline", std::chrono::minutes(1), &d);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("X-Allocating-Deadline"), std::string::npos);
  EXPECT_NE(s.message().find("at most 1m0s"), std::string::npos);
  EXPECT_FALSE(ParseDeadline("-1s", "h", std::chrono::minutes(1), &d).ok());
}

constexpr const char* kGatedResponse =
    R"({"gameServerName":"gs-1","ports":[{"name":"default","port":7000}],
 "address":"10.0.0.1","addresses":[],"nodeName":"n1","source":"local",
 "metadata":{"labels":{"allocating.agones.dev/enabled":"true"},
   "annotations":{"agones.dev/last-allocated":"2026-01-02T03:04:05.123456789Z",
                  "allocating.agones.dev/allocation":"2026-01-02T03:04:05.123456789Z",
                  "allocating.agones.dev/since":"2026-01-02T03:04:05.2Z"}},
 "counters":{},"lists":{}})";

TEST(GatewayResponse, GatedWhenTheWebhookMarkedThisAllocation) {
  AllocationResponse r;
  ASSERT_TRUE(ParseAllocationResponse(kGatedResponse, &r).ok());
  EXPECT_EQ(r.game_server_name, "gs-1");
  EXPECT_EQ(r.last_allocated, "2026-01-02T03:04:05.123456789Z");
  EXPECT_TRUE(r.gated);
}

TEST(GatewayResponse, NotGated) {
  AllocationResponse r;
  // Not opted in.
  ASSERT_TRUE(
      ParseAllocationResponse(
          R"({"gameServerName":"gs","metadata":{"annotations":{"agones.dev/last-allocated":"t"}}})",
          &r)
          .ok());
  EXPECT_FALSE(r.gated);
  // Opted in without this allocation's mark (a re-allocation of a confirmed server, or a bypass
  // of the gate): still waited on; the decision (decision.h) answers a confirmed one at once.
  ASSERT_TRUE(
      ParseAllocationResponse(
          R"({"gameServerName":"gs","metadata":{"labels":{"allocating.agones.dev/enabled":"true"},
                      "annotations":{"agones.dev/last-allocated":"t2","allocating.agones.dev/allocation":"t1"}}})",
          &r)
          .ok());
  EXPECT_TRUE(r.gated);
  ASSERT_TRUE(
      ParseAllocationResponse(
          R"({"gameServerName":"gs","metadata":{"labels":{"allocating.agones.dev/enabled":"true"}}})",
          &r)
          .ok());
  EXPECT_TRUE(r.gated);
  ASSERT_TRUE(ParseAllocationResponse(R"({"gameServerName":"gs"})", &r).ok());
  EXPECT_FALSE(r.gated);
  EXPECT_FALSE(ParseAllocationResponse(R"({"ports":[]})", &r).ok());
  EXPECT_FALSE(ParseAllocationResponse("nope", &r).ok());
}

TEST(GatewayResponse, RefreshMetadataKeepsEverythingElse) {
  rapidjson::Document gs;
  gs.Parse(R"({"metadata":{"name":"gs-1","labels":{"allocating.agones.dev/enabled":"true","x":"y"},
    "annotations":{"allocating.agones.dev/confirmed":"c","allocating.agones.dev/outcome":"Confirmed"}},
    "status":{"state":"Allocated"}})");
  std::string out;
  ASSERT_TRUE(RefreshMetadata(kGatedResponse, policy::ParseGameServer(gs), &out).ok());
  rapidjson::Document doc;
  doc.Parse(out.c_str());
  ASSERT_TRUE(doc.IsObject());
  EXPECT_STREQ(doc["gameServerName"].GetString(), "gs-1");
  EXPECT_EQ(doc["ports"][0]["port"].GetInt(), 7000);
  EXPECT_STREQ(doc["nodeName"].GetString(), "n1");
  EXPECT_TRUE(doc["counters"].IsObject());
  EXPECT_STREQ(doc["metadata"]["annotations"]["allocating.agones.dev/outcome"].GetString(),
               "Confirmed");
  EXPECT_FALSE(doc["metadata"]["annotations"].HasMember("allocating.agones.dev/since"));
  EXPECT_STREQ(doc["metadata"]["labels"]["x"].GetString(), "y");
  // Without metadata in the response, it is added.
  ASSERT_TRUE(RefreshMetadata(R"({"gameServerName":"g"})", policy::ParseGameServer(gs), &out).ok());
  doc.Parse(out.c_str());
  EXPECT_TRUE(doc["metadata"]["labels"].HasMember("x"));
  EXPECT_FALSE(RefreshMetadata("[]", policy::ParseGameServer(gs), &out).ok());
}

TEST(GatewayErrors, GrpcGatewayBodiesAndStatuses) {
  EXPECT_EQ(ErrorBody(GrpcCode::kResourceExhausted, "there is no \"available\""),
            R"({"code":8,"message":"there is no \"available\"","details":[]})");
  EXPECT_EQ(HttpStatusOf(GrpcCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusOf(GrpcCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusOf(GrpcCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusOf(GrpcCode::kUnimplemented), 501);
  EXPECT_EQ(HttpStatusOf(GrpcCode::kNotFound), 404);
  EXPECT_EQ(ErrorMessageOf(R"({"code":8,"message":"m","details":[]})"), "m");
  EXPECT_EQ(ErrorMessageOf("plain text"), "plain text");
  EXPECT_EQ(ErrorCodeOf(R"({"code":8,"message":"m","details":[]})"), 8);
  EXPECT_EQ(ErrorCodeOf(R"({"code":"8"})"), -1);
  EXPECT_EQ(ErrorCodeOf("plain text"), -1);
}

// Issue 23: 1,000,000 `[` (under the 1 MiB body limit) crashed the recursive parser.
TEST(GatewayRequest, DeepNestingIsRefusedNotACrash) {
  const std::string deep(1'000'000, '[');
  EXPECT_NE(ParseError(deep).find("nested deeper than 400"), std::string::npos);
  std::string objects;
  for (int i = 0; i < 100'000; ++i) objects += R"({"a":)";
  EXPECT_NE(ParseError(objects).find("nested deeper than 400"), std::string::npos);
  // Exactly at the bound: parsed (and refused for its shape, not its depth).
  std::string at_bound = R"({"x":)" + std::string(399, '[') + std::string(399, ']') + "}";
  ParseOk(at_bound);
  std::string over = R"({"x":)" + std::string(400, '[') + std::string(400, ']') + "}";
  EXPECT_NE(ParseError(over).find("nested deeper than 400"), std::string::npos);
  AllocationResponse r;
  EXPECT_FALSE(ParseAllocationResponse(deep, &r).ok());
  std::string refreshed;
  EXPECT_FALSE(RefreshMetadata(deep, policy::GameServerView{}, &refreshed).ok());
  EXPECT_EQ(ErrorMessageOf(deep).size(), deep.size());
}

TEST(GatewayResponse, SourceTellsLocalFromRemote) {
  AllocationResponse r;
  ASSERT_TRUE(ParseAllocationResponse(R"({"gameServerName":"gs","source":"local"})", &r).ok());
  EXPECT_EQ(r.source, "local");
  EXPECT_FALSE(r.remote);
  ASSERT_TRUE(ParseAllocationResponse(R"({"gameServerName":"gs"})", &r).ok());
  EXPECT_FALSE(r.remote);
  ASSERT_TRUE(ParseAllocationResponse(R"({"gameServerName":"gs","source":"10.0.0.7:443",
                      "metadata":{"labels":{"allocating.agones.dev/enabled":"true"},
                      "annotations":{"agones.dev/last-allocated":"t",
                                     "allocating.agones.dev/allocation":"t"}}})",
                                      &r)
                  .ok());
  EXPECT_TRUE(r.remote);
  EXPECT_TRUE(r.gated);
  EXPECT_EQ(r.source, "10.0.0.7:443");
}

}  // namespace
}  // namespace aw::gateway
