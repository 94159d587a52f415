// Reading the Buffer policy's parameters back from the URL Agones sends (autoscale/params.h).
#include <gtest/gtest.h>

#include "autoscale/params.h"

namespace aw::autoscale {
namespace {

constexpr std::string_view kPrefix = "/autoscale/buffer";

std::vector<Param> Split(std::string_view path, std::string_view query = "") {
  std::vector<Param> out;
  Status s = SplitParams(kPrefix, path, query, &out);
  EXPECT_TRUE(s.ok()) << path << "?" << query << ": " << s.ToString();
  return out;
}

using V = std::vector<Param>;

TEST(AutoscaleParamsTest, PathSegments) {
  EXPECT_EQ(Split("/autoscale/buffer/bufferSize=5/minReplicas=2/maxReplicas=100"),
            (V{{"bufferSize", "5"}, {"minReplicas", "2"}, {"maxReplicas", "100"}}));
  EXPECT_EQ(Split("/autoscale/buffer"), V{});
  EXPECT_EQ(Split("/autoscale/buffer/"), V{});
  EXPECT_EQ(Split("/autoscale/buffer//bufferSize=5//"), (V{{"bufferSize", "5"}}));
}

TEST(AutoscaleParamsTest, PercentAsGoEscapesItInAServicePath) {
  // Go's url.URL{Path: ".../bufferSize=20%"}.String() sends "%25".
  EXPECT_EQ(Split("/autoscale/buffer/bufferSize=20%25/maxReplicas=10"),
            (V{{"bufferSize", "20%"}, {"maxReplicas", "10"}}));
  // Unescaped '%' (not followed by two hex digits) is kept.
  EXPECT_EQ(Split("/autoscale/buffer/bufferSize=20%"), (V{{"bufferSize", "20%"}}));
}

TEST(AutoscaleParamsTest, QueryFromAUrl) {
  EXPECT_EQ(Split("/autoscale/buffer", "bufferSize=5&maxReplicas=100"),
            (V{{"bufferSize", "5"}, {"maxReplicas", "100"}}));
  EXPECT_EQ(Split("/autoscale/buffer", "bufferSize=20%25&&maxReplicas=100&"),
            (V{{"bufferSize", "20%"}, {"maxReplicas", "100"}}));
  EXPECT_EQ(Split("/autoscale/buffer", "bufferSize=20%"), (V{{"bufferSize", "20%"}}));
  // Path first, then query.
  EXPECT_EQ(Split("/autoscale/buffer/bufferSize=5", "maxReplicas=9"),
            (V{{"bufferSize", "5"}, {"maxReplicas", "9"}}));
}

TEST(AutoscaleParamsTest, QueryWrittenInAServicePathIsEscapedByGo) {
  // service.path "/autoscale/buffer?bufferSize=20%&maxReplicas=10" is sent as below.
  EXPECT_EQ(Split("/autoscale/buffer%3FbufferSize=20%25&maxReplicas=10"),
            (V{{"bufferSize", "20%"}, {"maxReplicas", "10"}}));
  EXPECT_EQ(Split("/autoscale/buffer%3fbufferSize=5"), (V{{"bufferSize", "5"}}));
}

void ExpectError(std::string_view path, std::string_view query, std::string_view needle) {
  std::vector<Param> out;
  Status s = SplitParams(kPrefix, path, query, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << path;
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}

TEST(AutoscaleParamsTest, Errors) {
  ExpectError("/autoscale/bufferX", "", "is not under");
  ExpectError("/other", "", "is not under");
  ExpectError("/autoscale/buffer/bufferSize", "", "path segment \"bufferSize\" is not name=value");
  ExpectError("/autoscale/buffer/=5", "", "empty name");
  ExpectError("/autoscale/buffer", "bufferSize",
              "query parameter \"bufferSize\" is not name=value");
  ExpectError("/autoscale/buffer", "=3", "empty name");
}

TEST(AutoscaleParamsTest, PercentDecode) {
  EXPECT_EQ(PercentDecode("a%20b"), "a b");
  EXPECT_EQ(PercentDecode("%"), "%");
  EXPECT_EQ(PercentDecode("%2"), "%2");
  EXPECT_EQ(PercentDecode("%zz"), "%zz");
  EXPECT_EQ(PercentDecode("%41%4a%4A"), "AJJ");
  EXPECT_EQ(PercentDecode(std::string_view("%00", 3)), std::string(1, '\0'));
}

}  // namespace
}  // namespace aw::autoscale
