// Nesting depth of a JSON text, measured before it is parsed.
//
// Promise: FirstTooDeep returns the byte offset of the first `[` or `{` (outside strings) at
// which the nesting exceeds `max_depth`, or nullopt when it never does. Brackets are only
// counted, never matched: malformed input is left for the parser to report. One pass, no
// allocation, any input bytes.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace aw::json {

std::optional<size_t> FirstTooDeep(std::string_view body, size_t max_depth);

}  // namespace aw::json
