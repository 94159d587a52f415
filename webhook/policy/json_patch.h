// The one RFC 6902 JSON Patch builder, for the admission webhook's rewrites and the resolver's
// guarded writes: test/add/replace a string at a path, remove a path, add a whole string map, and
// set/remove keys of a string map (metadata.annotations, metadata.labels).
//
// Promise: paths are RFC 6901 JSON Pointers with "~" escaped as "~0" and "/" as "~1"; the
// serialized patch is a JSON array of {"op","path"[,"value"]} objects in insertion order ("value"
// for every op but remove). MapEdit emits only ops that apply to the map as sent: "add" for a
// missing key, "replace" for a key whose value differs, nothing for a key that already has the
// value, "remove" only for keys that exist, and a single "add" of the whole map when the map itself
// is absent.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/gameserver.h"

namespace aw::policy {

// Escapes one reference token: "~" -> "~0", "/" -> "~1".
std::string EscapePointerToken(std::string_view token);

class JsonPatch {
 public:
  enum class Op { kAdd, kReplace, kRemove, kTest };
  struct Entry {
    Op op;
    std::string path;
    bool is_map = false;
    std::string value;                                     // when !is_map (and op != remove)
    std::vector<std::pair<std::string, std::string>> map;  // when is_map
  };

  void Test(std::string path, std::string value);
  void AddString(std::string path, std::string value);
  void ReplaceString(std::string path, std::string value);
  void Remove(std::string path);
  void AddMap(std::string path, std::vector<std::pair<std::string, std::string>> map);

  bool empty() const { return entries_.empty(); }
  const std::vector<Entry>& entries() const { return entries_; }
  std::string ToJson() const;

 private:
  std::vector<Entry> entries_;
};

// Collects edits to one string map and appends the minimal ops to a patch.
class MapEdit {
 public:
  // `map_path` is the JSON Pointer of the map (e.g. "/metadata/annotations"); `current`, the
  // path and every key given to Set/Remove must outlive the MapEdit (the contract's keys are
  // constants): they are not copied.
  MapEdit(const StringMap& current, std::string_view map_path)
      : current_(current), path_(map_path) {}
  void Set(std::string_view key, std::string_view value);
  void Remove(std::string_view key);
  // The value the map would hold for `key` after the edits.
  std::optional<std::string_view> Get(std::string_view key) const;
  void AppendTo(JsonPatch* patch) const;

 private:
  const StringMap& current_;
  std::string_view path_;
  // Ordered list of final edits per key: value or nullopt (= removed).
  std::vector<std::pair<std::string_view, std::optional<std::string>>> edits_;
};

}  // namespace aw::policy
