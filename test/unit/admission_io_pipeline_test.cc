// AdmissionPipeline: HTTP semantics around admission::Handle, metrics and the elastic pool.
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <fstream>
#include <sstream>
#include <string>

#include "admission/io/metrics.h"
#include "admission/io/pipeline.h"
#include "contract/crd_state.h"
#include "policy/policy.h"

namespace aw::admission {
namespace {

using admission::Route;

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(AW_SOURCE_DIR) + "/test/fixtures/reviews/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class PipelineTest : public ::testing::Test {
 protected:
  PipelineTest()
      : crd_(true), metrics_(registry_), pipeline_(policy_, crd_, metrics_, 1024 * 1024) {
    policy_.trusted_users = {"system:serviceaccount:allocating-system:allocating-webhook"};
  }

  double Counter(const std::string& name, const std::map<std::string, std::string>& labels) {
    for (const auto& family : registry_.Collect()) {
      if (family.name != name) continue;
      for (const auto& m : family.metric) {
        std::map<std::string, std::string> got;
        for (const auto& l : m.label) got[l.name] = l.value;
        if (got == labels) return m.counter.value;
      }
    }
    return -1;
  }
  uint64_t HistogramCount(const std::string& route) {
    for (const auto& family : registry_.Collect()) {
      if (family.name != "allocating_webhook_admission_duration_seconds") continue;
      for (const auto& m : family.metric) {
        if (m.label.at(0).value == route) return m.histogram.sample_count;
      }
    }
    return 0;
  }

  prometheus::Registry registry_;
  policy::Policy policy_;
  contract::AtomicCrdReadiness crd_;
  AdmissionMetrics metrics_;
  AdmissionPipeline pipeline_;
};

TEST_F(PipelineTest, AllSeriesExistAtZero) {
  for (Route r : admission::AllRoutes()) {
    for (auto o : {"allowed", "rewritten", "denied", "error"}) {
      EXPECT_EQ(Counter("allocating_webhook_admission_requests_total",
                        {{"route", std::string(admission::RouteName(r))}, {"outcome", o}}),
                0);
    }
  }
}

TEST(ContentType, JsonDetection) {
  EXPECT_TRUE(IsJsonContentType("application/json"));
  EXPECT_TRUE(IsJsonContentType("Application/JSON"));
  EXPECT_TRUE(IsJsonContentType("application/json; charset=utf-8"));
  EXPECT_TRUE(IsJsonContentType(" application/json ;charset=UTF-8"));
  EXPECT_FALSE(IsJsonContentType(""));
  EXPECT_FALSE(IsJsonContentType("text/plain"));
  EXPECT_FALSE(IsJsonContentType("application/jsonx"));
  EXPECT_FALSE(IsJsonContentType("application/json-patch+json"));
  EXPECT_FALSE(IsJsonContentType("application/yaml"));
}

TEST_F(PipelineTest, WrongContentType415) {
  auto a = pipeline_.Serve(Route::kMutateGameServers, "text/plain", "{}", false);
  EXPECT_EQ(a.status, 415);
  EXPECT_NE(a.body.find("application/json"), std::string::npos);
  EXPECT_EQ(a.body.back(), '\n');
  EXPECT_EQ(Counter("allocating_webhook_admission_requests_total",
                    {{"route", "mutate_gameservers"}, {"outcome", "error"}}),
            1);
  EXPECT_EQ(Counter("allocating_webhook_http_errors_total", {{"code", "415"}}), 1);
}

TEST_F(PipelineTest, TooLarge413BeforeContentType) {
  auto a = pipeline_.Serve(Route::kValidateFleets, "text/plain", "", true);
  EXPECT_EQ(a.status, 413);
  EXPECT_NE(a.body.find("1048576"), std::string::npos) << a.body;
}

TEST_F(PipelineTest, MalformedReview400WithMessage) {
  auto a = pipeline_.Serve(Route::kValidateGameServers, "application/json", "{nope", false);
  EXPECT_EQ(a.status, 400);
  EXPECT_FALSE(a.body.empty());
  EXPECT_EQ(a.body.back(), '\n');
  EXPECT_EQ(Counter("allocating_webhook_admission_requests_total",
                    {{"route", "validate_gameservers"}, {"outcome", "error"}}),
            1);
}

TEST_F(PipelineTest, AllocatorUpdateRewrittenAndMeasured) {
  std::string body = Fixture("v1-allocator-update.json");
  ASSERT_FALSE(body.empty());
  auto a = pipeline_.Serve(Route::kMutateGameServers, "application/json", body, false);
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.content_type, "application/json");
  EXPECT_NE(a.body.find("\"patch\""), std::string::npos);
  EXPECT_EQ(Counter("allocating_webhook_admission_requests_total",
                    {{"route", "mutate_gameservers"}, {"outcome", "rewritten"}}),
            1);
  EXPECT_EQ(HistogramCount("mutate_gameservers"), 1u);
  EXPECT_EQ(metrics_.in_flight().Value(), 0);
}

TEST_F(PipelineTest, FailOpenCounted) {
  crd_.Set(false);
  std::string body = Fixture("v1-allocator-update.json");
  auto a = pipeline_.Serve(Route::kMutateGameServers, "application/json", body, false);
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body.find("\"patch\""), std::string::npos);
  EXPECT_EQ(Counter("allocating_webhook_fail_open_total", {{"route", "mutate_gameservers"}}), 1);
}

}  // namespace
}  // namespace aw::admission
