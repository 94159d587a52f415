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

#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/gameserver.h"

namespace aw::policy {

// Escapes one reference token: "~" -> "~0", "/" -> "~1".
std::string EscapePointerToken(std::string_view token);

// Every path, value and map item is copied into the patch's own inline buffer, so a decision's
// patch (a few ops, a few hundred characters) is built without a heap allocation; a larger one
// spills to the heap. Only ToJson's answer is allocated.
class JsonPatch {
 public:
  enum class Op { kAdd, kReplace, kRemove, kTest };

  void Test(std::string_view path, std::string_view value);
  void AddString(std::string_view path, std::string_view value);
  void ReplaceString(std::string_view path, std::string_view value);
  void Remove(std::string_view path);
  void AddMap(std::string_view path, const std::vector<std::pair<std::string, std::string>>& map);
  // The same ops at `map_path` + "/" + the escaped `key` (a member of a string map).
  void AddStringAt(std::string_view map_path, std::string_view key, std::string_view value);
  void ReplaceStringAt(std::string_view map_path, std::string_view key, std::string_view value);
  void RemoveAt(std::string_view map_path, std::string_view key);
  // An "add" of a whole map at `path` whose items follow with AddMapItem (in order).
  void StartMap(std::string_view path);
  void AddMapItem(std::string_view key, std::string_view value);

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  std::string ToJson() const;

 private:
  struct Span {
    uint32_t off = 0, len = 0;
  };
  struct Entry {
    Op op;
    Span path;
    Span value;  // when !is_map (and op != remove)
    bool is_map = false;
    uint32_t items_begin = 0, items_end = 0;  // when is_map: a range of items_
  };
  Span Put(std::string_view text);
  Span PutPath(std::string_view map_path, std::string_view key);
  std::string_view View(Span s) const { return {text_.data() + s.off, s.len}; }

  boost::container::small_vector<char, 512> text_;
  boost::container::small_vector<Entry, 8> entries_;
  boost::container::small_vector<std::pair<Span, Span>, 4> items_;
};

// Collects edits to one string map and appends the minimal ops to a patch. Up to 16 edits and 512
// characters of values are kept inline (no heap allocation); more spill to the heap.
class MapEdit {
 public:
  // `map_path` is the JSON Pointer of the map (e.g. "/metadata/annotations"); `current`, the
  // path and every key given to Set/Remove must outlive the MapEdit (the contract's keys are
  // constants): they are not copied. Values are copied.
  MapEdit(const StringMap& current, std::string_view map_path)
      : current_(current), path_(map_path) {}
  void Set(std::string_view key, std::string_view value);
  void Remove(std::string_view key);
  // The value the map would hold for `key` after the edits (valid until the next Set).
  std::optional<std::string_view> Get(std::string_view key) const;
  void AppendTo(JsonPatch* patch) const;

 private:
  struct Edit {
    std::string_view key;
    bool removed;
    uint32_t off, len;  // the value in values_ (when !removed)
  };
  std::string_view ValueOf(const Edit& e) const { return {values_.data() + e.off, e.len}; }

  const StringMap& current_;
  std::string_view path_;
  // Ordered list of final edits per key.
  boost::container::small_vector<Edit, 16> edits_;
  boost::container::small_vector<char, 512> values_;
};

}  // namespace aw::policy
