// Text helpers for user-facing messages.
//
// Promise: Clip returns at most `max_bytes` bytes of `s` (plus "..." when it cut), never cutting
// inside a UTF-8 sequence, so that messages and warnings built from user values stay valid UTF-8
// when the input was. EqualsIgnoreCase compares ASCII letters case-insensitively (HTTP header
// names, annotation values such as "true"); every other byte must match exactly.
#pragma once

#include <string>
#include <string_view>

namespace aw::util {

std::string Clip(std::string_view s, size_t max_bytes);
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

}  // namespace aw::util
