// RFC 3339 with nanoseconds (util/time_format.h) and base64 (util/base64.h).
#include "util/time_format.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "util/base64.h"
#include "util/text.h"

namespace aw::util {
namespace {

using namespace std::chrono;

SysNanos At(int y, unsigned mo, unsigned d, int h, int mi, int s, long long ns) {
  return sys_days{year{y} / month{mo} / day{d}} + hours{h} + minutes{mi} + seconds{s} +
         nanoseconds{ns};
}

TEST(TimeFormat, FormatsLikeGoRfc3339Nano) {
  EXPECT_EQ(FormatRfc3339Nano(At(2026, 12, 2, 14, 23, 13, 123456789)),
            "2026-12-02T14:23:13.123456789Z");
  EXPECT_EQ(FormatRfc3339Nano(At(2026, 12, 2, 14, 23, 13, 120000000)), "2026-12-02T14:23:13.12Z");
  EXPECT_EQ(FormatRfc3339Nano(At(2026, 1, 2, 3, 4, 5, 0)), "2026-01-02T03:04:05Z");
  EXPECT_EQ(FormatRfc3339Nano(At(2024, 2, 29, 23, 59, 59, 1)), "2024-02-29T23:59:59.000000001Z");
  EXPECT_EQ(FormatRfc3339Nano(At(1970, 1, 1, 0, 0, 0, 0)), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339Nano(At(1969, 12, 31, 23, 59, 59, 500000000)), "1969-12-31T23:59:59.5Z");
}

TEST(TimeFormat, SecondsAndMicrosPrecisions) {
  const SysNanos t = At(2026, 12, 2, 14, 23, 13, 123456789);
  EXPECT_EQ(FormatRfc3339(t, Rfc3339Precision::kSeconds), "2026-12-02T14:23:13Z");
  EXPECT_EQ(FormatRfc3339(t, Rfc3339Precision::kMicros), "2026-12-02T14:23:13.123456Z");
  EXPECT_EQ(FormatRfc3339(t, Rfc3339Precision::kNanos), FormatRfc3339Nano(t));
  // Micros always carry six digits (Kubernetes MicroTime); fractions truncate, never round up.
  EXPECT_EQ(FormatRfc3339(At(2026, 1, 2, 3, 4, 5, 0), Rfc3339Precision::kMicros),
            "2026-01-02T03:04:05.000000Z");
  EXPECT_EQ(FormatRfc3339(At(2026, 1, 2, 3, 4, 5, 999999999), Rfc3339Precision::kSeconds),
            "2026-01-02T03:04:05Z");
  EXPECT_EQ(FormatRfc3339(At(1969, 12, 31, 23, 59, 59, 500000000), Rfc3339Precision::kMicros),
            "1969-12-31T23:59:59.500000Z");
}

TEST(TimeFormat, IntoABufferTheSameText) {
  // FormatRfc3339To (no allocation) writes what FormatRfc3339 returns, at every precision, for
  // times with and without a fraction, before 1970, and the last time of the int64-nanosecond
  // range.
  const SysNanos times[] = {At(2026, 12, 2, 14, 23, 13, 123456789), At(2026, 1, 2, 3, 4, 5, 0),
                            At(1969, 12, 31, 23, 59, 59, 500000000), At(1678, 1, 1, 0, 0, 0, 1),
                            SysNanos{nanoseconds{std::numeric_limits<int64_t>::max()}}};
  for (const SysNanos t : times) {
    for (auto p :
         {Rfc3339Precision::kSeconds, Rfc3339Precision::kMicros, Rfc3339Precision::kNanos}) {
      Rfc3339Buffer buf;
      buf.fill('#');
      const std::string_view v = FormatRfc3339To(t, p, &buf);
      EXPECT_EQ(v.data(), buf.data());
      EXPECT_EQ(v, FormatRfc3339(t, p));
      EXPECT_EQ(v.back(), 'Z');
    }
  }
  EXPECT_EQ(FormatRfc3339(SysNanos{nanoseconds{std::numeric_limits<int64_t>::max()}},
                          Rfc3339Precision::kNanos),
            "2262-04-11T23:47:16.854775807Z");
}

TEST(TimeFormat, Parses) {
  EXPECT_EQ(ParseRfc3339("2026-12-02T14:23:13.123456789Z"), At(2026, 12, 2, 14, 23, 13, 123456789));
  EXPECT_EQ(ParseRfc3339("2026-12-02t14:23:13z"), At(2026, 12, 2, 14, 23, 13, 0));
  EXPECT_EQ(ParseRfc3339("2026-12-02T16:23:13.5+02:00"), At(2026, 12, 2, 14, 23, 13, 500000000));
  EXPECT_EQ(ParseRfc3339("2026-12-02T13:53:13-00:30"), At(2026, 12, 2, 14, 23, 13, 0));
  EXPECT_EQ(ParseRfc3339("2026-12-02T14:23:13.1234567891234Z"),
            At(2026, 12, 2, 14, 23, 13, 123456789));
  EXPECT_EQ(ParseRfc3339("2024-02-29T00:00:00Z"), At(2024, 2, 29, 0, 0, 0, 0));
}

TEST(TimeFormat, RejectsGarbage) {
  for (std::string_view s :
       {"", "2026-12-02", "2026-12-02T14:23:13", "2026-12-02 14:23:13Z", "2026-13-02T14:23:13Z",
        "2026-02-30T14:23:13Z", "2025-02-29T00:00:00Z", "2026-12-02T24:00:00Z",
        "2026-12-02T14:60:00Z", "2026-12-02T14:23:60Z", "2026-12-02T14:23:13.Z",
        "2026-12-02T14:23:13+0200", "2026-12-02T14:23:13+02:00x", "2026-12-02T14:23:13ZZ",
        "20261202T142313Z", "abcd-12-02T14:23:13Z", "2026-12-02T14:23:13+24:00"}) {
    EXPECT_FALSE(ParseRfc3339(s).has_value()) << s;
  }
}

TEST(TimeFormat, RoundTrips) {
  for (long long ns :
       {0LL, 1LL, 999999999LL, 1733149393123456789LL, -1LL, -6213559680LL * 1000000000}) {
    SysNanos t{nanoseconds{ns}};
    auto back = ParseRfc3339(FormatRfc3339Nano(t));
    ASSERT_TRUE(back) << ns;
    EXPECT_EQ(*back, t);
  }
  SysNanos far = At(2262, 1, 1, 0, 0, 0, 999999999);
  EXPECT_EQ(ParseRfc3339(FormatRfc3339Nano(far)), far);
  // Beyond int64 nanoseconds: rejected, never overflowing.
  EXPECT_FALSE(ParseRfc3339("9999-12-31T23:59:59.999999999Z"));
  EXPECT_FALSE(ParseRfc3339("0001-01-01T00:00:00Z"));
}

TEST(Base64, EncodesAndDecodes) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode(std::string("\xff\xfe\x00", 3)), "//4A");
  for (std::string s : {"", "a", "ab", "abc", "[{\"op\":\"remove\"}]"}) {
    EXPECT_EQ(Base64Decode(Base64Encode(s)), s);
  }
  EXPECT_FALSE(Base64Decode("Zg="));
  EXPECT_FALSE(Base64Decode("Z==="));
  EXPECT_FALSE(Base64Decode("Zg==Zg=="));
  EXPECT_FALSE(Base64Decode("Zm9*"));
}

TEST(Text, EqualsIgnoreCaseFoldsAsciiLettersOnly) {
  EXPECT_TRUE(EqualsIgnoreCase("Content-Length", "content-LENGTH"));
  EXPECT_TRUE(EqualsIgnoreCase("", ""));
  EXPECT_FALSE(EqualsIgnoreCase("true", "tru"));
  EXPECT_FALSE(EqualsIgnoreCase("a-b", "a_b"));
  EXPECT_FALSE(EqualsIgnoreCase("\xC3\xA9", "\xC3\x89"));  // not ASCII: bytes compared as they are
  EXPECT_FALSE(EqualsIgnoreCase("@", "`"));                // 0x40 / 0x60 are not letters
}

TEST(Text, ClipKeepsUtf8Sequences) {
  EXPECT_EQ(Clip("short", 10), "short");
  EXPECT_EQ(Clip("abcdef", 3), "abc...");
  // "é" is two bytes (C3 A9): a cut inside it backs off to before it.
  EXPECT_EQ(Clip("ab\xC3\xA9"
                 "cd",
                 3),
            "ab...");
  EXPECT_EQ(Clip("ab\xC3\xA9"
                 "cd",
                 4),
            "ab\xC3\xA9...");
  // "€" is three bytes (E2 82 AC).
  EXPECT_EQ(Clip("\xE2\x82\xAC\xE2\x82\xAC", 5), "\xE2\x82\xAC...");
  EXPECT_EQ(Clip("", 0), "");
}

}  // namespace
}  // namespace aw::util

TEST(Base64, TextDecodingSkipsWhitespace) {
  EXPECT_EQ(aw::util::Base64DecodeText(" Zm9v\nYmFy\r\n\t"), "foobar");
  EXPECT_EQ(aw::util::Base64DecodeText(" \n"), "");
  EXPECT_FALSE(aw::util::Base64DecodeText("Zm9 "));
  EXPECT_FALSE(aw::util::Base64DecodeText("Zm9*"));
}
