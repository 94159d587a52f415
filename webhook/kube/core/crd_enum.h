// Pure logic of the CRD guard: does the GameServer CRD's status.state enum accept "Allocating",
// and the JSON patch that makes it so.
//
// Promise: CheckStateEnum() looks at every *served* version of a CustomResourceDefinition object.
// A version accepts the state when its schema has no enum on
// properties.status.properties.state (free-form string) or the enum lists the value.
// BuildEnumPatch() returns an RFC 6902 patch that, per served version whose enum lacks the value,
// first `test`s the current enum (so a concurrent change makes the patch fail instead of
// clobbering it) then appends the value with `add .../enum/-`. No I/O.
#pragma once

#include <rapidjson/document.h>

#include <string>
#include <string_view>
#include <vector>

namespace aw::kube {

struct VersionEnumState {
  std::string version;
  int index = 0;  // position in spec.versions
  bool served = false;
  bool has_enum = false;
  bool lists_value = false;
  std::string enum_json;  // the current enum array as JSON ("" without an enum)
};

struct CrdEnumCheck {
  bool valid = false;    // the object looks like a CRD with spec.versions
  bool accepts = false;  // every served version accepts the value (and at least one is served)
  std::vector<VersionEnumState> versions;
  std::string summary;  // human-readable, for logs ("v1: missing")
};

CrdEnumCheck CheckStateEnum(const rapidjson::Value& crd, std::string_view value = "Allocating");

// "" when nothing to patch.
std::string BuildEnumPatch(const CrdEnumCheck& check, std::string_view value = "Allocating");

// JSON Pointer to a version's state enum.
std::string EnumPointer(int version_index);

}  // namespace aw::kube
