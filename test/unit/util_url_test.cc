// util::ParseHttpUrl, the one parser of the Kubernetes API server's and agones-allocator's URLs.
#include <gtest/gtest.h>

#include "util/url.h"

namespace aw::util {
namespace {

TEST(ParseHttpUrl, SplitsSchemeHostPortAndPrefix) {
  auto u = ParseHttpUrl("https://127.0.0.1:6443");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_TRUE(u->https);
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 6443);
  EXPECT_EQ(u->base_path, "");

  u = ParseHttpUrl("https://[::1]:8443/prefix/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 8443);
  EXPECT_EQ(u->base_path, "/prefix");

  u = ParseHttpUrl("http://agones-allocator.agones-system.svc/a/b//");
  ASSERT_TRUE(u.ok());
  EXPECT_FALSE(u->https);
  EXPECT_EQ(u->port, 80);  // the scheme's default
  EXPECT_EQ(u->base_path, "/a/b");

  u = ParseHttpUrl("https://h:");  // an empty port is the default, as Go's net/url reads it
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, 443);
}

TEST(ParseHttpUrl, SaysWhatIsWrong) {
  const struct {
    const char* url;
    const char* says;
  } cases[] = {
      {"ftp://h", "must start with http:// or https://"},
      {"h:443", "must start with http:// or https://"},
      {"https://[::1", "bad IPv6 literal"},
      {"https://[::1]x", "bad port"},
      {"https://h:99999", "bad port"},
      {"https://h:0", "bad port"},
      {"https://h:12a", "bad port"},
      {"https://h:123456", "bad port"},
      {"https://", "no host"},
      {"https://:443/x", "no host"},
      {"https://[]:443", "no host"},
  };
  for (const auto& c : cases) {
    auto u = ParseHttpUrl(c.url);
    ASSERT_FALSE(u.ok()) << c.url;
    EXPECT_EQ(u.status().code(), Status::Code::kInvalidArgument) << c.url;
    EXPECT_EQ(u.status().message(), c.says) << c.url;
  }
}

}  // namespace
}  // namespace aw::util
