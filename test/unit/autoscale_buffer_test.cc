// Agones' Buffer policy arithmetic and validation (autoscale/buffer.h). The expected values are
// the facts of Agones' own tests (pkg/fleetautoscalers/fleetautoscalers_test.go
// TestApplyBufferPolicy, controller_test.go TestControllerSyncFleetAutoscaler), Agones v1.56.
#include <gtest/gtest.h>

#include <cmath>

#include "autoscale/buffer.h"

namespace aw::autoscale {
namespace {

BufferPolicy Int(int32_t size, int32_t min, int32_t max) { return {size, false, min, max}; }
BufferPolicy Pct(int32_t size, int32_t min, int32_t max) { return {size, true, min, max}; }

TEST(AutoscaleBufferTest, AgonesApplyBufferPolicyCases) {
  // "Increase replicas": buffer 20, max 100, 40 allocated -> 60.
  auto r = ApplyBuffer(Int(20, 0, 100), 40);
  EXPECT_EQ(r.replicas, 60);
  EXPECT_FALSE(r.limited);
  // "Min replicas set, limited == true": min 65 -> 65.
  r = ApplyBuffer(Int(20, 65, 100), 40);
  EXPECT_EQ(r.replicas, 65);
  EXPECT_TRUE(r.limited);
  // "Replicas == max": max 55 -> 55.
  r = ApplyBuffer(Int(20, 0, 55), 40);
  EXPECT_EQ(r.replicas, 55);
  EXPECT_TRUE(r.limited);
  // "FromString buffer size, scale up": 20% with 50 allocated -> ceil(62.5) = 63.
  r = ApplyBuffer(Pct(20, 0, 100), 50);
  EXPECT_EQ(r.replicas, 63);
  EXPECT_FALSE(r.limited);
  // "FromString buffer size, scale up twice": 10% with 1 allocated -> ceil(1.11) = 2.
  r = ApplyBuffer(Pct(10, 0, 10), 1);
  EXPECT_EQ(r.replicas, 2);
  EXPECT_FALSE(r.limited);
}

TEST(AutoscaleBufferTest, AgonesControllerCases) {
  // "scaling up, buffer policy": buffer 7, 5 allocated -> 12.
  EXPECT_EQ(ApplyBuffer(Int(7, 0, 100), 5).replicas, 12);
  // "scaling down, buffer policy": buffer 8, 5 allocated (20 replicas) -> 13.
  EXPECT_EQ(ApplyBuffer(Int(8, 0, 100), 5).replicas, 13);
  // defaultFixtures: buffer 5, 2 allocated and 3 reserved: reserved do not count -> 7.
  EXPECT_EQ(ApplyBuffer(Int(5, 0, 100), 2).replicas, 7);
}

TEST(AutoscaleBufferTest, IssueExamples) {
  EXPECT_EQ(ApplyBuffer(Int(5, 0, 100), 7).replicas, 12);    // buffer 5 with 7 allocated
  EXPECT_EQ(ApplyBuffer(Pct(20, 1, 100), 10).replicas, 13);  // 20%: ceil(10 / 0.8) = 12.5 -> 13
  EXPECT_EQ(ApplyBuffer(Pct(20, 1, 100), 8).replicas, 10);   // exact: 8 / 0.8 = 10
  EXPECT_EQ(ApplyBuffer(Pct(30, 1, 100), 8).replicas, 12);  // Agones' comment: 8 / 0.7 = 11.4 -> 12
  auto r = ApplyBuffer(Pct(20, 3, 100), 0);                 // empty fleet -> minReplicas
  EXPECT_EQ(r.replicas, 3);
  EXPECT_TRUE(r.limited);
  r = ApplyBuffer(Int(5, 0, 100), 0);
  EXPECT_EQ(r.replicas, 5);
  EXPECT_FALSE(r.limited);
}

TEST(AutoscaleBufferTest, PercentMatchesFloatCeilEverywhere) {
  // Agones: int32(math.Ceil(float64(allocated*100) / float64(100-p))). Our integer ceiling must
  // agree for every percentage and a range of sizes.
  for (int p = 1; p <= 99; ++p) {
    for (int64_t a :
         {0LL, 1LL, 2LL, 3LL, 7LL, 99LL, 100LL, 101LL, 997LL, 12345LL, 1000000LL, 21474836LL}) {
      const double want = std::ceil(static_cast<double>(a * 100) / static_cast<double>(100 - p));
      EXPECT_EQ(ApplyBuffer(Pct(p, 0, INT32_MAX), a).replicas, static_cast<int64_t>(want))
          << p << "% of " << a;
    }
  }
}

TEST(AutoscaleBufferTest, HugeCountsStayInRange) {
  auto r = ApplyBuffer(Int(INT32_MAX, 0, INT32_MAX), INT64_C(4294967294));
  EXPECT_EQ(r.replicas, INT32_MAX);
  EXPECT_TRUE(r.limited);
  r = ApplyBuffer(Pct(99, 1, INT32_MAX), INT64_C(4294967294));
  EXPECT_EQ(r.replicas, INT32_MAX);
  EXPECT_EQ(ApplyBuffer(Int(5, 0, 100), -3).replicas, 5);  // negative treated as 0
}

Status Parse(std::vector<Param> params, BufferPolicy* p) { return ParseBufferParams(params, p); }

TEST(AutoscaleBufferTest, ParsesParameters) {
  BufferPolicy p;
  ASSERT_TRUE(Parse({{"bufferSize", "5"}, {"maxReplicas", "100"}}, &p).ok());
  EXPECT_EQ(p.buffer_size, 5);
  EXPECT_FALSE(p.percent);
  EXPECT_EQ(p.min_replicas, 0);
  EXPECT_EQ(p.max_replicas, 100);
  ASSERT_TRUE(Parse({{"maxReplicas", "50"}, {"minReplicas", "2"}, {"bufferSize", "20%"}}, &p).ok());
  EXPECT_EQ(p.buffer_size, 20);
  EXPECT_TRUE(p.percent);
  EXPECT_EQ(p.min_replicas, 2);
  EXPECT_EQ(BufferSizeText(p), "20%");
}

void ExpectError(std::vector<Param> params, std::string_view needle) {
  BufferPolicy p;
  Status s = Parse(params, &p);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message() << " / want " << needle;
}

TEST(AutoscaleBufferTest, RefusesBadParameters) {
  ExpectError({{"maxReplicas", "10"}}, "bufferSize is missing");
  ExpectError({{"bufferSize", "5"}}, "maxReplicas is missing");
  ExpectError({{"bufferSize", "asd"}, {"maxReplicas", "10"}}, "parameter bufferSize is \"asd\"");
  ExpectError({{"bufferSize", "5"}, {"maxReplicas", "1e3"}}, "parameter maxReplicas is \"1e3\"");
  ExpectError({{"bufferSize", "5"}, {"maxReplicas", "99999999999"}}, "int32");
  ExpectError({{"bufferSize", "5"}, {"maxReplicas", "10"}, {"bufferSize", "6"}},
              "bufferSize is given more than once");
  ExpectError({{"bufferSize", "5"}, {"maxReplica", "10"}}, "unknown parameter \"maxReplica\"");
  ExpectError({{"bufferSize", "5.5"}, {"maxReplicas", "10"}}, "bufferSize");
  ExpectError({{"bufferSize", "%"}, {"maxReplicas", "10"}}, "bufferSize");
  ExpectError({{"bufferSize", ""}, {"maxReplicas", "10"}}, "bufferSize");
  ExpectError({{"bufferSize", "+5"}, {"maxReplicas", "10"}}, "bufferSize");
  // Agones' ValidateBufferPolicy rules.
  ExpectError({{"bufferSize", "0"}, {"maxReplicas", "10"}},
              "bufferSize is 0: it must be bigger than 0");
  ExpectError({{"bufferSize", "-5"}, {"maxReplicas", "10"}}, "bufferSize is -5");
  ExpectError({{"bufferSize", "20"}, {"maxReplicas", "10"}},
              "maxReplicas (10) must be bigger than or equal to bufferSize (20)");
  ExpectError({{"bufferSize", "5"}, {"minReplicas", "3"}, {"maxReplicas", "10"}},
              "minReplicas (3) must be 0 or bigger");
  ExpectError({{"bufferSize", "5"}, {"minReplicas", "20"}, {"maxReplicas", "10"}},
              "must not be bigger than maxReplicas");
  ExpectError({{"bufferSize", "5"}, {"minReplicas", "-1"}, {"maxReplicas", "10"}},
              "minReplicas is -1");
  ExpectError({{"bufferSize", "0%"}, {"minReplicas", "1"}, {"maxReplicas", "10"}},
              "between 1% and 99%");
  ExpectError({{"bufferSize", "100%"}, {"minReplicas", "1"}, {"maxReplicas", "10"}},
              "between 1% and 99%");
  ExpectError({{"bufferSize", "-5%"}, {"minReplicas", "1"}, {"maxReplicas", "10"}},
              "between 1% and 99%");
  ExpectError({{"bufferSize", "20%"}, {"maxReplicas", "10"}},
              "with a percentage bufferSize it must be at least 1");
}

TEST(AutoscaleBufferTest, AcceptsAgonesBoundaryValues) {
  EXPECT_TRUE(ValidateBufferPolicy(Int(10, 0, 10)).ok());   // max == bufferSize
  EXPECT_TRUE(ValidateBufferPolicy(Int(10, 10, 10)).ok());  // min == max == bufferSize
  EXPECT_TRUE(ValidateBufferPolicy(Pct(1, 1, 1)).ok());
  EXPECT_TRUE(ValidateBufferPolicy(Pct(99, 1, 1)).ok());
}

}  // namespace
}  // namespace aw::autoscale
