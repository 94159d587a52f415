// The build info (webhook/util/io/build_info.h): --version's text and the build_info metric carry
// the VERSION file's version, a commit and an RFC 3339 build date.
#include "util/io/build_info.h"

#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <cctype>
#include <fstream>
#include <string>

namespace {

// Hand-written matchers: std::regex trips GCC 12's -Wmaybe-uninitialized (a false positive in
// <regex>) in the sanitizer build, where warnings are errors.
bool Digits(const std::string& s, size_t* i, size_t min, size_t max = 1000) {
  size_t n = 0;
  while (*i < s.size() && std::isdigit(static_cast<unsigned char>(s[*i])) && n < max) ++*i, ++n;
  return n >= min;
}

bool Lit(const std::string& s, size_t* i, char c) {
  if (*i >= s.size() || s[*i] != c) return false;
  ++*i;
  return true;
}

// MAJOR.MINOR.PATCH with an optional -prerelease of [0-9A-Za-z.-].
bool IsSemver(const std::string& s) {
  size_t i = 0;
  if (!(Digits(s, &i, 1) && Lit(s, &i, '.') && Digits(s, &i, 1) && Lit(s, &i, '.') &&
        Digits(s, &i, 1))) {
    return false;
  }
  if (i == s.size()) return true;
  if (!Lit(s, &i, '-') || i == s.size()) return false;
  for (; i < s.size(); ++i) {
    if (!std::isalnum(static_cast<unsigned char>(s[i])) && s[i] != '.' && s[i] != '-') return false;
  }
  return true;
}

// 12..40 lowercase hex digits, optionally "-dirty"; or "unknown".
bool IsCommit(const std::string& s) {
  if (s == "unknown") return true;
  std::string h = s;
  const std::string dirty = "-dirty";
  if (h.size() > dirty.size() && h.compare(h.size() - dirty.size(), dirty.size(), dirty) == 0) {
    h.resize(h.size() - dirty.size());
  }
  if (h.size() < 12 || h.size() > 40) return false;
  for (char c : h) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

// YYYY-MM-DDTHH:MM:SSZ, or "unknown".
bool IsRfc3339Utc(const std::string& s) {
  if (s == "unknown") return true;
  size_t i = 0;
  return Digits(s, &i, 4, 4) && Lit(s, &i, '-') && Digits(s, &i, 2, 2) && Lit(s, &i, '-') &&
         Digits(s, &i, 2, 2) && Lit(s, &i, 'T') && Digits(s, &i, 2, 2) && Lit(s, &i, ':') &&
         Digits(s, &i, 2, 2) && Lit(s, &i, ':') && Digits(s, &i, 2, 2) && Lit(s, &i, 'Z') &&
         i == s.size();
}

TEST(BuildInfo, MatchersAcceptAndRefuse) {
  EXPECT_TRUE(IsSemver("0.1.0"));
  EXPECT_TRUE(IsSemver("1.2.3-rc.1"));
  EXPECT_FALSE(IsSemver("1.2"));
  EXPECT_FALSE(IsSemver("1.2.3-"));
  EXPECT_FALSE(IsSemver("v1.2.3"));
  EXPECT_TRUE(IsCommit("2501cd71d206-dirty"));
  EXPECT_FALSE(IsCommit("2501cd71"));
  EXPECT_FALSE(IsCommit("2501CD71D206"));
  EXPECT_TRUE(IsRfc3339Utc("2026-12-04T09:13:28Z"));
  EXPECT_FALSE(IsRfc3339Utc("2026-12-04 09:13:28"));
}

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
  EXPECT_TRUE(IsSemver(file)) << file;
}

TEST(BuildInfo, CommitAndDateAreWellFormed) {
  const std::string commit(aw::build::Get().commit);
  const std::string date(aw::build::Get().build_date);
  // A git checkout gives 12 hex digits (maybe "-dirty"); a build outside one says "unknown".
  EXPECT_TRUE(IsCommit(commit)) << commit;
  EXPECT_TRUE(IsRfc3339Utc(date)) << date;
}

TEST(BuildInfo, VersionText) {
  const auto& i = aw::build::Get();
  EXPECT_EQ(aw::build::VersionText("prog"),
            "prog " + std::string(i.version) + "\ncommit: " + std::string(i.commit) +
                "\nbuild date: " + std::string(i.build_date) + "\n");
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
