// RFC 3339 timestamps with nanoseconds, in UTC, the way Go's time.RFC3339Nano prints them
// (Agones writes agones.dev/last-allocated this way; we write allocating.agones.dev/since so).
//
// Promise: FormatRfc3339Nano prints "2006-01-02T15:04:05.999999999Z" with trailing zeros of the
// fraction removed (and no fraction at all when it is zero), always in UTC ("Z"). ParseRfc3339
// accepts any RFC 3339 date-time: "T"/"t" separator, optional fraction of 1-9 digits (more are
// truncated), "Z"/"z" or a "+hh:mm"/"-hh:mm" offset; it validates field ranges (including the day
// of the month and leap years; a leap second "60" is rejected) and returns std::nullopt on
// anything else, including times outside the int64-nanosecond range (about years 1678-2262).
// Round-trips exactly for every time in that range.
// FormatRfc3339(t, precision) is the one formatter of the project: kNanos is FormatRfc3339Nano;
// kMicros always prints six digits ("...:05.123000Z": Kubernetes' MicroTime, and the log lines);
// kSeconds none ("...:05Z": metav1.Time). Fractions are truncated, never rounded.
// FormatRfc3339To writes the same text into a caller's buffer and returns a view of it, with no
// heap allocation (the admission hot path's timestamps); the view lives as long as the buffer.
#pragma once

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace aw::util {

using SysNanos = std::chrono::time_point<std::chrono::system_clock, std::chrono::nanoseconds>;

// system_clock::time_point converts implicitly (it is never finer than nanoseconds).
enum class Rfc3339Precision { kSeconds, kMicros, kNanos };

// Room for any time_point's text (a year of up to 11 characters, 19 more for the rest of the
// date and time, ".", 9 digits, "Z").
using Rfc3339Buffer = std::array<char, 48>;

std::string_view FormatRfc3339To(SysNanos t, Rfc3339Precision precision, Rfc3339Buffer* buf);
std::string FormatRfc3339(SysNanos t, Rfc3339Precision precision);
std::string FormatRfc3339Nano(SysNanos t);
std::optional<SysNanos> ParseRfc3339(std::string_view text);

}  // namespace aw::util
