#include "policy/json_patch.h"

#include <rapidjson/allocators.h>
#include <rapidjson/writer.h>

#include <cstdint>
#include <optional>

namespace aw::policy {
namespace {

std::string_view OpName(JsonPatch::Op op) {
  switch (op) {
    case JsonPatch::Op::kAdd:
      return "add";
    case JsonPatch::Op::kReplace:
      return "replace";
    case JsonPatch::Op::kRemove:
      return "remove";
    case JsonPatch::Op::kTest:
      return "test";
  }
  return "add";
}

// A RapidJSON output stream appending to a std::string (one buffer, reserved once).
struct StringOut {
  using Ch = char;
  std::string* s;
  void Put(char c) { s->push_back(c); }
  void Flush() {}
};

// Appends the escaped reference token to `out` (a std::string or the patch's buffer): "~" -> "~0",
// "/" -> "~1".
template <typename Out>
void AppendPointerToken(Out* out, std::string_view token) {
  for (char c : token) {
    if (c == '~') {
      out->push_back('~');
      out->push_back('0');
    } else if (c == '/') {
      out->push_back('~');
      out->push_back('1');
    } else {
      out->push_back(c);
    }
  }
}

}  // namespace

std::string EscapePointerToken(std::string_view token) {
  std::string out;
  out.reserve(token.size() + 4);
  AppendPointerToken(&out, token);
  return out;
}

namespace {
// The offset of `s` in the buffer [begin, begin + size) when it lies within it.
std::optional<uint32_t> OffsetIn(const char* begin, size_t size, std::string_view s) {
  const auto b = reinterpret_cast<uintptr_t>(begin);
  const auto p = reinterpret_cast<uintptr_t>(s.data());
  if (s.empty() || p < b || p + s.size() > b + size) return std::nullopt;
  return static_cast<uint32_t>(p - b);
}
}  // namespace

JsonPatch::Span JsonPatch::Put(std::string_view text) {
  // Text already held (a view of this patch's own buffer) is referred to, not copied: inserting a
  // range of the buffer into itself could read it after it moved.
  if (auto at = OffsetIn(text_.data(), text_.size(), text)) {
    return Span{*at, static_cast<uint32_t>(text.size())};
  }
  Span s{static_cast<uint32_t>(text_.size()), static_cast<uint32_t>(text.size())};
  text_.insert(text_.end(), text.begin(), text.end());
  return s;
}

JsonPatch::Span JsonPatch::PutPath(std::string_view map_path, std::string_view key) {
  const auto off = static_cast<uint32_t>(text_.size());
  text_.insert(text_.end(), map_path.begin(), map_path.end());
  text_.push_back('/');
  AppendPointerToken(&text_, key);
  return Span{off, static_cast<uint32_t>(text_.size()) - off};
}

void JsonPatch::Test(std::string_view path, std::string_view value) {
  const Span p = Put(path);
  entries_.push_back(Entry{Op::kTest, p, Put(value)});
}
void JsonPatch::AddString(std::string_view path, std::string_view value) {
  const Span p = Put(path);
  entries_.push_back(Entry{Op::kAdd, p, Put(value)});
}
void JsonPatch::ReplaceString(std::string_view path, std::string_view value) {
  const Span p = Put(path);
  entries_.push_back(Entry{Op::kReplace, p, Put(value)});
}
void JsonPatch::Remove(std::string_view path) {
  entries_.push_back(Entry{Op::kRemove, Put(path), {}});
}
void JsonPatch::AddStringAt(std::string_view map_path, std::string_view key,
                            std::string_view value) {
  const Span p = PutPath(map_path, key);
  entries_.push_back(Entry{Op::kAdd, p, Put(value)});
}
void JsonPatch::ReplaceStringAt(std::string_view map_path, std::string_view key,
                                std::string_view value) {
  const Span p = PutPath(map_path, key);
  entries_.push_back(Entry{Op::kReplace, p, Put(value)});
}
void JsonPatch::RemoveAt(std::string_view map_path, std::string_view key) {
  entries_.push_back(Entry{Op::kRemove, PutPath(map_path, key), {}});
}
void JsonPatch::StartMap(std::string_view path) {
  const auto at = static_cast<uint32_t>(items_.size());
  entries_.push_back(Entry{Op::kAdd, Put(path), {}, true, at, at});
}
void JsonPatch::AddMapItem(std::string_view key, std::string_view value) {
  // Only right after StartMap (or another item): the items of the last entry.
  const Span k = Put(key);
  items_.emplace_back(k, Put(value));
  entries_.back().items_end = static_cast<uint32_t>(items_.size());
}
void JsonPatch::AddMap(std::string_view path,
                       const std::vector<std::pair<std::string, std::string>>& map) {
  StartMap(path);
  for (const auto& [k, v] : map) AddMapItem(k, v);
}

std::string JsonPatch::ToJson() const {
  // The text's size, escapes aside: one allocation.
  size_t size = 2 + text_.size() + 40 * entries_.size() + 6 * items_.size();
  std::string text;
  text.reserve(size + size / 8);
  StringOut buf{&text};
  // The writer's nesting stack (three levels here) lives in this frame: a pool over a local buffer
  // that never needs its base allocator, so writing allocates nothing but `text`.
  char stack_bytes[1024];
  rapidjson::MemoryPoolAllocator<> pool(stack_bytes, sizeof stack_bytes);
  rapidjson::Writer<StringOut, rapidjson::UTF8<>, rapidjson::UTF8<>,
                    rapidjson::MemoryPoolAllocator<>>
      w(buf, &pool);
  auto str = [&w](std::string_view s) {
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  };
  w.StartArray();
  for (const Entry& e : entries_) {
    w.StartObject();
    str("op");
    str(OpName(e.op));
    str("path");
    str(View(e.path));
    if (e.op != Op::kRemove) {
      str("value");
      if (e.is_map) {
        w.StartObject();
        for (uint32_t i = e.items_begin; i < e.items_end; ++i) {
          str(View(items_[i].first));
          str(View(items_[i].second));
        }
        w.EndObject();
      } else {
        str(View(e.value));
      }
    }
    w.EndObject();
  }
  w.EndArray();
  return text;
}

void MapEdit::Set(std::string_view key, std::string_view value) {
  // A value this edit already holds (from Get) is referred to, not copied into itself.
  auto off = OffsetIn(values_.data(), values_.size(), value);
  if (!off) {
    off = static_cast<uint32_t>(values_.size());
    values_.insert(values_.end(), value.begin(), value.end());
  }
  const auto len = static_cast<uint32_t>(value.size());
  for (Edit& e : edits_) {
    if (e.key == key) {
      e.removed = false;
      e.off = *off;
      e.len = len;
      return;
    }
  }
  edits_.push_back(Edit{key, false, *off, len});
}

void MapEdit::Remove(std::string_view key) {
  for (Edit& e : edits_) {
    if (e.key == key) {
      e.removed = true;
      return;
    }
  }
  edits_.push_back(Edit{key, true, 0, 0});
}

std::optional<std::string_view> MapEdit::Get(std::string_view key) const {
  for (const Edit& e : edits_) {
    if (e.key == key) {
      if (!e.removed) return ValueOf(e);
      return std::nullopt;
    }
  }
  return current_.Get(key);
}

void MapEdit::AppendTo(JsonPatch* patch) const {
  if (!current_.present()) {
    bool started = false;
    for (const Edit& e : edits_) {
      if (e.removed) continue;
      if (!started) patch->StartMap(path_);
      started = true;
      patch->AddMapItem(e.key, ValueOf(e));
    }
    return;
  }
  for (const Edit& e : edits_) {
    auto cur = current_.Get(e.key);
    if (e.removed) {
      if (cur) patch->RemoveAt(path_, e.key);
    } else if (!cur) {
      patch->AddStringAt(path_, e.key, ValueOf(e));
    } else if (*cur != ValueOf(e)) {
      patch->ReplaceStringAt(path_, e.key, ValueOf(e));
    }
  }
}

}  // namespace aw::policy
