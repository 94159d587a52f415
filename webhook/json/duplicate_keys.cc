#include "json/duplicate_keys.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include "util/text.h"

namespace aw::json {
namespace {

using rapidjson::SizeType;
using rapidjson::Value;

// Objects up to this many members are checked pairwise (no allocation, at most 120 comparisons,
// most of them rejected on length); larger ones by sorting their names.
constexpr SizeType kPairwiseMax = 16;
constexpr size_t kMaxKeyBytes = kMaxDuplicateKeyBytes;

std::string_view Name(const Value::ConstMemberIterator& it) {
  return std::string_view(it->name.GetString(), it->name.GetStringLength());
}

// The repeated name of `obj`, or nullopt. `scratch` is reused between objects.
std::optional<std::string_view> RepeatedName(const Value& obj,
                                             std::vector<std::string_view>* scratch) {
  if (obj.MemberCount() < 2) return std::nullopt;
  scratch->clear();
  for (auto it = obj.MemberBegin(); it != obj.MemberEnd(); ++it) scratch->push_back(Name(it));
  return RepeatedKey(*scratch);
}

bool IsIdentifier(std::string_view key) {
  if (key.empty()) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '$';
  });
}

// `s` clipped and escaped so that it can be shown between double quotes.
std::string Quote(std::string_view s) {
  const std::string clipped = util::Clip(s, kMaxKeyBytes);
  std::string out = "\"";
  for (char c : clipped) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\u{:04x}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

struct Frame {
  const Value* value;
  SizeType next;  // index of the next child to visit; the child on the path is next - 1
};

// The path of stack.back(): each frame after the first is child `next - 1` of the one before.
std::string PathOf(const std::vector<Frame>& stack) {
  std::string path = "body";
  for (size_t i = 1; i < stack.size(); ++i) {
    const Value& parent = *stack[i - 1].value;
    const SizeType index = stack[i - 1].next - 1;
    AppendPathStep(&path, i, parent.IsArray(), index,
                   parent.IsArray() ? std::string_view() : Name(parent.MemberBegin() + index));
  }
  return path;
}

}  // namespace

std::optional<std::string_view> RepeatedKey(std::span<std::string_view> names) {
  const size_t n = names.size();
  if (n < 2) return std::nullopt;
  if (n <= kPairwiseMax) {
    for (size_t i = 1; i < n; ++i) {
      for (size_t j = 0; j != i; ++j) {
        if (names[j] == names[i]) return names[i];
      }
    }
    return std::nullopt;
  }
  std::sort(names.begin(), names.end());
  auto dup = std::adjacent_find(names.begin(), names.end());
  if (dup == names.end()) return std::nullopt;
  return *dup;
}

void AppendPathStep(std::string* path, size_t depth, bool in_array, size_t index,
                    std::string_view key) {
  if (in_array) {
    *path += fmt::format("[{}]", index);
  } else if (depth == 1 && key == "request") {
    *path = "request";  // as in every other message: request.uid, request.object...
  } else if (IsIdentifier(key)) {
    *path += '.';
    *path += key;
  } else {
    *path += '[' + Quote(key) + ']';
  }
}

std::string DuplicateKey::Message() const {
  return fmt::format("{}: duplicate key {}", path, Quote(key));
}

std::optional<DuplicateKey> FindDuplicateKey(const Value& root) {
  if (!root.IsObject() && !root.IsArray()) return std::nullopt;
  std::vector<std::string_view> scratch;
  std::vector<Frame> stack;
  stack.push_back({&root, 0});
  auto check = [&](const Value& v) -> std::optional<DuplicateKey> {
    if (!v.IsObject()) return std::nullopt;
    if (auto name = RepeatedName(v, &scratch)) {
      return DuplicateKey{PathOf(stack), util::Clip(*name, kMaxKeyBytes)};
    }
    return std::nullopt;
  };
  if (auto d = check(root)) return d;
  while (!stack.empty()) {
    Frame& top = stack.back();
    const Value& v = *top.value;
    const Value* child = nullptr;
    if (v.IsObject()) {
      if (top.next < v.MemberCount()) child = &(v.MemberBegin() + top.next)->value;
    } else if (top.next < v.Size()) {
      child = &v[top.next];
    }
    if (!child) {
      stack.pop_back();
      continue;
    }
    ++top.next;  // before the push below invalidates `top`
    if (!child->IsObject() && !child->IsArray()) continue;
    stack.push_back({child, 0});
    if (auto d = check(*child)) return d;
  }
  return std::nullopt;
}

}  // namespace aw::json
