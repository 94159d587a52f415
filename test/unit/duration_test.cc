// Go-style duration parsing and formatting (util/duration.h).
#include "util/duration.h"

#include <gtest/gtest.h>

#include <limits>

namespace aw::util {
namespace {

using std::chrono::nanoseconds;

int64_t P(std::string_view s) {
  auto d = ParseDuration(s);
  EXPECT_TRUE(d.ok()) << s;
  return d ? d->count() : -1;
}

TEST(DurationTest, ParsesGoForms) {
  EXPECT_EQ(P("0"), 0);
  EXPECT_EQ(P("0s"), 0);
  EXPECT_EQ(P("300ms"), 300'000'000);
  EXPECT_EQ(P("1.5s"), 1'500'000'000);
  EXPECT_EQ(P("1m30s"), 90'000'000'000);
  EXPECT_EQ(P("2h"), 7'200'000'000'000);
  EXPECT_EQ(P("1h2m3s4ms5us6ns"), 3'723'004'005'006);
  EXPECT_EQ(P("10us"), 10'000);
  EXPECT_EQ(P("10\xC2\xB5s"), 10'000);
  EXPECT_EQ(P("10\xCE\xBCs"), 10'000);
  EXPECT_EQ(P(".5s"), 500'000'000);
  EXPECT_EQ(P("5.s"), 5'000'000'000);
  EXPECT_EQ(P("+5s"), 5'000'000'000);
  EXPECT_EQ(P("1.000000001s"), 1'000'000'001);
  EXPECT_EQ(P("0.1ns"), 0);
  EXPECT_EQ(P("9223372036854775807ns"), std::numeric_limits<int64_t>::max());
}

TEST(DurationTest, RejectsBadInput) {
  for (std::string_view s : {"",
                             "-1s",
                             "-0",
                             "1",
                             "s",
                             "1x",
                             "90x",
                             "1.5",
                             ".",
                             ".s",
                             "1s ",
                             " 1s",
                             "1 s",
                             "1S",
                             "+",
                             "1h-1m",
                             "abc",
                             "1..5s",
                             "9223372036854775808ns",
                             "2562048h",
                             "99999999999999999999s",
                             "1e3s",
                             "0x10s",
                             "1sm"}) {
    auto d = ParseDuration(s);
    EXPECT_FALSE(d.ok()) << "'" << s << "'";
    EXPECT_FALSE(d.status().message().empty()) << s;
  }
}

TEST(DurationTest, FormatsLikeGo) {
  EXPECT_EQ(FormatDuration(nanoseconds(0)), "0s");
  EXPECT_EQ(FormatDuration(nanoseconds(1)), "1ns");
  EXPECT_EQ(FormatDuration(nanoseconds(1500)), "1.5\xC2\xB5s");
  EXPECT_EQ(FormatDuration(std::chrono::milliseconds(300)), "300ms");
  EXPECT_EQ(FormatDuration(std::chrono::milliseconds(1500)), "1.5s");
  EXPECT_EQ(FormatDuration(std::chrono::seconds(90)), "1m30s");
  EXPECT_EQ(FormatDuration(std::chrono::hours(2)), "2h0m0s");
  EXPECT_EQ(FormatDuration(std::chrono::minutes(10)), "10m0s");
  EXPECT_EQ(FormatDuration(nanoseconds(-1500000000)), "-1.5s");
  EXPECT_EQ(FormatDuration(nanoseconds(std::numeric_limits<int64_t>::max())),
            "2562047h47m16.854775807s");
}

TEST(DurationTest, RoundTrips) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{999}, int64_t{1000}, int64_t{1234567},
                    int64_t{1'000'000'000}, int64_t{61'000'000'001}, int64_t{3'600'000'000'000},
                    std::numeric_limits<int64_t>::max()}) {
    std::string s = FormatDuration(nanoseconds(n));
    auto back = ParseDuration(s);
    ASSERT_TRUE(back.ok()) << s;
    EXPECT_EQ(back->count(), n) << s;
  }
}

}  // namespace
}  // namespace aw::util
