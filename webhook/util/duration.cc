#include "util/duration.h"

#include <cstdint>
#include <limits>

namespace aw::util {
namespace {

constexpr uint64_t kMaxNanos = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

bool Fail(std::string* error, std::string msg) {
  if (error) *error = std::move(msg);
  return false;
}

// Longest unit names first so that "ms" wins over "m".
struct Unit {
  std::string_view name;
  uint64_t nanos;
};
constexpr Unit kUnits[] = {
    {"ns", 1ULL},
    {"us", 1000ULL},
    {"\xC2\xB5s", 1000ULL},  // U+00B5 micro sign
    {"\xCE\xBCs", 1000ULL},  // U+03BC Greek mu
    {"ms", 1000000ULL},
    {"s", 1000000000ULL},
    {"m", 60ULL * 1000000000ULL},
    {"h", 3600ULL * 1000000000ULL},
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool ParseImpl(std::string_view s, uint64_t* out, std::string* error) {
  if (s.empty()) return Fail(error, "empty duration");
  if (s.front() == '-') return Fail(error, "negative duration");
  if (s.front() == '+') s.remove_prefix(1);
  if (s == "0") {
    *out = 0;
    return true;
  }
  if (s.empty()) return Fail(error, "missing number");
  uint64_t total = 0;
  while (!s.empty()) {
    // Integer part.
    uint64_t whole = 0;
    bool any_digits = false;
    bool overflow = false;
    while (!s.empty() && IsDigit(s.front())) {
      any_digits = true;
      uint64_t d = static_cast<uint64_t>(s.front() - '0');
      if (whole > (kMaxNanos - d) / 10) overflow = true;
      if (!overflow) whole = whole * 10 + d;
      s.remove_prefix(1);
    }
    if (overflow) return Fail(error, "duration out of range");
    // Fraction.
    uint64_t frac = 0;
    double scale = 1;
    bool frac_digits = false;
    if (!s.empty() && s.front() == '.') {
      s.remove_prefix(1);
      bool frac_overflow = false;
      while (!s.empty() && IsDigit(s.front())) {
        frac_digits = true;
        if (!frac_overflow) {
          uint64_t d = static_cast<uint64_t>(s.front() - '0');
          if (frac > (kMaxNanos - d) / 10) {
            frac_overflow = true;  // further digits are below any unit's resolution
          } else {
            frac = frac * 10 + d;
            scale *= 10;
          }
        }
        s.remove_prefix(1);
      }
    }
    if (!any_digits && !frac_digits) return Fail(error, "expected a number");
    // Unit.
    size_t unit_len = 0;
    while (unit_len < s.size() && s[unit_len] != '.' && !IsDigit(s[unit_len])) ++unit_len;
    if (unit_len == 0) return Fail(error, "missing unit (one of ns, us, ms, s, m, h)");
    std::string_view unit_name = s.substr(0, unit_len);
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
      if (u.name == unit_name) unit = &u;
    }
    if (!unit) {
      return Fail(error,
                  "unknown unit \"" + std::string(unit_name) + "\" (use ns, us, ms, s, m or h)");
    }
    s.remove_prefix(unit_len);
    if (whole > kMaxNanos / unit->nanos) return Fail(error, "duration out of range");
    uint64_t v = whole * unit->nanos;
    if (frac > 0) {
      double extra = static_cast<double>(frac) * (static_cast<double>(unit->nanos) / scale);
      if (extra >= static_cast<double>(kMaxNanos)) return Fail(error, "duration out of range");
      v += static_cast<uint64_t>(extra);
      if (v > kMaxNanos) return Fail(error, "duration out of range");
    }
    if (total > kMaxNanos - v) return Fail(error, "duration out of range");
    total += v;
  }
  *out = total;
  return true;
}

// Writes v/10^prec with the fraction's trailing zeros (and a bare '.') removed.
std::string FormatFraction(uint64_t v, int prec) {
  std::string digits;
  bool printed = false;
  for (int i = 0; i < prec; ++i) {
    int digit = static_cast<int>(v % 10);
    printed = printed || digit != 0;
    if (printed) digits.insert(digits.begin(), static_cast<char>('0' + digit));
    v /= 10;
  }
  std::string out = std::to_string(v);
  if (!digits.empty()) out += "." + digits;
  return out;
}

}  // namespace

StatusOr<std::chrono::nanoseconds> ParseDuration(std::string_view text) {
  uint64_t nanos = 0;
  if (std::string error; !ParseImpl(text, &nanos, &error)) {
    return Status::InvalidArgument(std::move(error));
  }
  return std::chrono::nanoseconds(static_cast<int64_t>(nanos));
}

std::string FormatDuration(std::chrono::nanoseconds d) {
  int64_t n = d.count();
  bool neg = n < 0;
  // Magnitude as unsigned (INT64_MIN safe).
  uint64_t u = neg ? (~static_cast<uint64_t>(n) + 1) : static_cast<uint64_t>(n);
  std::string out;
  if (u == 0) return "0s";
  if (u < 1000000000ULL) {
    if (u < 1000ULL) {
      out = std::to_string(u) + "ns";
    } else if (u < 1000000ULL) {
      out = FormatFraction(u, 3) + "\xC2\xB5s";
    } else {
      out = FormatFraction(u, 6) + "ms";
    }
  } else {
    uint64_t secs_ns = u % 60000000000ULL;
    uint64_t mins_total = u / 60000000000ULL;
    std::string sec = FormatFraction(secs_ns, 9) + "s";
    if (mins_total == 0) {
      out = sec;
    } else {
      uint64_t hours = mins_total / 60;
      uint64_t mins = mins_total % 60;
      out = std::to_string(mins) + "m" + sec;
      if (hours > 0) out = std::to_string(hours) + "h" + out;
    }
  }
  return neg ? "-" + out : out;
}

}  // namespace aw::util
