#include "json/checked_parse.h"

#include <rapidjson/reader.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "json/nesting_depth.h"
#include "util/text.h"

namespace aw::json {

// ---- ReusedStackAllocator: each block carries its capacity in a header before it. ----
namespace {

struct alignas(std::max_align_t) BlockHeader {
  size_t capacity;
};

struct KeptBlock {
  BlockHeader* block = nullptr;
  ~KeptBlock() { std::free(block); }
};
thread_local KeptBlock tls_kept;

void* Payload(BlockHeader* h) { return h + 1; }
BlockHeader* HeaderOf(void* p) { return static_cast<BlockHeader*>(p) - 1; }

BlockHeader* NewBlock(size_t size) {
  auto* h = static_cast<BlockHeader*>(std::malloc(sizeof(BlockHeader) + size));
  if (h != nullptr) h->capacity = size;
  return h;
}

}  // namespace

void* ReusedStackAllocator::Malloc(size_t size) {
  if (size == 0) return nullptr;
  if (BlockHeader* kept = tls_kept.block; kept != nullptr && kept->capacity >= size) {
    tls_kept.block = nullptr;
    return Payload(kept);
  }
  BlockHeader* h = NewBlock(size);
  return h == nullptr ? nullptr : Payload(h);
}

void* ReusedStackAllocator::Realloc(void* original, size_t original_size, size_t new_size) {
  if (original == nullptr) return Malloc(new_size);
  if (new_size == 0) {
    Free(original);
    return nullptr;
  }
  BlockHeader* h = HeaderOf(original);
  if (h->capacity >= new_size) return original;
  // Grow: the kept block when it is large enough, else realloc.
  if (BlockHeader* kept = tls_kept.block; kept != nullptr && kept->capacity >= new_size) {
    tls_kept.block = nullptr;
    std::memcpy(Payload(kept), original, original_size);
    Free(original);
    return Payload(kept);
  }
  auto* grown = static_cast<BlockHeader*>(std::realloc(h, sizeof(BlockHeader) + new_size));
  if (grown == nullptr) return nullptr;
  grown->capacity = new_size;
  return Payload(grown);
}

void ReusedStackAllocator::Free(void* ptr) {
  if (ptr == nullptr) return;
  BlockHeader* h = HeaderOf(ptr);
  BlockHeader*& kept = tls_kept.block;
  if (h->capacity <= kMaxKeptBytes && (kept == nullptr || kept->capacity < h->capacity)) {
    std::free(kept);
    kept = h;
    return;
  }
  std::free(h);
}

// ---- The parse ----
namespace {

using rapidjson::SizeType;

// An open array or object.
struct Open {
  bool object;
  size_t names_begin;    // objects: where their member names start in Scratch::names
  size_t children;       // values started in it so far (the last one is on the path)
  std::string_view key;  // objects: the name of the member being read
  uint64_t order;        // objects: how many objects opened before it (document order)
};

// Kept per thread and reused by every parse on it.
struct Scratch {
  std::vector<Open> open;
  std::vector<std::string_view> names;  // of every open object, in order
  ReusedStackAllocator allocator;
  rapidjson::GenericReader<rapidjson::UTF8<>, rapidjson::UTF8<>, ReusedStackAllocator> reader{
      &allocator};
};

// Forwards every event to the document's handler; checks the depth when a container opens and the
// member names of an object when it closes.
class Checker {
 public:
  Checker(CheckedDocument& doc, Scratch& s, size_t max_depth)
      : doc_(doc), s_(s), max_depth_(max_depth) {}

  bool Null() { return Value() && doc_.Null(); }
  bool Bool(bool b) { return Value() && doc_.Bool(b); }
  bool Int(int i) { return Value() && doc_.Int(i); }
  bool Uint(unsigned i) { return Value() && doc_.Uint(i); }
  bool Int64(int64_t i) { return Value() && doc_.Int64(i); }
  bool Uint64(uint64_t i) { return Value() && doc_.Uint64(i); }
  bool Double(double d) { return Value() && doc_.Double(d); }
  bool RawNumber(const char* str, SizeType length, bool copy) {
    return Value() && doc_.RawNumber(str, length, copy);
  }
  bool String(const char* str, SizeType length, bool copy) {
    return Value() && doc_.String(str, length, copy);
  }
  bool Key(const char* str, SizeType length, bool copy) {
    const std::string_view name(str, length);  // in situ: points into the buffer for good
    s_.names.push_back(name);
    s_.open.back().key = name;
    return doc_.Key(str, length, copy);
  }
  bool StartObject() { return Start(true) && doc_.StartObject(); }
  bool StartArray() { return Start(false) && doc_.StartArray(); }
  bool EndObject(SizeType members) {
    Close();
    return doc_.EndObject(members);
  }
  bool EndArray(SizeType elements) {
    s_.open.pop_back();
    return doc_.EndArray(elements);
  }

  bool too_deep() const { return too_deep_; }
  std::optional<DuplicateKey>& duplicate() { return duplicate_; }

 private:
  // A value starts in the innermost open container.
  bool Value() {
    if (!s_.open.empty()) ++s_.open.back().children;
    return true;
  }

  bool Start(bool object) {
    if (s_.open.size() + 1 > max_depth_) {
      too_deep_ = true;
      return false;  // stops the parse: kParseErrorTermination
    }
    Value();
    s_.open.push_back(Open{object, s_.names.size(), 0, {}, object ? objects_++ : 0});
    return true;
  }

  // The object on top closes: its names are all known. Of the objects that repeat a name, the one
  // opened first is reported (FindDuplicateKey visits objects in document order).
  void Close() {
    const Open& o = s_.open.back();
    const std::span<std::string_view> names(s_.names.data() + o.names_begin,
                                            s_.names.size() - o.names_begin);
    if (names.size() >= 2 && (!duplicate_ || o.order < duplicate_order_)) {
      if (auto name = RepeatedKey(names)) {
        duplicate_order_ = o.order;
        duplicate_ = DuplicateKey{PathOfTop(), util::Clip(*name, kMaxDuplicateKeyBytes)};
      }
    }
    s_.names.resize(o.names_begin);
    s_.open.pop_back();
  }

  std::string PathOfTop() const {
    std::string path = "body";
    for (size_t i = 1; i < s_.open.size(); ++i) {
      const Open& parent = s_.open[i - 1];
      AppendPathStep(&path, i, !parent.object, parent.children - 1, parent.key);
    }
    return path;
  }

  CheckedDocument& doc_;
  Scratch& s_;
  const size_t max_depth_;
  bool too_deep_ = false;
  uint64_t objects_ = 0;
  std::optional<DuplicateKey> duplicate_;
  uint64_t duplicate_order_ = std::numeric_limits<uint64_t>::max();
};

thread_local Scratch tls_scratch;

// Lists grown by one unusual body are not kept at that size.
constexpr size_t kMaxKeptEntries = 4096;

}  // namespace

CheckedParse ParseChecked(std::string_view original, char* buffer, size_t max_depth,
                          CheckedDocument* doc) {
  Scratch& s = tls_scratch;
  s.open.clear();
  s.names.clear();
  Checker checker(*doc, s, max_depth);
  rapidjson::ParseResult parsed;
  auto generate = [&](CheckedDocument& d) {
    (void)d;  // the checker forwards to *doc, which is `d`
    rapidjson::GenericInsituStringStream<rapidjson::UTF8<>> in(buffer);
    parsed =
        s.reader.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseInsituFlag>(in, checker);
    return !parsed.IsError();
  };
  doc->Populate(generate);
  if (s.open.capacity() > kMaxKeptEntries) std::vector<Open>().swap(s.open);
  if (s.names.capacity() > kMaxKeptEntries) std::vector<std::string_view>().swap(s.names);

  CheckedParse out;
  if (parsed.IsError()) {
    // As before: a text nested too deep is reported as such even when it is also malformed.
    if (auto at = FirstTooDeep(original, max_depth)) {
      out.result = CheckedParse::Result::kTooDeep;
      out.offset = *at;
    } else {
      out.result = CheckedParse::Result::kSyntax;
      out.code = parsed.Code();
      out.offset = parsed.Offset();
    }
    doc->SetNull();
    return out;
  }
  if (checker.duplicate()) {
    out.result = CheckedParse::Result::kDuplicateKey;
    out.duplicate = std::move(checker.duplicate());
  }
  return out;
}

}  // namespace aw::json
