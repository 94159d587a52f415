// Compact JSON text of a RapidJSON value (request bodies, patch values). Pure: no I/O.
#pragma once

#include <rapidjson/document.h>

#include <string>

namespace aw::kube {

// Serialises a JSON value compactly (no whitespace), strings escaped per RFC 8259.
std::string ToJson(const rapidjson::Value& v);

}  // namespace aw::kube
