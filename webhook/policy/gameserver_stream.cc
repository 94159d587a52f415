#include "policy/gameserver_stream.h"

#include <fmt/format.h>
#include <rapidjson/encodedstream.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <climits>
#include <optional>
#include <vector>

#include "contract/keys.h"
#include "util/time_format.h"

namespace aw::policy {
namespace {

// Where the decoder is: the object or array whose members or elements come next.
enum class Ctx { kTop, kMeta, kLabels, kAnnotations, kStatus, kPorts, kPort, kAddrs, kAddr };

// What the value that comes next is (after a Key, or as an element of kPorts/kAddrs).
enum class Field {
  kNone,  // not read: skipped
  kMeta,
  kStatus,
  kName,
  kGenerateName,
  kNamespace,
  kUid,
  kResourceVersion,
  kDeletion,
  kLabels,
  kAnnotations,
  kMapValue,
  kState,
  kAddress,
  kNodeName,
  kPorts,
  kAddresses,
  kCounters,
  kLists,
  kPortElement,
  kPortName,
  kPortNumber,
  kAddrElement,
  kAddrType,
  kAddrAddress,
};

// The SAX handler. Each object the view reads keeps a bit set of the keys already seen: only the
// first occurrence of a key counts (rapidjson's FindMember, which the document path uses, finds
// the first), whatever its type.
class Decoder {
 public:
  explicit Decoder(GameServerView* out) : g_(out) {}

  bool Null() { return Capturing() ? writer_.Null() : Scalar(Kind::kNull, {}, 0); }
  bool Bool(bool b) { return Capturing() ? writer_.Bool(b) : Scalar(Kind::kOther, {}, 0); }
  bool Int(int i) { return Capturing() ? writer_.Int(i) : Scalar(Kind::kInt, {}, i); }
  bool Uint(unsigned u) {
    if (Capturing()) return writer_.Uint(u);
    // rapidjson's Value::IsInt() (the document path's test) holds for 0..INT_MAX here.
    return u <= static_cast<unsigned>(INT_MAX) ? Scalar(Kind::kInt, {}, static_cast<int>(u))
                                               : Scalar(Kind::kOther, {}, 0);
  }
  bool Int64(int64_t i) { return Capturing() ? writer_.Int64(i) : Scalar(Kind::kOther, {}, 0); }
  bool Uint64(uint64_t u) { return Capturing() ? writer_.Uint64(u) : Scalar(Kind::kOther, {}, 0); }
  bool Double(double d) { return Capturing() ? writer_.Double(d) : Scalar(Kind::kOther, {}, 0); }
  bool RawNumber(const char*, rapidjson::SizeType, bool) { return false; }  // not asked for
  bool String(const char* s, rapidjson::SizeType n, bool) {
    return Scalar(Kind::kString, std::string_view(s, n), 0);  // captured there too
  }

  bool StartObject() {
    if (Capturing()) return Capture([](auto& w) { return w.StartObject(); }, +1);
    if (skip_ > 0) return ++skip_, true;
    if (!started_) {  // the root
      started_ = true;
      g_->present = true;
      Push(Ctx::kTop);
      return true;
    }
    Field f = TakeField();
    switch (f) {
      case Field::kMeta:
        Push(Ctx::kMeta);
        return true;
      case Field::kStatus:
        Push(Ctx::kStatus);
        return true;
      case Field::kLabels:
        labels_.emplace();
        Push(Ctx::kLabels);
        return true;
      case Field::kAnnotations:
        annotations_.emplace();
        Push(Ctx::kAnnotations);
        return true;
      case Field::kCounters:
      case Field::kLists:
        capture_target_ = f == Field::kCounters ? &g_->counters_json : &g_->lists_json;
        capture_buf_.Clear();
        writer_.Reset(capture_buf_);
        capture_depth_ = 1;
        return writer_.StartObject();
      case Field::kPortElement:
        g_->ports.emplace_back();
        Push(Ctx::kPort);
        return true;
      case Field::kAddrElement:
        g_->addresses.emplace_back();
        Push(Ctx::kAddr);
        return true;
      case Field::kDeletion:
        g_->deleting = true;  // any value but null
        skip_ = 1;
        return true;
      default:
        skip_ = 1;
        return true;
    }
  }

  bool Key(const char* s, rapidjson::SizeType n, bool) {
    std::string_view k(s, n);
    if (Capturing()) return writer_.Key(s, n);
    if (skip_ > 0) return true;
    field_ = Field::kNone;
    Frame& fr = stack_.back();
    auto first = [&](int bit) {
      if (fr.seen & (1u << bit)) return false;
      fr.seen |= 1u << bit;
      return true;
    };
    switch (fr.ctx) {
      case Ctx::kTop:
        if (k == "metadata" && first(0)) field_ = Field::kMeta;
        if (k == "status" && first(1)) field_ = Field::kStatus;
        break;
      case Ctx::kMeta:
        if (k == "name" && first(0)) field_ = Field::kName;
        if (k == "generateName" && first(1)) field_ = Field::kGenerateName;
        if (k == "namespace" && first(2)) field_ = Field::kNamespace;
        if (k == "uid" && first(3)) field_ = Field::kUid;
        if (k == "resourceVersion" && first(4)) field_ = Field::kResourceVersion;
        if (k == "deletionTimestamp" && first(5)) field_ = Field::kDeletion;
        if (k == "labels" && first(6)) field_ = Field::kLabels;
        if (k == "annotations" && first(7)) field_ = Field::kAnnotations;
        break;
      case Ctx::kLabels:
      case Ctx::kAnnotations:
        map_key_.assign(k);
        field_ = Field::kMapValue;
        break;
      case Ctx::kStatus:
        if (k == "state" && first(0)) field_ = Field::kState;
        if (k == "address" && first(1)) field_ = Field::kAddress;
        if (k == "ports" && first(2)) field_ = Field::kPorts;
        if (k == "nodeName" && first(3)) field_ = Field::kNodeName;
        if (k == "addresses" && first(4)) field_ = Field::kAddresses;
        if (k == "counters" && first(5)) field_ = Field::kCounters;
        if (k == "lists" && first(6)) field_ = Field::kLists;
        break;
      case Ctx::kPort:
        if (k == "name" && first(0)) field_ = Field::kPortName;
        if (k == "port" && first(1)) field_ = Field::kPortNumber;
        break;
      case Ctx::kAddr:
        if (k == "type" && first(0)) field_ = Field::kAddrType;
        if (k == "address" && first(1)) field_ = Field::kAddrAddress;
        break;
      case Ctx::kPorts:
      case Ctx::kAddrs:
        break;  // arrays have no keys
    }
    return true;
  }

  bool EndObject(rapidjson::SizeType) {
    if (Capturing()) {
      if (!writer_.EndObject()) return false;
      if (--capture_depth_ == 0) {
        capture_target_->assign(capture_buf_.GetString(), capture_buf_.GetSize());
        capture_target_ = nullptr;
      }
      return true;
    }
    if (skip_ > 0) return --skip_, true;
    Ctx ctx = stack_.back().ctx;
    stack_.pop_back();
    if (ctx == Ctx::kLabels) g_->labels = std::move(*labels_).Finish();
    if (ctx == Ctx::kAnnotations) g_->annotations = std::move(*annotations_).Finish();
    return true;
  }

  bool StartArray() {
    if (Capturing()) return Capture([](auto& w) { return w.StartArray(); }, +1);
    if (skip_ > 0) return ++skip_, true;
    if (!started_) {  // a root that is not an object: an empty view
      started_ = true;
      skip_ = 1;
      return true;
    }
    Field f = TakeField();
    if (f == Field::kPorts) {
      Push(Ctx::kPorts);
      return true;
    }
    if (f == Field::kAddresses) {
      Push(Ctx::kAddrs);
      return true;
    }
    // An element of ports/addresses that is not an object still counts as one (empty) element.
    if (f == Field::kPortElement) g_->ports.emplace_back();
    if (f == Field::kAddrElement) g_->addresses.emplace_back();
    if (f == Field::kDeletion) g_->deleting = true;  // any value but null
    skip_ = 1;
    return true;
  }

  bool EndArray(rapidjson::SizeType) {
    if (Capturing()) return Capture([](auto& w) { return w.EndArray(); }, -1);
    if (skip_ > 0) return --skip_, true;
    stack_.pop_back();
    return true;
  }

  void Finish() {
    if (auto a = g_->Annotation(keys::kAllocation)) g_->allocation = std::string(*a);
    if (auto s = g_->Annotation(keys::kSince)) {
      if (auto t = util::ParseRfc3339(*s))
        g_->since = std::chrono::time_point_cast<Clock::duration>(*t);
    }
    g_->ports.shrink_to_fit();
    g_->addresses.shrink_to_fit();
  }

 private:
  enum class Kind { kNull, kString, kInt, kOther };
  struct Frame {
    Ctx ctx;
    uint32_t seen = 0;  // bit i: the i-th key this context reads was seen
  };

  bool Capturing() const { return capture_target_ != nullptr; }
  template <typename F>
  bool Capture(F f, int depth_change) {
    capture_depth_ += depth_change;
    return f(writer_);
  }
  void Push(Ctx c) { stack_.push_back(Frame{c}); }

  // The field the value now starting belongs to (consumed), for array elements by the array.
  Field TakeField() {
    if (!stack_.empty()) {
      if (stack_.back().ctx == Ctx::kPorts) return Field::kPortElement;
      if (stack_.back().ctx == Ctx::kAddrs) return Field::kAddrElement;
    }
    Field f = field_;
    field_ = Field::kNone;
    return f;
  }

  bool Scalar(Kind kind, std::string_view s, int i) {
    if (Capturing()) return writer_.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
    if (skip_ > 0) return true;
    if (!started_) {  // a root that is not an object: an empty view
      started_ = true;
      return true;
    }
    Field f = TakeField();
    auto str = [&](std::string* dst) {
      if (kind == Kind::kString) dst->assign(s);
    };
    switch (f) {
      case Field::kName:
        str(&g_->name);
        break;
      case Field::kGenerateName:
        str(&g_->generate_name);
        break;
      case Field::kNamespace:
        str(&g_->namespace_);
        break;
      case Field::kUid:
        str(&g_->uid);
        break;
      case Field::kResourceVersion:
        str(&g_->resource_version);
        break;
      case Field::kDeletion:
        g_->deleting = kind != Kind::kNull;
        break;
      case Field::kMapValue: {
        auto& b = stack_.back().ctx == Ctx::kLabels ? labels_ : annotations_;
        if (kind == Kind::kString) b->Add(map_key_, s);
        break;
      }
      case Field::kState:
        str(&g_->state);
        break;
      case Field::kAddress:
        str(&g_->address);
        break;
      case Field::kNodeName:
        str(&g_->node_name);
        break;
      case Field::kPortName:
        str(&g_->ports.back().name);
        break;
      case Field::kPortNumber:
        if (kind == Kind::kInt) g_->ports.back().port = i;
        break;
      case Field::kAddrType:
        str(&g_->addresses.back().type);
        break;
      case Field::kAddrAddress:
        str(&g_->addresses.back().address);
        break;
      case Field::kPortElement:
        g_->ports.emplace_back();
        break;
      case Field::kAddrElement:
        g_->addresses.emplace_back();
        break;
      default:
        break;  // metadata/status/labels/annotations that are not objects: absent, as the
                // document path reads them (null included)
    }
    return true;
  }

  GameServerView* g_;
  bool started_ = false;
  std::vector<Frame> stack_;
  Field field_ = Field::kNone;
  int skip_ = 0;  // > 0: inside a value that is skipped, at this depth
  std::string map_key_;
  std::optional<StringMap::Builder> labels_, annotations_;
  // Capturing status.counters / status.lists as compact text.
  std::string* capture_target_ = nullptr;
  int capture_depth_ = 0;
  rapidjson::StringBuffer capture_buf_;
  rapidjson::Writer<rapidjson::StringBuffer> writer_;
};

}  // namespace

Status DecodeGameServer(std::string_view json, GameServerView* out) {
  *out = GameServerView{};
  Decoder d(out);
  rapidjson::Reader reader;
  rapidjson::MemoryStream ms(json.data(), json.size());
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> is(ms);
  rapidjson::ParseResult r = reader.Parse<rapidjson::kParseIterativeFlag>(is, d);
  if (r.IsError()) {
    *out = GameServerView{};
    return Status::InvalidArgument(fmt::format("not a JSON value: {} at byte {}",
                                               rapidjson::GetParseError_En(r.Code()), r.Offset()));
  }
  d.Finish();
  return Status::Ok();
}

}  // namespace aw::policy
