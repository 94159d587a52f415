#include "admission/review_scan.h"

#include <rapidjson/reader.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "json/duplicate_keys.h"

namespace aw::admission {
namespace {

using rapidjson::SizeType;

// The nesting limit of ParseReview (json::ParseChecked's check: a container opening past it).
constexpr size_t kMaxNestingDepth = 512;

// What an open object is, for the names it holds.
enum class Ctx : uint8_t {
  kSkip,  // read for syntax, depth and duplicate keys only
  kRoot,
  kRequest,
  kUserInfo,
  kRequestKind,
  kObject,  // request.object or request.oldObject
  kMeta,
  kLabels,
  kAnnotations,
  kStatus,
  kSpec,      // request.object.spec
  kTemplate,  // request.object.spec.template
  kPodSpec,   // request.object.spec.template.spec
  kPorts,     // request.object.spec.ports (an array)
  kPort,      // an item of it (an object)
};

// What the next value is for.
enum class Want : uint8_t {
  kNothing,   // skipped
  kString,    // a string (or null: absent) into *str_
  kDeleting,  // metadata.deletionTimestamp: a string (or null)
  kEntry,     // a label or annotation value: a string
  kObject,    // an object (or null: absent) of context ctx_
  kPorts,     // request.object.spec.ports: an array (or null: absent)
  kPortItem,  // an item of spec.ports: an object
  kPortName,  // spec.ports[].name: a string (or null: absent)
};

struct Frame {
  bool object;
  Ctx ctx;
  uint8_t which;  // 0: request.object, 1: request.oldObject
  size_t names_begin;
};

struct Scratch {
  std::string copy;
  std::vector<Frame> open;
  std::vector<std::string_view> names;  // of every open object, in order
  rapidjson::GenericReader<rapidjson::UTF8<>, rapidjson::UTF8<>> reader;
};

thread_local Scratch tls_scratch;

// Lists and copies grown by one unusual body are not kept at that size.
constexpr size_t kMaxKeptEntries = 4096;
constexpr size_t kMaxKeptCopyBytes = 1 << 20;

class Scanner {
 public:
  Scanner(Scratch& s, ScannedReview& out) : s_(s), out_(out) {}

  bool Null() {
    const Want w = Take();
    // null counts as absent, but a map holds strings only and spec.ports objects only
    return w != Want::kEntry && w != Want::kPortItem;
  }
  bool Bool(bool) { return Take() == Want::kNothing; }
  bool Int(int) { return Take() == Want::kNothing; }
  bool Uint(unsigned) { return Take() == Want::kNothing; }
  bool Int64(int64_t) { return Take() == Want::kNothing; }
  bool Uint64(uint64_t) { return Take() == Want::kNothing; }
  bool Double(double) { return Take() == Want::kNothing; }
  bool RawNumber(const char*, SizeType, bool) { return Take() == Want::kNothing; }
  bool String(const char* str, SizeType length, bool) {
    const std::string_view v(str, length);  // in situ: points into the copy for good
    switch (Take()) {
      case Want::kNothing:
        return true;
      case Want::kString:
        *str_ = v;
        return true;
      case Want::kDeleting:
        Object(which_).deleting = true;
        return true;
      case Want::kEntry:
        out_.entries.emplace_back(key_, v);
        return true;
      case Want::kPortName:
        out_.port_names.push_back(v);
        return true;
      case Want::kObject:
      case Want::kPorts:
      case Want::kPortItem:
        return false;
    }
    return false;
  }
  bool Key(const char* str, SizeType length, bool) {
    const std::string_view name(str, length);
    s_.names.push_back(name);
    Expect(s_.open.back(), name);
    return true;
  }
  bool StartObject() {
    if (s_.open.size() + 1 > kMaxNestingDepth) return false;
    Ctx ctx = Ctx::kSkip;
    const Want w = Take();
    if (s_.open.empty()) {
      ctx = Ctx::kRoot;
      root_object_ = true;
    } else if (w == Want::kObject) {
      ctx = ctx_;
      Opened(ctx);
    } else if (w == Want::kPortItem) {
      ctx = Ctx::kPort;
    } else if (w != Want::kNothing) {
      return false;
    }
    s_.open.push_back(Frame{true, ctx, which_, s_.names.size()});
    return true;
  }
  bool StartArray() {
    if (s_.open.size() + 1 > kMaxNestingDepth) return false;
    const Want w = Take();
    if (s_.open.empty()) return false;
    Ctx ctx = Ctx::kSkip;
    if (w == Want::kPorts) {
      ctx = Ctx::kPorts;
      out_.object.ports.present = true;
      out_.object.ports.begin = out_.object.ports.end = out_.port_names.size();
    } else if (w != Want::kNothing) {
      return false;
    }
    s_.open.push_back(Frame{false, ctx, 0, s_.names.size()});
    return true;
  }
  bool EndObject(SizeType) {
    const Frame f = s_.open.back();
    std::span<std::string_view> names(s_.names.data() + f.names_begin,
                                      s_.names.size() - f.names_begin);
    if (names.size() >= 2 && json::RepeatedKey(names)) return false;
    if (f.ctx == Ctx::kLabels || f.ctx == Ctx::kAnnotations) {
      ScannedMap& m = f.ctx == Ctx::kLabels ? Object(f.which).labels : Object(f.which).annotations;
      m.end = out_.entries.size();
    }
    s_.names.resize(f.names_begin);
    s_.open.pop_back();
    return true;
  }
  bool EndArray(SizeType) {
    if (s_.open.back().ctx == Ctx::kPorts) out_.object.ports.end = out_.port_names.size();
    s_.open.pop_back();
    return true;
  }

  // The body is an object whose kind is "AdmissionReview" and which has a request object.
  bool Envelope() const { return root_object_ && root_kind_ == "AdmissionReview" && request_; }

 private:
  ScannedObject& Object(uint8_t which) { return which == 0 ? out_.object : out_.old_object; }

  Want Take() {
    const Want w = want_;
    want_ = Want::kNothing;
    // An item of spec.ports (a value with no name, inside that array).
    if (w == Want::kNothing && !s_.open.empty() && s_.open.back().ctx == Ctx::kPorts) {
      return Want::kPortItem;
    }
    return w;
  }

  void WantString(std::string_view* target) {
    want_ = Want::kString;
    str_ = target;
  }
  void Obj(Ctx ctx, uint8_t which) {
    want_ = Want::kObject;
    ctx_ = ctx;
    which_ = which;
  }

  // A member of an object of context f.ctx named `name` is next.
  void Expect(const Frame& f, std::string_view name) {
    switch (f.ctx) {
      case Ctx::kSkip:
        return;
      case Ctx::kRoot:
        if (name == "kind") WantString(&root_kind_);
        if (name == "apiVersion") WantString(&out_.api_version);
        if (name == "request") Obj(Ctx::kRequest, 0);
        return;
      case Ctx::kRequest:
        if (name == "uid") WantString(&out_.uid);
        if (name == "operation") WantString(&out_.operation);
        if (name == "subResource") WantString(&out_.sub_resource);
        if (name == "namespace") WantString(&out_.namespace_);
        if (name == "name") WantString(&out_.name);
        if (name == "userInfo") Obj(Ctx::kUserInfo, 0);
        if (name == "kind") Obj(Ctx::kRequestKind, 0);
        if (name == "object") Obj(Ctx::kObject, 0);
        if (name == "oldObject") Obj(Ctx::kObject, 1);
        return;
      case Ctx::kUserInfo:
        if (name == "username") WantString(&out_.username);
        return;
      case Ctx::kRequestKind:
        if (name == "kind") WantString(&out_.kind);
        return;
      case Ctx::kObject:
        if (name == "metadata") Obj(Ctx::kMeta, f.which);
        if (name == "status") Obj(Ctx::kStatus, f.which);
        if (name == "spec" && f.which == 0) Obj(Ctx::kSpec, 0);
        return;
      case Ctx::kMeta: {
        ScannedObject& o = Object(f.which);
        if (name == "name") WantString(&o.name);
        if (name == "generateName") WantString(&o.generate_name);
        if (name == "namespace") WantString(&o.namespace_);
        if (name == "uid") WantString(&o.uid);
        if (name == "resourceVersion") WantString(&o.resource_version);
        if (name == "deletionTimestamp") {
          want_ = Want::kDeleting;
          which_ = f.which;
        }
        if (name == "labels") Obj(Ctx::kLabels, f.which);
        if (name == "annotations") Obj(Ctx::kAnnotations, f.which);
        return;
      }
      case Ctx::kLabels:
      case Ctx::kAnnotations:
        want_ = Want::kEntry;
        key_ = name;
        return;
      case Ctx::kStatus:
        if (name == "state") WantString(&Object(f.which).state);
        return;
      case Ctx::kSpec:
        if (name == "template") Obj(Ctx::kTemplate, 0);
        if (name == "ports") want_ = Want::kPorts;
        return;
      case Ctx::kTemplate:
        if (name == "spec") Obj(Ctx::kPodSpec, 0);
        return;
      case Ctx::kPodSpec:
        if (name == "serviceAccountName") WantString(&out_.object.service_account);
        return;
      case Ctx::kPort:
        if (name == "name") want_ = Want::kPortName;
        return;
      case Ctx::kPorts:  // an array has no names
        return;
    }
  }

  // An object the decisions read opens.
  void Opened(Ctx ctx) {
    switch (ctx) {
      case Ctx::kRequest:
        request_ = true;
        return;
      case Ctx::kObject:
        Object(which_).present = true;
        return;
      case Ctx::kMeta:
        Object(which_).has_metadata = true;
        return;
      case Ctx::kLabels:
      case Ctx::kAnnotations: {
        ScannedMap& m = ctx == Ctx::kLabels ? Object(which_).labels : Object(which_).annotations;
        m.present = true;
        m.begin = m.end = out_.entries.size();
        return;
      }
      default:
        return;
    }
  }

  Scratch& s_;
  ScannedReview& out_;
  Want want_ = Want::kNothing;
  std::string_view* str_ = nullptr;
  Ctx ctx_ = Ctx::kSkip;
  uint8_t which_ = 0;
  std::string_view key_;
  std::string_view root_kind_;
  bool root_object_ = false;
  bool request_ = false;
};

}  // namespace

bool ScanReview(std::string_view body, ScannedReview* out) {
  Scratch& s = tls_scratch;
  std::vector<std::pair<std::string_view, std::string_view>> entries = std::move(out->entries);
  std::vector<std::string_view> port_names = std::move(out->port_names);
  entries.clear();
  port_names.clear();
  *out = ScannedReview{};
  out->entries = std::move(entries);
  out->port_names = std::move(port_names);
  // In situ parsing stops at a NUL byte; the document path names it.
  if (std::memchr(body.data(), '\0', body.size()) != nullptr) return false;
  if (s.copy.capacity() > kMaxKeptCopyBytes && body.size() <= kMaxKeptCopyBytes) {
    std::string().swap(s.copy);
  }
  s.copy.assign(body.data(), body.size());
  s.open.clear();
  s.names.clear();
  out->base = s.copy.data();
  Scanner scanner(s, *out);
  rapidjson::GenericInsituStringStream<rapidjson::UTF8<>> in(s.copy.data());
  const rapidjson::ParseResult parsed =
      s.reader.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseInsituFlag>(in, scanner);
  if (s.open.capacity() > kMaxKeptEntries) std::vector<Frame>().swap(s.open);
  if (s.names.capacity() > kMaxKeptEntries) std::vector<std::string_view>().swap(s.names);
  return !parsed.IsError() && scanner.Envelope() &&
         (out->api_version == "admission.k8s.io/v1" ||
          out->api_version == "admission.k8s.io/v1beta1") &&
         !out->uid.empty();
}

}  // namespace aw::admission
