#include "json/nesting_depth.h"

#include <gtest/gtest.h>

#include <string>

namespace aw::json {
namespace {

TEST(NestingDepth, AtTheLimitIsAccepted) {
  EXPECT_EQ(FirstTooDeep(R"({"a":[{"b":1}]})", 3), std::nullopt);
  EXPECT_EQ(FirstTooDeep("", 0), std::nullopt);
}

TEST(NestingDepth, ReportsTheOffsetOfTheFirstBracketOverTheLimit) {
  EXPECT_EQ(FirstTooDeep(R"({"a":[{"b":1}]})", 2), 6u);
  EXPECT_EQ(FirstTooDeep(std::string(100, '['), 64), 64u);
}

TEST(NestingDepth, BracketsInsideStringsAndEscapesDoNotCount) {
  EXPECT_EQ(FirstTooDeep(R"({"k":"[[[{{{"})", 1), std::nullopt);
  EXPECT_EQ(FirstTooDeep(R"({"k":"\"[[["})", 1), std::nullopt);
  EXPECT_EQ(FirstTooDeep(R"(["\\",[)", 1), 6u);
}

TEST(NestingDepth, ClosingBracketsLowerTheDepthButNeverBelowZero) {
  EXPECT_EQ(FirstTooDeep("[][][][]", 1), std::nullopt);
  EXPECT_EQ(FirstTooDeep("]]]][[", 1), 5u);
}

}  // namespace
}  // namespace aw::json
