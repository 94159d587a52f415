#include "policy/json_patch.h"

#include <rapidjson/writer.h>

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

// Appends the escaped reference token to `out`: "~" -> "~0", "/" -> "~1".
void AppendPointerToken(std::string* out, std::string_view token) {
  for (char c : token) {
    if (c == '~') {
      out->append("~0");
    } else if (c == '/') {
      out->append("~1");
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

void JsonPatch::Test(std::string path, std::string value) {
  if (entries_.empty()) entries_.reserve(8);  // a decision's ops: one allocation
  entries_.push_back(Entry{Op::kTest, std::move(path), false, std::move(value), {}});
}
void JsonPatch::AddString(std::string path, std::string value) {
  if (entries_.empty()) entries_.reserve(8);  // a decision's ops: one allocation
  entries_.push_back(Entry{Op::kAdd, std::move(path), false, std::move(value), {}});
}
void JsonPatch::ReplaceString(std::string path, std::string value) {
  if (entries_.empty()) entries_.reserve(8);  // a decision's ops: one allocation
  entries_.push_back(Entry{Op::kReplace, std::move(path), false, std::move(value), {}});
}
void JsonPatch::Remove(std::string path) {
  if (entries_.empty()) entries_.reserve(8);  // a decision's ops: one allocation
  entries_.push_back(Entry{Op::kRemove, std::move(path), false, {}, {}});
}
void JsonPatch::AddMap(std::string path, std::vector<std::pair<std::string, std::string>> map) {
  if (entries_.empty()) entries_.reserve(8);  // a decision's ops: one allocation
  entries_.push_back(Entry{Op::kAdd, std::move(path), true, {}, std::move(map)});
}

std::string JsonPatch::ToJson() const {
  // The text's size, escapes aside: one allocation.
  size_t size = 2;
  for (const Entry& e : entries_) {
    size += 40 + e.path.size() + e.value.size();
    for (const auto& [k, v] : e.map) size += k.size() + v.size() + 6;
  }
  std::string text;
  text.reserve(size + size / 8);
  StringOut buf{&text};
  rapidjson::Writer<StringOut> w(buf);
  auto str = [&w](std::string_view s) {
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  };
  w.StartArray();
  for (const Entry& e : entries_) {
    w.StartObject();
    str("op");
    str(OpName(e.op));
    str("path");
    str(e.path);
    if (e.op != Op::kRemove) {
      str("value");
      if (e.is_map) {
        w.StartObject();
        for (const auto& [k, v] : e.map) {
          str(k);
          str(v);
        }
        w.EndObject();
      } else {
        str(e.value);
      }
    }
    w.EndObject();
  }
  w.EndArray();
  return text;
}

namespace {
// A decision edits up to about ten keys of a map: the list is allocated once.
constexpr size_t kEditsReserved = 12;
}  // namespace

void MapEdit::Set(std::string_view key, std::string_view value) {
  for (auto& [k, v] : edits_) {
    if (k == key) {
      v = std::string(value);
      return;
    }
  }
  if (edits_.empty()) edits_.reserve(kEditsReserved);
  edits_.emplace_back(key, std::string(value));
}

void MapEdit::Remove(std::string_view key) {
  for (auto& [k, v] : edits_) {
    if (k == key) {
      v.reset();
      return;
    }
  }
  if (edits_.empty()) edits_.reserve(kEditsReserved);
  edits_.emplace_back(key, std::nullopt);
}

std::optional<std::string_view> MapEdit::Get(std::string_view key) const {
  for (const auto& [k, v] : edits_) {
    if (k == key) {
      if (v) return std::string_view(*v);
      return std::nullopt;
    }
  }
  return current_.Get(key);
}

void MapEdit::AppendTo(JsonPatch* patch) const {
  if (!current_.present()) {
    std::vector<std::pair<std::string, std::string>> map;
    for (const auto& [k, v] : edits_) {
      if (v) map.emplace_back(k, *v);
    }
    if (!map.empty()) patch->AddMap(std::string(path_), std::move(map));
    return;
  }
  for (const auto& [k, v] : edits_) {
    auto cur = current_.Get(k);
    if (!v ? !cur : (cur && *cur == *v)) continue;  // nothing to do for this key
    std::string path;
    path.reserve(path_.size() + 1 + k.size() + 4);
    path.append(path_).push_back('/');
    AppendPointerToken(&path, k);
    if (!v) {
      if (cur) patch->Remove(std::move(path));
    } else if (!cur) {
      patch->AddString(std::move(path), *v);
    } else if (*cur != *v) {
      patch->ReplaceString(std::move(path), *v);
    }
  }
}

}  // namespace aw::policy
