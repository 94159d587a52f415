// Standard base64 (RFC 4648, with padding), as AdmissionReview's response.patch requires.
//
// Promise: Base64Encode is total; Base64Decode accepts only canonical padded input and returns
// std::nullopt otherwise. Base64DecodeText first drops ASCII whitespace (space, tab, CR, LF), as
// in base64 written into YAML/PEM-like text (kubeconfig's *-data fields), then decodes the rest;
// empty (or all-whitespace) text decodes to "".
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace aw::util {

std::string Base64Encode(std::string_view in);
// The same encoding appended to *out (no allocation when *out has the capacity).
void Base64AppendTo(std::string_view in, std::string* out);
std::optional<std::string> Base64Decode(std::string_view in);
std::optional<std::string> Base64DecodeText(std::string_view in);

}  // namespace aw::util
