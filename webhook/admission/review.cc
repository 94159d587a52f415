#include "admission/review.h"

#include <fmt/format.h>
#include <rapidjson/error/en.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <optional>

#include "json/checked_parse.h"
#include "util/base64.h"
#include "util/text.h"

namespace aw::admission {
namespace {

constexpr std::string_view kV1 = "admission.k8s.io/v1";
constexpr std::string_view kV1beta1 = "admission.k8s.io/v1beta1";

std::string Truncate(std::string_view s) { return util::Clip(s, 100); }

// One arena per thread, reused by every request on that thread (a review is parsed and answered
// on one thread and never outlives the call).
constexpr size_t kArenaBytes = 32 * 1024;  // typical reviews (about 8 KB of JSON) fit
alignas(std::max_align_t) thread_local char tls_arena[kArenaBytes];  // aligned: rapidjson puts its
                                                                     // chunk header at the start
thread_local bool tls_arena_in_use = false;
// The copy of the body, with the arena; kept between requests up to kMaxKeptBufferBytes.
thread_local std::string tls_buffer;
constexpr size_t kMaxKeptBufferBytes = 1 << 20;

rapidjson::MemoryPoolAllocator<> MakePool(bool use_arena) {
  if (use_arena) return rapidjson::MemoryPoolAllocator<>(tls_arena, kArenaBytes);
  return rapidjson::MemoryPoolAllocator<>();
}

// The document's stack allocator is stateless (its memory is kept per thread).
json::ReusedStackAllocator g_stack_allocator;

}  // namespace

ReviewRequest::ReviewRequest()
    : owns_arena_(!tls_arena_in_use),
      pool_(MakePool(owns_arena_)),
      buffer(owns_arena_ ? &tls_buffer : &own_buffer_),
      doc(&pool_, 1024, &g_stack_allocator) {
  if (owns_arena_) tls_arena_in_use = true;
}

ReviewRequest::~ReviewRequest() {
  if (!owns_arena_) return;
  tls_arena_in_use = false;
  if (tls_buffer.capacity() > kMaxKeptBufferBytes) std::string().swap(tls_buffer);
}

namespace {

// Deeper nesting is refused as the parser reaches it: a 7 MiB body of "[[[[..." would otherwise
// become millions of nested values for nothing. Go's
// encoding/json stops at 10000; Kubernetes objects stay far below 100.
constexpr size_t kMaxNestingDepth = 512;

}  // namespace

void ParseReview(std::string_view body, ReviewRequest* out) {
  json::CheckedDocument& doc = out->doc;
  // In-situ parsing of a private copy (about twice as fast as copying every string); the
  // iterative parser, so that deeply nested input cannot exhaust the stack. In-situ parsing stops
  // at a NUL byte, which valid JSON never contains raw: reject it first. No
  // kParseStopWhenDoneFlag: trailing garbage is an error.
  if (std::memchr(body.data(), '\0', body.size()) != nullptr) {
    throw BadRequest(fmt::format(
        "request body is not valid JSON: it contains a NUL byte (at offset {})",
        static_cast<const char*>(std::memchr(body.data(), '\0', body.size())) - body.data()));
  }
  out->buffer->assign(body.data(), body.size());
  const json::CheckedParse parsed =
      json::ParseChecked(body, out->buffer->data(), kMaxNestingDepth, &doc);
  switch (parsed.result) {
    case json::CheckedParse::Result::kOk:
      break;
    case json::CheckedParse::Result::kTooDeep:
      throw BadRequest(fmt::format(
          "request body nests arrays/objects deeper than {} levels (at offset {}); Kubernetes "
          "objects never do",
          kMaxNestingDepth, parsed.offset));
    case json::CheckedParse::Result::kSyntax:
      throw BadRequest(fmt::format("request body is not valid JSON: {} (at offset {})",
                                   rapidjson::GetParseError_En(parsed.code), parsed.offset));
    case json::CheckedParse::Result::kDuplicateKey:
      // Anywhere in the document, before anything is read from it (see duplicate_keys.h).
      throw BadRequest(parsed.duplicate->Message());
  }
  if (!doc.IsObject()) {
    throw BadRequest(
        fmt::format("request body is {}, expected an AdmissionReview object", JsonTypeName(doc)));
  }
  auto kind = OptString(doc, "kind", "body");
  if (!kind || *kind != "AdmissionReview") {
    throw BadRequest(fmt::format("body.kind is {}, expected \"AdmissionReview\"",
                                 kind ? "\"" + Truncate(*kind) + "\"" : "missing"));
  }
  auto api = OptString(doc, "apiVersion", "body");
  if (!api || (*api != kV1 && *api != kV1beta1)) {
    throw BadRequest(fmt::format(
        "body.apiVersion is {}, expected \"admission.k8s.io/v1\" or \"admission.k8s.io/v1beta1\"",
        api ? "\"" + Truncate(*api) + "\"" : "missing"));
  }
  out->api_version = *api;
  const Json* req = Member(doc, "request");
  if (!req) throw BadRequest("body.request is missing");
  if (!req->IsObject()) {
    throw BadRequest(fmt::format("body.request is {}, expected an object", JsonTypeName(*req)));
  }
  auto uid = OptString(*req, "uid", "request");
  if (!uid || uid->empty()) throw BadRequest("request.uid is missing or empty");
  out->uid = std::string(*uid);
  out->operation = OptString(*req, "operation", "request").value_or("");
  if (const Json* ui = OptObject(*req, "userInfo", "request")) {
    out->username = OptString(*ui, "username", "request.userInfo").value_or("");
  }
  if (const Json* k = OptObject(*req, "kind", "request")) {
    out->kind = OptString(*k, "kind", "request.kind").value_or("");
  }
  out->sub_resource = OptString(*req, "subResource", "request").value_or("");
  out->namespace_ = OptString(*req, "namespace", "request").value_or("");
  out->name = OptString(*req, "name", "request").value_or("");
  out->object = Member(*req, "object");
  out->old_object = Member(*req, "oldObject");
}

namespace {

// A RapidJSON output stream writing into a std::string through a pointer (Put is the writer's
// innermost call): the string is sized up front, doubled when full, and cut to what was written by
// Finish().
class StringOut {
 public:
  using Ch = char;
  StringOut(std::string* s, size_t expected) : s_(s) {
    s_->resize(std::max<size_t>(expected, 64));
    p_ = s_->data();
    end_ = p_ + s_->size();
  }
  void Put(char c) {
    if (p_ == end_) Grow();
    *p_++ = c;
  }
  void Flush() {}
  void Finish() { s_->resize(static_cast<size_t>(p_ - s_->data())); }

 private:
  void Grow() {
    const size_t written = static_cast<size_t>(p_ - s_->data());
    s_->resize(s_->size() * 2);
    p_ = s_->data() + written;
    end_ = s_->data() + s_->size();
  }
  std::string* s_;
  char* p_;
  char* end_;
};

}  // namespace

std::string BuildResponse(std::string_view api_version, std::string_view uid, const Decision& d) {
  std::string out;
  BuildResponse(api_version, uid, d, &out);
  return out;
}

void BuildResponse(std::string_view api_version, std::string_view uid, const Decision& d,
                   std::string* out) {
  out->clear();
  // The envelope, the uid, the message and warnings as they are (escapes aside), the patch in
  // base64: reserved at once.
  size_t size = 160 + api_version.size() + uid.size() + d.message.size() + d.status_reason.size() +
                (d.patch.size() + 2) / 3 * 4;
  for (const auto& w : d.warnings) size += w.size() + 4;
  StringOut buf(out, size + size / 8);
  // The writer's stack from the per-thread kept block, as the parser's.
  rapidjson::Writer<StringOut, rapidjson::UTF8<>, rapidjson::UTF8<>, json::ReusedStackAllocator> w(
      buf, &g_stack_allocator);
  auto str = [&w](std::string_view s) {
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  };
  w.StartObject();
  str("apiVersion");
  str(api_version);
  str("kind");
  str("AdmissionReview");
  str("response");
  w.StartObject();
  str("uid");
  str(uid);
  str("allowed");
  w.Bool(d.allowed);
  if (!d.allowed) {
    str("status");
    w.StartObject();
    str("status");
    str("Failure");
    str("code");
    w.Int(d.code ? d.code : 403);
    str("reason");
    str(d.status_reason.empty() ? std::string_view("Forbidden") : d.status_reason);
    str("message");
    str(d.message);
    w.EndObject();
  }
  if (d.allowed && !d.patch.empty()) {
    str("patchType");
    str("JSONPatch");
    str("patch");
    // Encoded into a per-thread buffer: no allocation once it has grown to a patch's size.
    thread_local std::string encoded;
    encoded.clear();
    util::Base64AppendTo(d.patch, &encoded);
    str(encoded);
    if (encoded.capacity() > kMaxKeptBufferBytes) std::string().swap(encoded);
  }
  if (!d.warnings.empty()) {
    str("warnings");
    w.StartArray();
    for (const auto& s : d.warnings) str(s);
    w.EndArray();
  }
  w.EndObject();
  w.EndObject();
  buf.Finish();
}

}  // namespace aw::admission
