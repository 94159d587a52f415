#include "autoscale/review.h"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstring>
#include <optional>

#include "json/duplicate_keys.h"
#include "json/nesting_depth.h"
#include "policy/gameserver.h"
#include "util/text.h"

namespace aw::autoscale {
namespace {

// A FleetAutoscaleReview is shallow (labels and annotations are the deepest parts, at depth 4);
// deeper input is refused before it is parsed into values.
constexpr size_t kMaxDepth = 64;

const rapidjson::Value* Member(const rapidjson::Value& obj, const char* name) {
  auto it = obj.FindMember(name);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}

Status RequiredString(const rapidjson::Value& obj, const char* name, std::string* out) {
  const rapidjson::Value* v = Member(obj, name);
  if (v == nullptr || v->IsNull()) {
    return Status::InvalidArgument(fmt::format("request.{} is missing", name));
  }
  if (!v->IsString()) {
    return Status::InvalidArgument(
        fmt::format("request.{} is {}, expected a string", name, policy::JsonTypeName(*v)));
  }
  if (v->GetStringLength() == 0) {
    return Status::InvalidArgument(fmt::format("request.{} is empty", name));
  }
  out->assign(v->GetString(), v->GetStringLength());
  return Status::Ok();
}

Status Count(const rapidjson::Value& status, const char* name, bool required, int32_t* out) {
  const rapidjson::Value* v = Member(status, name);
  if (v == nullptr || v->IsNull()) {
    if (required) return Status::InvalidArgument(fmt::format("request.status.{} is missing", name));
    *out = 0;
    return Status::Ok();
  }
  if (!v->IsNumber()) {
    return Status::InvalidArgument(fmt::format("request.status.{} is {}, expected an integer", name,
                                               policy::JsonTypeName(*v)));
  }
  if (v->IsUint64() && !v->IsInt64()) {
    return Status::InvalidArgument(
        fmt::format("request.status.{} is {}: above the int32 range of a Fleet's status", name,
                    v->GetUint64()));
  }
  if (!v->IsInt64()) {
    return Status::InvalidArgument(fmt::format(
        "request.status.{} is a number with a fraction or an exponent, expected an integer", name));
  }
  const int64_t n = v->GetInt64();
  if (n < 0) {
    return Status::InvalidArgument(
        fmt::format("request.status.{} is {}: counts cannot be negative", name, n));
  }
  if (n > INT32_MAX) {
    return Status::InvalidArgument(
        fmt::format("request.status.{} is {}: above the int32 range of a Fleet's status", name, n));
  }
  *out = static_cast<int32_t>(n);
  return Status::Ok();
}

Status OptionalConst(const rapidjson::Value& doc, const char* name, std::string_view want) {
  const rapidjson::Value* v = Member(doc, name);
  if (v == nullptr) return Status::Ok();
  if (!v->IsString() || std::string_view(v->GetString(), v->GetStringLength()) != want) {
    const std::string got =
        v->IsString()
            ? fmt::format("\"{}\"",
                          util::Clip(std::string_view(v->GetString(), v->GetStringLength()), 60))
            : std::string(policy::JsonTypeName(*v));
    return Status::InvalidArgument(fmt::format(
        "body.{} is {}, expected \"{}\" (or absent, as Agones sends it)", name, got, want));
  }
  return Status::Ok();
}

}  // namespace

Status ParseAutoscaleReview(std::string_view body, AutoscaleRequest* out) {
  if (const void* nul = std::memchr(body.data(), '\0', body.size())) {
    return Status::InvalidArgument(
        fmt::format("request body is not valid JSON: it contains a NUL byte (at offset {})",
                    static_cast<const char*>(nul) - body.data()));
  }
  if (auto at = json::FirstTooDeep(body, kMaxDepth)) {
    return Status::InvalidArgument(
        fmt::format("request body nests arrays/objects deeper than {} levels (at offset {}); a "
                    "FleetAutoscaleReview never does",
                    kMaxDepth, *at));
  }
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag>(body.data(),
                                                                                    body.size());
  if (doc.HasParseError()) {
    return Status::InvalidArgument(fmt::format("request body is not valid JSON: {} (at offset {})",
                                               rapidjson::GetParseError_En(doc.GetParseError()),
                                               doc.GetErrorOffset()));
  }
  if (auto dup = json::FindDuplicateKey(doc)) return Status::InvalidArgument(dup->Message());
  if (!doc.IsObject()) {
    return Status::InvalidArgument(fmt::format(
        "request body is {}, expected a FleetAutoscaleReview object", policy::JsonTypeName(doc)));
  }
  if (Status s = OptionalConst(doc, "apiVersion", "autoscaling.agones.dev/v1"); !s.ok()) return s;
  if (Status s = OptionalConst(doc, "kind", "FleetAutoscaleReview"); !s.ok()) return s;
  const rapidjson::Value* req = Member(doc, "request");
  if (req == nullptr || req->IsNull()) {
    return Status::InvalidArgument("body.request is missing: not a FleetAutoscaleReview request");
  }
  if (!req->IsObject()) {
    return Status::InvalidArgument(
        fmt::format("body.request is {}, expected an object", policy::JsonTypeName(*req)));
  }
  AutoscaleRequest r;
  if (Status s = RequiredString(*req, "uid", &r.uid); !s.ok()) return s;
  if (Status s = RequiredString(*req, "name", &r.name); !s.ok()) return s;
  if (Status s = RequiredString(*req, "namespace", &r.namespace_); !s.ok()) return s;
  const rapidjson::Value* status = Member(*req, "status");
  if (status == nullptr || status->IsNull()) {
    return Status::InvalidArgument("request.status is missing (the Fleet's status)");
  }
  if (!status->IsObject()) {
    return Status::InvalidArgument(
        fmt::format("request.status is {}, expected an object", policy::JsonTypeName(*status)));
  }
  if (Status s = Count(*status, "replicas", true, &r.status.replicas); !s.ok()) return s;
  if (Status s = Count(*status, "readyReplicas", false, &r.status.ready_replicas); !s.ok()) {
    return s;
  }
  if (Status s = Count(*status, "reservedReplicas", false, &r.status.reserved_replicas); !s.ok()) {
    return s;
  }
  if (Status s = Count(*status, "allocatedReplicas", true, &r.status.allocated_replicas); !s.ok()) {
    return s;
  }
  *out = std::move(r);
  return Status::Ok();
}

std::string BuildAutoscaleResponse(std::string_view uid, bool scale, int32_t replicas) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("apiVersion");
  w.String("autoscaling.agones.dev/v1");
  w.Key("kind");
  w.String("FleetAutoscaleReview");
  w.Key("response");
  w.StartObject();
  w.Key("uid");
  w.String(uid.data(), static_cast<rapidjson::SizeType>(uid.size()));
  w.Key("scale");
  w.Bool(scale);
  w.Key("replicas");
  w.Int(replicas);
  w.EndObject();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

}  // namespace aw::autoscale
