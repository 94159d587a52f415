// Go-style durations (time.ParseDuration / time.Duration.String), as users write them in
// annotations and flags: "300ms", "1.5s", "1m30s", "2h", "0".
//
// Promise: ParseDuration accepts a sequence of decimal numbers, each with an optional fraction and
// a unit (ns, us, µs, μs, ms, s, m, h), like Go, plus a bare "0". An optional leading "+" is
// accepted. It rejects the empty string, negative values, missing units, unknown units, garbage
// and values beyond the int64 nanosecond range, returning InvalidArgument with a short
// reason. FormatDuration prints the shortest Go-style form ("1m30s", "300ms", "1.5s", "0s"), so
// FormatDuration(ParseDuration(FormatDuration(d))) == FormatDuration(d) for every d >= 0.
// Pure functions, thread-safe, no allocation beyond the returned string.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "util/status.h"

namespace aw::util {

StatusOr<std::chrono::nanoseconds> ParseDuration(std::string_view text);

std::string FormatDuration(std::chrono::nanoseconds d);

}  // namespace aw::util
