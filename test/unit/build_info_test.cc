// The build info (webhook/util/build_info.h): --version's text and the build_info metric carry the
// VERSION file's version, a commit and an RFC 3339 build date.
#include "util/build_info.h"

#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <fstream>
#include <regex>
#include <string>

namespace {

std::string VersionFile() {
  std::ifstream in(std::string(AW_SOURCE_DIR) + "/VERSION");
  std::string line;
  std::getline(in, line);
  return line;
}

TEST(BuildInfo, VersionIsTheVersionFile) {
  const std::string file = VersionFile();
  ASSERT_FALSE(file.empty());
  EXPECT_EQ(aw::build::Get().version, file);
  EXPECT_TRUE(std::regex_match(file, std::regex(R"([0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?)")))
      << file;
}

TEST(BuildInfo, CommitAndDateAreWellFormed) {
  const std::string commit(aw::build::Get().commit);
  const std::string date(aw::build::Get().build_date);
  // A git checkout gives 12 hex digits (maybe "-dirty"); a build outside one says "unknown".
  EXPECT_TRUE(std::regex_match(commit, std::regex("([0-9a-f]{12,40}(-dirty)?|unknown)"))) << commit;
  const std::regex rfc3339_utc(R"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z|unknown)");
  EXPECT_TRUE(std::regex_match(date, rfc3339_utc)) << date;
}

TEST(BuildInfo, VersionText) {
  const auto& i = aw::build::Get();
  EXPECT_EQ(aw::build::VersionText("prog"), "prog " + std::string(i.version) + "\ncommit: " +
                                                std::string(i.commit) + "\nbuild date: " +
                                                std::string(i.build_date) + "\n");
}

TEST(BuildInfo, MetricHasTheLabelsAndValueOne) {
  prometheus::Registry registry;
  aw::build::AddBuildInfoMetric(registry, "test_build_info", "help");
  const std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  const auto& i = aw::build::Get();
  const std::string want = "test_build_info{build_date=\"" + std::string(i.build_date) +
                           "\",commit=\"" + std::string(i.commit) + "\",version=\"" +
                           std::string(i.version) + "\"} 1";
  EXPECT_NE(text.find(want), std::string::npos) << text;
}

}  // namespace
