#include "util/time_format.h"

#include <fmt/format.h>

#include <algorithm>

namespace aw::util {
namespace {

bool Digits(std::string_view s, size_t pos, size_t n, int* out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

}  // namespace

std::string FormatRfc3339Nano(SysNanos t) { return FormatRfc3339(t, Rfc3339Precision::kNanos); }

std::string FormatRfc3339(SysNanos t, Rfc3339Precision precision) {
  Rfc3339Buffer buf;
  return std::string(FormatRfc3339To(t, precision, &buf));
}

std::string_view FormatRfc3339To(SysNanos t, Rfc3339Precision precision, Rfc3339Buffer* buf) {
  using namespace std::chrono;
  auto day = floor<days>(t);
  year_month_day ymd{day};
  auto rest = t - day;  // nanoseconds within the day, >= 0
  auto h = duration_cast<hours>(rest);
  rest -= h;
  auto m = duration_cast<minutes>(rest);
  rest -= m;
  auto s = duration_cast<seconds>(rest);
  rest -= s;
  long long ns = rest.count();
  char* const begin = buf->data();
  // format_to_n writes into the array and never past it; it returns the untruncated size, so each
  // count is clamped (the buffer holds every year an int can: nothing is ever cut in practice).
  const size_t cap = buf->size() - 1;  // room for the "Z"
  size_t n = std::min(
      fmt::format_to_n(begin, cap, "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}", int(ymd.year()),
                       unsigned(ymd.month()), unsigned(ymd.day()), h.count(), m.count(), s.count())
          .size,
      cap);
  switch (precision) {
    case Rfc3339Precision::kSeconds:
      break;
    case Rfc3339Precision::kMicros:
      n += std::min(fmt::format_to_n(begin + n, cap - n, ".{:06d}", ns / 1000).size, cap - n);
      break;
    case Rfc3339Precision::kNanos:
      if (ns != 0) {
        size_t k = std::min(fmt::format_to_n(begin + n, cap - n, ".{:09d}", ns).size, cap - n);
        while (k > 1 && begin[n + k - 1] == '0') --k;  // trailing zeros of the fraction
        n += k;
      }
      break;
  }
  begin[n++] = 'Z';
  return std::string_view(begin, n);
}

std::optional<SysNanos> ParseRfc3339(std::string_view s) {
  using namespace std::chrono;
  int y, mo, d, h, mi, sec;
  if (s.size() < 20 || !Digits(s, 0, 4, &y) || s[4] != '-' || !Digits(s, 5, 2, &mo) ||
      s[7] != '-' || !Digits(s, 8, 2, &d) || (s[10] != 'T' && s[10] != 't') ||
      !Digits(s, 11, 2, &h) || s[13] != ':' || !Digits(s, 14, 2, &mi) || s[16] != ':' ||
      !Digits(s, 17, 2, &sec)) {
    return std::nullopt;
  }
  if (h > 23 || mi > 59 || sec > 59) return std::nullopt;
  year_month_day ymd{year{y}, month{static_cast<unsigned>(mo)}, day{static_cast<unsigned>(d)}};
  if (!ymd.ok()) return std::nullopt;
  size_t pos = 19;
  long long ns = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    size_t start = pos;
    long long scale = 100000000;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (scale > 0) {
        ns += (s[pos] - '0') * scale;
        scale /= 10;
      }
      ++pos;
    }
    if (pos == start) return std::nullopt;
  }
  if (pos >= s.size()) return std::nullopt;
  int offset_min = 0;
  if (s[pos] == 'Z' || s[pos] == 'z') {
    ++pos;
  } else if (s[pos] == '+' || s[pos] == '-') {
    int oh, om;
    if (!Digits(s, pos + 1, 2, &oh) || pos + 3 >= s.size() || s[pos + 3] != ':' ||
        !Digits(s, pos + 4, 2, &om) || oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset_min = (oh * 60 + om) * (s[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  // Compute in seconds first: nanoseconds since 1970 only cover about 1678..2262.
  auto secs = (sys_days{ymd} + hours{h} + minutes{mi} + seconds{sec} - minutes{offset_min})
                  .time_since_epoch()
                  .count();
  constexpr long long kMaxSecs = 9223372035LL;  // leaves room for the fraction
  if (secs > kMaxSecs || secs < -kMaxSecs) return std::nullopt;
  return SysNanos{seconds{secs}} + nanoseconds{ns};
}

}  // namespace aw::util
