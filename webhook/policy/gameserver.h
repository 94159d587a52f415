// The one view of the Kubernetes objects the gate reads: any object's metadata (ObjectMeta) and a
// GameServer (GameServerView), parsed from JSON in one of two modes.
//
// Promise:
//   - Parse::kStrict (admission): every field the gate decides on is type-checked, and a mismatch
//     throws BadRequest naming the JSON path of the offending value
//     ("request.object.metadata.labels is an array, expected an object"); a GameServer without
//     metadata is malformed. Fields the admission decisions never read (uid, resourceVersion,
//     status.address, status.ports) are read as in kLenient and are never a reason to throw.
//   - Parse::kLenient (resolver): total; any JSON value yields a view, mistyped fields are left
//     empty (a map keeps its string-valued entries), nothing throws.
//   - JSON null counts as absent in both modes (Kubernetes clients may send null for empty maps).
//   - The view owns its data (strings are copied), so it may outlive the parsed document; only
//     a map filled with StringMap::Borrow (the admission path's per-request views) points into a
//     buffer it does not own.
// `since` is allocating.agones.dev/since parsed as RFC 3339 (empty when absent or unparsable) and
// `allocation` the value of allocating.agones.dev/allocation ("" when absent). Pure, no I/O.
#pragma once

#include <rapidjson/document.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace aw::policy {

using Json = rapidjson::Value;
using Clock = std::chrono::system_clock;
using TimePoint = Clock::time_point;

// Malformed input: admission answers it with HTTP 400 and this message.
class BadRequest : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "null", "a boolean", "an object", "an array", "a string", "a number".
std::string_view JsonTypeName(const Json& v);

// `parent` must be an object. Returns the member, or nullptr when absent or null.
const Json* Member(const Json& parent, std::string_view key);
// The member if it is an object; nullptr when absent/null; throws BadRequest on another type.
const Json* OptObject(const Json& parent, std::string_view key, std::string_view path);
std::optional<std::string_view> OptString(const Json& parent, std::string_view key,
                                          std::string_view path);
std::optional<bool> OptBool(const Json& parent, std::string_view key, std::string_view path);

enum class Parse { kStrict, kLenient };

// A map[string]string (labels, annotations) that remembers whether the map was present at all
// (JSON Patch must add a whole map that is absent).
//
// Compact: the entries are one sorted array of offsets into one character buffer (two allocations
// a map, whatever its size); a key that Agones or this project writes (agones.dev/...,
// allocating.agones.dev/...) is not stored at all but points at a static copy. Thousands of cached
// GameServers each hold two of these, so a std::map of std::strings (about 110 bytes an entry)
// would be most of the cache (issue 33).
class StringMap {
 public:
  using Map = std::map<std::string, std::string, std::less<>>;
  StringMap() = default;  // absent
  // A present map with these entries.
  StringMap(const Map& entries);  // NOLINT: implicit
  // `obj` may be nullptr (absent). kStrict: throws BadRequest unless obj is an object of strings;
  // kLenient: a non-object is absent and non-string values are skipped. A repeated key keeps its
  // first (string) value.
  StringMap(const Json* obj, std::string_view path, Parse mode = Parse::kStrict);

  bool present() const { return present_; }
  size_t size() const { return entries_.size(); }
  std::optional<std::string_view> Get(std::string_view key) const;
  // A copy of the entries (tests, diagnostics); ForEach visits them without one, in key order.
  Map entries() const;
  template <typename F>
  void ForEach(F&& f) const {
    for (const Entry& e : entries_) f(KeyOf(e), ValueOf(e));
  }
  // Sets (or adds) an entry; the map becomes present.
  void Set(std::string_view key, std::string_view value);
  // Makes this a present map of `items` (keys unique) over characters it does not own: every key
  // and value lies in the buffer starting at `base` (within 2 GiB of it), which must outlive the
  // map and every copy of it. The entries' capacity already held is reused, so a map refilled per
  // request allocates nothing (the admission path's view over the review's own bytes, issue 36).
  void Borrow(const char* base,
              std::span<const std::pair<std::string_view, std::string_view>> items);
  // Absent again (capacity kept).
  void Clear();
  // Heap bytes held (the cache's size metric; a borrowed buffer is not held).
  size_t HeapBytes() const {
    // Each block with malloc's own overhead (about 16 bytes on 64 bits).
    return (entries_.capacity() ? entries_.capacity() * sizeof(Entry) + 16 : 0) +
           (chars_.capacity() > 15 ? chars_.capacity() + 1 + 16 : 0);
  }
  bool operator==(const StringMap& o) const;

 private:
  struct Entry {
    uint32_t key;  // offset in chars_, or kStatic | index in the static key table
    uint32_t key_len;
    uint32_t value;  // offset in chars_
    uint32_t value_len;
  };
  static constexpr uint32_t kStatic = 0x80000000u;

 public:
  // Builds a present map entry by entry (the streaming decoder's form): Add() keeps the first value
  // of a repeated key, Finish() sorts and compacts.
  class Builder {
   public:
    void Add(std::string_view key, std::string_view value);
    StringMap Finish() &&;

   private:
    std::vector<Entry> entries_;
    std::string chars_;
  };

 private:
  std::string_view KeyOf(const Entry& e) const;
  std::string_view ValueOf(const Entry& e) const {
    return std::string_view(chars() + e.value, e.value_len);
  }
  const char* chars() const { return borrowed_ != nullptr ? borrowed_ : chars_.data(); }
  // Replaces the entries with `items` (sorted by key, unique).
  void Assign(const std::vector<std::pair<std::string_view, std::string_view>>& items);

  bool present_ = false;
  std::vector<Entry> entries_;
  std::string chars_;
  const char* borrowed_ = nullptr;  // Borrow(): the characters' buffer instead of chars_
};

// metadata of any object.
struct ObjectMeta {
  bool present = false;  // the object (or its metadata) was there
  std::string namespace_;
  std::string name;
  std::string generate_name;
  std::string uid;
  std::string resource_version;
  bool deleting = false;  // metadata.deletionTimestamp is set
  StringMap labels;
  StringMap annotations;

  std::optional<std::string_view> Annotation(std::string_view key) const {
    return annotations.Get(key);
  }
  std::optional<std::string_view> Label(std::string_view key) const { return labels.Get(key); }
  // The opt-in: label allocating.agones.dev/enabled is exactly "true".
  bool OptedIn() const;
  // "namespace/name".
  std::string Key() const { return namespace_ + "/" + name; }
};

// How an object is named in messages: "<namespace>/<name>", where the namespace is
// metadata.namespace, else `fallback_namespace` (the review's request.namespace), and the name is
// metadata.name, else `fallback_name` (request.name), else metadata.generateName (a CREATE whose
// name the API server has not generated yet).
std::string ObjectName(const ObjectMeta& meta, std::string_view fallback_namespace,
                       std::string_view fallback_name);

// `meta` may be nullptr. `path` is the JSON path of the metadata object (for messages).
ObjectMeta ReadMeta(const Json* meta, const std::string& path, Parse mode = Parse::kStrict);

struct PortView {
  std::string name;
  int port = 0;
  bool operator==(const PortView&) const = default;
};

struct AddressView {
  std::string type;     // status.addresses[].type
  std::string address;  // status.addresses[].address
  bool operator==(const AddressView&) const = default;
};

// A GameServer (an empty view, present == false, when the object is absent).
struct GameServerView : ObjectMeta {
  std::string state;               // status.state ("" when absent)
  std::string address;             // status.address
  std::vector<PortView> ports;     // status.ports[].{name,port}
  std::string allocation;          // allocating.agones.dev/allocation ("" when absent)
  std::optional<TimePoint> since;  // allocating.agones.dev/since, parsed
  // What the gateway's answer carries besides (agones-allocator's AllocationResponse):
  std::string node_name;               // status.nodeName
  std::vector<AddressView> addresses;  // status.addresses[].{type,address}
  // status.counters / status.lists as compact JSON text ("" when absent or not an object).
  std::string counters_json;
  std::string lists_json;

  // Heap bytes held beyond sizeof(GameServerView) (the cache's size metric).
  size_t HeapBytes() const;
};

// Field-by-field equality (the streaming decoder's tests compare it with the document path).
bool operator==(const ObjectMeta& a, const ObjectMeta& b);
bool operator==(const GameServerView& a, const GameServerView& b);

// The allocation id for a GameServer entering Allocating: agones.dev/last-allocated when this
// update set it (present, non-empty and different from the old object's value), else std::nullopt
// (the id is then `since`).
std::optional<std::string_view> FreshLastAllocated(const ObjectMeta& old_gs,
                                                   const ObjectMeta& new_gs);

// `obj` may be nullptr (absent). `path` names the object in messages ("request.object").
GameServerView ParseGameServer(const Json* obj, const std::string& path, Parse mode);
// The resolver's form: lenient.
GameServerView ParseGameServer(const Json& obj);

// The port names of a GameServer spec (`spec` may be nullptr): spec.ports[].name. std::nullopt
// when spec.ports is absent. Throws BadRequest on wrong types.
std::optional<std::vector<std::string_view>> PortNames(const Json* spec, const std::string& path);

}  // namespace aw::policy
