// Duplicate JSON object keys.
//
// RapidJSON keeps every member of an object and FindMember returns the first of equal names; Go's
// encoding/json (kube-apiserver, every Go client) keeps the last. A review with
// `"state":"Ready","state":"Allocated"` would be decided on a value kube-apiserver does not hold,
// so such a review is refused instead of guessed at.
//
// Promise: FindDuplicateKey walks every object of the document, at any depth and inside arrays
// (not only the parts the webhook reads: kube-apiserver never sends duplicate keys, so rejecting
// anywhere costs nothing and leaves no part unchecked), without recursion (the parser accepts any
// nesting depth) and in O(n log n) time in the worst case for n member names, O(n) for objects of
// up to 16 members (every object of a typical review). Names are compared after JSON unescaping
// ("st\u0061te" equals "state"), as Go's decoder sees them. No hashing: a body cannot be crafted
// to collide. Returns the first duplicate found with the JSON path of its object, in the style of
// the other 400 messages (`body`, `request`, `request.object.status`, `request.object.spec.
// ports[1]`, `request.object.metadata.annotations["a/b"]`), or nullopt when there is none.
#pragma once

#include <rapidjson/document.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace aw::json {

// A repeated key is quoted in messages up to this many bytes (util::Clip).
inline constexpr size_t kMaxDuplicateKeyBytes = 100;

struct DuplicateKey {
  std::string path;  // JSON path of the object that repeats the key
  std::string key;   // the repeated key (unescaped, possibly clipped)
  // `<path>: duplicate key "<key>"`, the key quoted and escaped for a text message.
  std::string Message() const;
};

std::optional<DuplicateKey> FindDuplicateKey(const rapidjson::Value& root);

// The two rules FindDuplicateKey applies, shared with the one-pass parse (checked_parse.h) so
// that both name the same duplicate:
// - RepeatedKey: the name an object with these member names (in document order) repeats, or
//   nullopt. Up to 16 names, the first name (in order) equal to an earlier one; more, the
//   bytewise least of the repeated names, found by sorting `names` in place.
std::optional<std::string_view> RepeatedKey(std::span<std::string_view> names);
// - AppendPathStep: appends to `path` (which starts as "body") the step to a member `key` of an
//   object, or to element `index` of an array (`in_array`); `depth` is the child's (1: a child of
//   the root).
void AppendPathStep(std::string* path, size_t depth, bool in_array, size_t index,
                    std::string_view key);

}  // namespace aw::json
