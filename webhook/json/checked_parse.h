// One-pass parse of a JSON text with the nesting-depth limit (nesting_depth.h) and the
// duplicate-key check (duplicate_keys.h) folded into RapidJSON's parse.
//
// Promise: ParseChecked(original, buffer, max_depth, doc) parses `buffer` in situ with RapidJSON's
// iterative parser (`buffer`: a mutable copy of `original`, NUL-terminated right after its last
// byte; the strings of *doc point into it, so it must outlive *doc) and answers exactly what the
// three separate steps answered (FirstTooDeep on `original`, then the parse, then
// FindDuplicateKey on the document):
//   - kTooDeep, with the offset FirstTooDeep(original, max_depth) gives, whenever it gives one;
//   - else kSyntax, with RapidJSON's error code and offset;
//   - else kDuplicateKey, with the DuplicateKey that FindDuplicateKey(*doc) returns (the object
//     first in document order that repeats a name, the same name and path);
//   - else kOk, *doc holding the value.
// The depth is checked as the parser goes (a text nested past `max_depth` stops at the first
// bracket past it; FirstTooDeep itself runs only after a failed parse, to name the offset exactly
// as before) and the member names of each object as it closes, so the text is read once and the
// document is not walked again. `original` must not contain a NUL byte (the in situ parse would
// stop there; callers refuse such bodies first). After the first calls on a thread nothing is
// allocated per call but the document's values (in its MemoryPoolAllocator): the parser's stack,
// the document's stack and the lists of open objects and their names are kept per thread
// (ReusedStackAllocator keeps one freed block of at most kMaxKeptBytes per thread).
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/error/error.h>

#include <cstddef>
#include <optional>
#include <string_view>

#include "json/duplicate_keys.h"

namespace aw::json {

// A RapidJSON allocator (the Allocator concept) for parser and document stacks: a block freed on
// a thread is kept (one per thread, up to kMaxKeptBytes) and handed to the next Malloc or Realloc
// on that thread that fits in it, so a parse per request does not malloc/free its stacks.
class ReusedStackAllocator {
 public:
  static const bool kNeedFree = true;
  static constexpr size_t kMaxKeptBytes = 256 * 1024;
  void* Malloc(size_t size);
  void* Realloc(void* original, size_t original_size, size_t new_size);
  static void Free(void* ptr);
};

using CheckedDocument =
    rapidjson::GenericDocument<rapidjson::UTF8<>, rapidjson::MemoryPoolAllocator<>,
                               ReusedStackAllocator>;

struct CheckedParse {
  enum class Result { kOk, kTooDeep, kSyntax, kDuplicateKey };
  Result result = Result::kOk;
  size_t offset = 0;  // kTooDeep: of the bracket past the limit; kSyntax: RapidJSON's
  rapidjson::ParseErrorCode code = rapidjson::kParseErrorNone;  // kSyntax
  std::optional<DuplicateKey> duplicate;                        // kDuplicateKey
};

CheckedParse ParseChecked(std::string_view original, char* buffer, size_t max_depth,
                          CheckedDocument* doc);

}  // namespace aw::json
