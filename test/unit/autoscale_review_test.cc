// FleetAutoscaleReview parsing and the answer (autoscale/review.h), with the body Agones 1.56
// sends (Go's encoding/json of autoscalingv1.FleetAutoscaleReview).
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <string>

#include "autoscale/review.h"

namespace aw::autoscale {
namespace {

// As applyWebhookPolicy marshals it: no apiVersion/kind, every FleetStatus count present, the
// optional labels/annotations (FleetAutoscaleRequestMetaData), "response":null.
constexpr std::string_view kAgonesBody =
    R"({"request":{"uid":"4b0ef6b8-7c8c-11ee-b962-0242ac120002","name":"simple-fleet",)"
    R"("namespace":"default","status":{"replicas":5,"readyReplicas":1,"reservedReplicas":0,)"
    R"("allocatedReplicas":2,"players":{"count":0,"capacity":0},"counters":{"rooms":)"
    R"({"allocatedCount":0,"allocatedCapacity":0,"count":0,"capacity":10}},"lists":{}},)"
    R"("labels":{"app":"x"},"annotations":{"a":"b"}},"response":null})";

TEST(AutoscaleReviewTest, ParsesWhatAgonesSends) {
  AutoscaleRequest r;
  Status s = ParseAutoscaleReview(kAgonesBody, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.uid, "4b0ef6b8-7c8c-11ee-b962-0242ac120002");
  EXPECT_EQ(r.name, "simple-fleet");
  EXPECT_EQ(r.namespace_, "default");
  EXPECT_EQ(r.status.replicas, 5);
  EXPECT_EQ(r.status.ready_replicas, 1);
  EXPECT_EQ(r.status.reserved_replicas, 0);
  EXPECT_EQ(r.status.allocated_replicas, 2);
}

TEST(AutoscaleReviewTest, AcceptsOwnApiVersionAndKind) {
  AutoscaleRequest r;
  EXPECT_TRUE(ParseAutoscaleReview(
                  R"({"apiVersion":"autoscaling.agones.dev/v1","kind":"FleetAutoscaleReview",)"
                  R"("request":{"uid":"u","name":"f","namespace":"n","status":{"replicas":0,)"
                  R"("allocatedReplicas":0}}})",
                  &r)
                  .ok());
}

std::string Review(std::string_view status,
                   std::string_view fields = R"("uid":"u","name":"f","namespace":"n",)") {
  return std::string(R"({"request":{)") + std::string(fields) + R"("status":)" +
         std::string(status) + "}}";
}

void ExpectError(std::string_view body, std::string_view needle) {
  AutoscaleRequest r;
  Status s = ParseAutoscaleReview(body, &r);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << body.substr(0, 200);
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message() << " / want " << needle;
}

TEST(AutoscaleReviewTest, RefusesMalformedReviews) {
  ExpectError("", "not valid JSON");
  ExpectError("{", "not valid JSON");
  ExpectError(R"({"request":{}} x)", "not valid JSON");
  ExpectError("[]", "is an array, expected a FleetAutoscaleReview object");
  ExpectError("null", "is null");
  ExpectError("{}", "body.request is missing");
  ExpectError(R"({"request":null})", "body.request is missing");
  ExpectError(R"({"request":[]})", "body.request is an array");
  ExpectError(R"({"kind":"AdmissionReview","request":{}})", "body.kind is \"AdmissionReview\"");
  ExpectError(R"({"apiVersion":"admission.k8s.io/v1","request":{}})", "body.apiVersion");
  ExpectError(R"({"request":{"name":"f","namespace":"n","status":{}}})", "request.uid is missing");
  ExpectError(R"({"request":{"uid":"","name":"f","namespace":"n","status":{}}})",
              "request.uid is empty");
  ExpectError(R"({"request":{"uid":7,"name":"f","namespace":"n","status":{}}})",
              "request.uid is a number");
  ExpectError(R"({"request":{"uid":"u","namespace":"n","status":{}}})", "request.name is missing");
  ExpectError(R"({"request":{"uid":"u","name":"f","status":{}}})", "request.namespace is missing");
  ExpectError(R"({"request":{"uid":"u","name":"f","namespace":"n"}})", "request.status is missing");
  ExpectError(Review("[]"), "request.status is an array");
  ExpectError(Review(R"({"allocatedReplicas":1})"), "request.status.replicas is missing");
  ExpectError(Review(R"({"replicas":1})"), "request.status.allocatedReplicas is missing");
  ExpectError(Review(R"({"replicas":1,"allocatedReplicas":-1})"),
              "request.status.allocatedReplicas is -1: counts cannot be negative");
  ExpectError(Review(R"({"replicas":-3,"allocatedReplicas":1})"), "request.status.replicas is -3");
  ExpectError(Review(R"({"replicas":1,"allocatedReplicas":0,"readyReplicas":-1})"),
              "request.status.readyReplicas is -1");
  ExpectError(Review(R"({"replicas":1,"allocatedReplicas":0,"reservedReplicas":-2})"),
              "request.status.reservedReplicas is -2");
  ExpectError(Review(R"({"replicas":1.5,"allocatedReplicas":0})"), "fraction or an exponent");
  ExpectError(Review(R"({"replicas":"5","allocatedReplicas":0})"),
              "request.status.replicas is a string");
  ExpectError(Review(R"({"replicas":2147483648,"allocatedReplicas":0})"), "int32");
  ExpectError(Review(R"({"replicas":18446744073709551615,"allocatedReplicas":0})"), "int32");
  ExpectError(Review(R"({"replicas":1,"replicas":9,"allocatedReplicas":0})"),
              "duplicate key \"replicas\"");
  ExpectError(std::string("{\"request\":\0}", 13), "NUL byte");
  ExpectError(std::string(100, '[') + std::string(100, ']'), "deeper than 64 levels");
  ExpectError("{\"request\":{\"uid\":\"\xff\"}}", "not valid JSON");
}

TEST(AutoscaleReviewTest, NullOptionalCountsAreZero) {
  AutoscaleRequest r;
  ASSERT_TRUE(ParseAutoscaleReview(
                  Review(R"({"replicas":3,"allocatedReplicas":1,"readyReplicas":null})"), &r)
                  .ok());
  EXPECT_EQ(r.status.ready_replicas, 0);
}

TEST(AutoscaleReviewTest, BuildsTheAnswerAgonesReads) {
  const std::string body = BuildAutoscaleResponse("u\"1\\", true, 12);
  rapidjson::Document d;
  d.Parse(body.c_str());
  ASSERT_FALSE(d.HasParseError()) << body;
  EXPECT_STREQ(d["apiVersion"].GetString(), "autoscaling.agones.dev/v1");
  EXPECT_STREQ(d["kind"].GetString(), "FleetAutoscaleReview");
  EXPECT_STREQ(d["response"]["uid"].GetString(), "u\"1\\");
  EXPECT_TRUE(d["response"]["scale"].GetBool());
  EXPECT_EQ(d["response"]["replicas"].GetInt(), 12);
  EXPECT_EQ(BuildAutoscaleResponse("x", false, 3),
            R"({"apiVersion":"autoscaling.agones.dev/v1","kind":"FleetAutoscaleReview",)"
            R"("response":{"uid":"x","scale":false,"replicas":3}})");
}

}  // namespace
}  // namespace aw::autoscale
