#include "kube/core/raw_scan.h"

#include <fmt/format.h>
#include <rapidjson/encodedstream.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <optional>

namespace aw::kube {
namespace {

using Stream = rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream>;

// A SAX handler that follows the depth and, at the few places a form names, records a string or
// the byte range of an object. `is` is the stream the reader reads; the iterative parser reports a
// brace before it takes it, so Tell() is at the `{` of StartObject and at the `}` of EndObject;
// Start()/End() check the byte they expect and fail the scan otherwise, so a change in the
// parser's timing is an error, never a wrong range.
class Spans {
 public:
  enum class Want { kNone, kRv, kContinue, kType, kObject, kItems };

  explicit Spans(Stream* is, std::string_view text, bool list)
      : is_(is), text_(text), list_(list) {}

  bool Null() { return Value(); }
  bool Bool(bool) { return Value(); }
  bool Int(int) { return Value(); }
  bool Uint(unsigned) { return Value(); }
  bool Int64(int64_t) { return Value(); }
  bool Uint64(uint64_t) { return Value(); }
  bool Double(double) { return Value(); }
  bool RawNumber(const char*, rapidjson::SizeType, bool) { return Value(); }
  bool String(const char* s, rapidjson::SizeType n, bool) {
    if (depth_ == 0) return Root(false);
    // `s` points into the reader's own buffer: copy what is kept.
    if (want_ == Want::kRv) rv.assign(s, n);
    if (want_ == Want::kContinue) cont.assign(s, n);
    if (want_ == Want::kType) type.emplace(s, n);
    return Value();
  }
  bool StartObject() {
    if (depth_ == 0 && !Root(true)) return false;
    size_t at = Pos();
    if (at >= text_.size() || text_[at] != '{') return Misplaced();
    if (InItems() && depth_ == 2) item_start_ = at;
    if (want_ == Want::kObject && depth_ == 1) object_start_ = at;
    if (list_ && depth_ == 1 && want_ == Want::kNone && meta_key_) in_meta_ = true;
    want_ = Want::kNone;
    ++depth_;
    return true;
  }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    std::string_view k(s, n);
    want_ = Want::kNone;
    meta_key_ = false;
    if (depth_ == 1) {
      if (list_) {
        if (k == "metadata" && !seen_meta_) seen_meta_ = meta_key_ = true;
        if (k == "items" && !seen_items_) seen_items_ = true, want_ = Want::kItems;
      } else {
        if (k == "type" && !seen_type_) seen_type_ = true, want_ = Want::kType;
        if (k == "object" && !seen_object_) seen_object_ = true, want_ = Want::kObject;
      }
    } else if (depth_ == 2 && in_meta_) {
      if (k == "resourceVersion" && !seen_rv_) seen_rv_ = true, want_ = Want::kRv;
      if (k == "continue" && !seen_cont_) seen_cont_ = true, want_ = Want::kContinue;
    }
    return true;
  }
  bool EndObject(rapidjson::SizeType) {
    --depth_;
    size_t end = Pos() + 1;
    if (end > text_.size() || text_[end - 1] != '}') return Misplaced();
    if (depth_ == 2 && InItems()) items.push_back(text_.substr(item_start_, end - item_start_));
    if (depth_ == 1 && object_start_ != npos_) {
      object = text_.substr(object_start_, end - object_start_);
      object_start_ = npos_;
    }
    if (depth_ == 1) in_meta_ = false;
    return true;
  }
  bool StartArray() {
    if (depth_ == 0) return Root(false);
    if (InItems() && depth_ == 2) ++non_object_items;
    if (list_ && depth_ == 1 && want_ == Want::kItems) items_depth_ = 2;
    want_ = Want::kNone;
    ++depth_;
    return true;
  }
  bool EndArray(rapidjson::SizeType) {
    --depth_;
    if (depth_ == 1) items_depth_ = 0;
    return true;
  }

  std::string rv, cont;
  std::optional<std::string> type;
  std::string_view object;
  std::vector<std::string_view> items;
  size_t non_object_items = 0;
  bool root_not_object = false;
  bool misplaced = false;

 private:
  static constexpr size_t npos_ = std::string_view::npos;
  size_t Pos() const { return is_->Tell(); }
  bool InItems() const { return items_depth_ == 2; }
  bool Root(bool object) {
    if (!object) root_not_object = true;
    return object;  // stop at once: the form needs an object
  }
  bool Misplaced() {
    misplaced = true;
    return false;
  }
  bool Value() {
    if (depth_ == 0) return Root(false);
    if (InItems() && depth_ == 2) ++non_object_items;
    want_ = Want::kNone;
    return true;
  }

  Stream* is_;
  std::string_view text_;
  bool list_;
  int depth_ = 0;
  Want want_ = Want::kNone;
  bool meta_key_ = false, in_meta_ = false;
  bool seen_meta_ = false, seen_items_ = false, seen_type_ = false, seen_object_ = false;
  bool seen_rv_ = false, seen_cont_ = false;
  int items_depth_ = 0;
  size_t item_start_ = 0;
  size_t object_start_ = npos_;
};

Status Scan(std::string_view text, Spans* h, Stream* is, std::string_view what) {
  rapidjson::Reader reader;
  rapidjson::ParseResult r = reader.Parse<rapidjson::kParseIterativeFlag>(*is, *h);
  if (h->root_not_object)
    return Status::InvalidArgument(fmt::format("{} is not a JSON object", what));
  if (h->misplaced)
    return Status::Internal(fmt::format("{}: the JSON reader's offsets moved", what));
  if (r.IsError()) {
    return Status::InvalidArgument(fmt::format("{} is not JSON: {} at byte {} of {}", what,
                                               rapidjson::GetParseError_En(r.Code()), r.Offset(),
                                               text.size()));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ListPageScan> ScanListPage(std::string_view body) {
  rapidjson::MemoryStream ms(body.data(), body.size());
  Stream is(ms);
  Spans h(&is, body, /*list=*/true);
  if (Status s = Scan(body, &h, &is, "list response"); !s.ok()) return s;
  ListPageScan out;
  out.resource_version = std::move(h.rv);
  out.continue_token = std::move(h.cont);
  out.items = std::move(h.items);
  out.non_object_items = h.non_object_items;
  return out;
}

StatusOr<RawWatchEvent> ScanWatchEvent(std::string_view line) {
  rapidjson::MemoryStream ms(line.data(), line.size());
  Stream is(ms);
  Spans h(&is, line, /*list=*/false);
  if (Status s = Scan(line, &h, &is, "watch event"); !s.ok()) return s;
  RawWatchEvent ev;
  if (!h.type) return Status::InvalidArgument("watch event has no type");
  if (h.object.data() == nullptr) return Status::InvalidArgument("watch event has no object");
  std::optional<WatchEvent::Type> type = WatchEventTypeOf(*h.type);
  if (!type) return Status::InvalidArgument("unknown watch event type " + h.type->substr(0, 64));
  ev.type = *type;
  ev.object = h.object;
  return ev;
}

}  // namespace aw::kube
