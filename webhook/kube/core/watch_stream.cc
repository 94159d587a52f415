#include "kube/core/watch_stream.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>

namespace aw::kube {
namespace {

// A document and the pool it allocates from, freed together.
struct PooledDocument {
  explicit PooledDocument(size_t chunk) : pool(chunk), doc(&pool) {}
  rapidjson::MemoryPoolAllocator<> pool;
  rapidjson::Document doc;
};

}  // namespace

JsonPtr CopyToDocument(const rapidjson::Value& value, size_t chunk_bytes) {
  auto owner = std::make_shared<PooledDocument>(std::clamp<size_t>(chunk_bytes, 1024, 64 * 1024));
  owner->doc.CopyFrom(value, owner->pool);
  return JsonPtr(owner, &owner->doc);
}

bool LineFramer::Feed(std::string_view chunk, const std::function<void(std::string_view)>& emit) {
  if (failed_) return false;
  while (!chunk.empty()) {
    size_t nl = chunk.find('\n');
    if (nl == std::string_view::npos) {
      if (buf_.size() + chunk.size() > max_line_) {
        failed_ = true;
        buf_.clear();
        return false;
      }
      buf_.append(chunk);
      return true;
    }
    std::string_view line;
    if (buf_.empty()) {
      line = chunk.substr(0, nl);
    } else {
      if (buf_.size() + nl > max_line_) {
        failed_ = true;
        buf_.clear();
        return false;
      }
      buf_.append(chunk.substr(0, nl));
      line = buf_;
    }
    EmitLine(line, emit);
    buf_.clear();
    chunk.remove_prefix(nl + 1);
  }
  return true;
}

void LineFramer::FeedSkipping(std::string_view chunk,
                              const std::function<void(std::string_view)>& emit,
                              const std::function<void()>& on_oversized) {
  while (!chunk.empty()) {
    size_t nl = chunk.find('\n');
    if (discarding_) {
      if (nl == std::string_view::npos) return;
      discarding_ = false;
      chunk.remove_prefix(nl + 1);
      continue;
    }
    size_t take = nl == std::string_view::npos ? chunk.size() : nl;
    if (buf_.size() + take > max_line_) {
      buf_.clear();
      on_oversized();
      discarding_ = true;
      continue;  // the same chunk, now discarding up to its newline
    }
    if (nl == std::string_view::npos) {
      buf_.append(chunk);
      return;
    }
    std::string_view line = chunk.substr(0, nl);
    if (!buf_.empty()) {
      buf_.append(line);
      line = buf_;
    }
    EmitLine(line, emit);
    buf_.clear();
    chunk.remove_prefix(nl + 1);
  }
}

void LineFramer::EmitLine(std::string_view line,
                          const std::function<void(std::string_view)>& emit) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
    line.remove_suffix(1);
  }
  if (line.find_first_not_of(" \t\r") != std::string_view::npos) emit(line);
}

std::string_view WatchEventTypeName(WatchEvent::Type t) {
  switch (t) {
    case WatchEvent::Type::kAdded:
      return "ADDED";
    case WatchEvent::Type::kModified:
      return "MODIFIED";
    case WatchEvent::Type::kDeleted:
      return "DELETED";
    case WatchEvent::Type::kBookmark:
      return "BOOKMARK";
    case WatchEvent::Type::kError:
      return "ERROR";
  }
  return "ERROR";
}

std::optional<WatchEvent::Type> WatchEventTypeOf(std::string_view name) {
  for (WatchEvent::Type t :
       {WatchEvent::Type::kAdded, WatchEvent::Type::kModified, WatchEvent::Type::kDeleted,
        WatchEvent::Type::kBookmark, WatchEvent::Type::kError}) {
    if (WatchEventTypeName(t) == name) return t;
  }
  return std::nullopt;
}

std::string MetaString(const rapidjson::Value& obj, const char* field) {
  if (!obj.IsObject()) return {};
  auto md = obj.FindMember("metadata");
  if (md == obj.MemberEnd() || !md->value.IsObject()) return {};
  auto f = md->value.FindMember(field);
  if (f == md->value.MemberEnd() || !f->value.IsString()) return {};
  return std::string(f->value.GetString(), f->value.GetStringLength());
}

StatusOr<WatchEvent> ParseWatchEvent(std::string_view line) {
  rapidjson::Document d;
  d.Parse(line.data(), line.size());
  if (d.HasParseError() || !d.IsObject()) {
    return Status::InvalidArgument("watch event is not a JSON object");
  }
  auto t = d.FindMember("type");
  if (t == d.MemberEnd() || !t->value.IsString()) {
    return Status::InvalidArgument("watch event has no type");
  }
  std::string_view type(t->value.GetString(), t->value.GetStringLength());
  auto o = d.FindMember("object");
  if (o == d.MemberEnd() || !o->value.IsObject()) {
    return Status::InvalidArgument("watch event has no object");
  }
  WatchEvent ev;
  if (type == "ERROR") {
    ev.type = WatchEvent::Type::kError;
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> w(sb);
    o->value.Accept(w);
    ev.error = StatusFromJsonObject(std::string_view(sb.GetString(), sb.GetSize()));
    return ev;
  }
  std::optional<WatchEvent::Type> known = WatchEventTypeOf(type);
  if (!known) return Status::InvalidArgument("unknown watch event type " + std::string(type));
  ev.type = *known;
  // The object's text is about the size of its copy (values and strings).
  ev.object = CopyToDocument(o->value, line.size());
  return ev;
}

}  // namespace aw::kube
