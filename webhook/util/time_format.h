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
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace aw::util {

using SysNanos = std::chrono::time_point<std::chrono::system_clock, std::chrono::nanoseconds>;

// system_clock::time_point converts implicitly (it is never finer than nanoseconds).
std::string FormatRfc3339Nano(SysNanos t);
std::optional<SysNanos> ParseRfc3339(std::string_view text);

}  // namespace aw::util
