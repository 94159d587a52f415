#include "gateway/allocation.h"

#include <fmt/format.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "contract/keys.h"
#include "json/nesting_depth.h"
#include "util/duration.h"

namespace aw::gateway {
namespace {

using Json = rapidjson::Value;

std::string_view TypeName(const Json& v) {
  switch (v.GetType()) {
    case rapidjson::kNullType:
      return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType:
      return "boolean";
    case rapidjson::kObjectType:
      return "object";
    case rapidjson::kArrayType:
      return "array";
    case rapidjson::kStringType:
      return "string";
    case rapidjson::kNumberType:
      return "number";
  }
  return "value";
}

const Json* Find(const Json& obj, std::string_view key) {
  auto it = obj.FindMember(rapidjson::StringRef(key.data(), key.size()));
  if (it == obj.MemberEnd() || it->value.IsNull()) return nullptr;
  return &it->value;
}

Status ParseJson(std::string_view body, std::string_view what, rapidjson::Document* doc) {
  // Measured before parsing: rapidjson's recursive parser would overflow the stack on deep input.
  if (auto at = json::FirstTooDeep(body, kMaxNestingDepth)) {
    return Status::InvalidArgument(fmt::format("{} is nested deeper than {} levels (at offset {})",
                                               what, kMaxNestingDepth, *at));
  }
  doc->Parse(body.data(), body.size());
  if (doc->HasParseError()) {
    return Status::InvalidArgument(fmt::format("{} is not valid JSON: {} at offset {}", what,
                                               rapidjson::GetParseError_En(doc->GetParseError()),
                                               doc->GetErrorOffset()));
  }
  if (!doc->IsObject()) {
    return Status::InvalidArgument(
        fmt::format("{} must be a JSON object, not {}", what, TypeName(*doc)));
  }
  return Status::Ok();
}

// A map<string,string> field: absent/null, or an object of strings.
Status CheckStringMap(const Json& parent, std::string_view key, std::string_view path) {
  const Json* m = Find(parent, key);
  if (m == nullptr) return Status::Ok();
  if (!m->IsObject()) {
    return Status::InvalidArgument(
        fmt::format("{}.{} is a {}, expected an object of strings", path, key, TypeName(*m)));
  }
  for (auto it = m->MemberBegin(); it != m->MemberEnd(); ++it) {
    if (!it->value.IsString()) {
      return Status::InvalidArgument(fmt::format("{}.{}[\"{}\"] is a {}, expected a string", path,
                                                 key, it->name.GetString(), TypeName(it->value)));
    }
  }
  return Status::Ok();
}

std::string_view StringOr(const Json* obj, std::string_view key, std::string_view fallback = {}) {
  if (obj == nullptr || !obj->IsObject()) return fallback;
  const Json* v = Find(*obj, key);
  if (v == nullptr || !v->IsString()) return fallback;
  return {v->GetString(), v->GetStringLength()};
}

void CopyMap(const policy::StringMap& src, Json* dst, rapidjson::Document::AllocatorType& a) {
  dst->SetObject();
  src.ForEach([&](std::string_view k, std::string_view v) {
    dst->AddMember(Json(k.data(), static_cast<rapidjson::SizeType>(k.size()), a),
                   Json(v.data(), static_cast<rapidjson::SizeType>(v.size()), a), a);
  });
}

}  // namespace

Status ParseDeadline(std::string_view text, std::string_view where, std::chrono::nanoseconds max,
                     std::chrono::nanoseconds* out) {
  auto d = util::ParseDuration(text);
  if (!d) {
    return Status::InvalidArgument(fmt::format("{}: {:?} is not a duration such as \"30s\" ({})",
                                               where, text, d.status().message()));
  }
  if (d->count() == 0 || *d > max) {
    return Status::InvalidArgument(fmt::format("{}: {:?} must be above 0 and at most {}", where,
                                               text, util::FormatDuration(max)));
  }
  *out = *d;
  return Status::Ok();
}

Status ParseAllocationRequest(std::string_view body, AllocationRequest* out) {
  rapidjson::Document doc;
  if (Status s = ParseJson(body, "the AllocationRequest", &doc); !s.ok()) return s;
  *out = AllocationRequest{};
  if (const Json* ns = Find(doc, "namespace")) {
    if (!ns->IsString()) {
      return Status::InvalidArgument(
          fmt::format("namespace is a {}, expected a string", TypeName(*ns)));
    }
    out->namespace_.assign(ns->GetString(), ns->GetStringLength());
  }
  for (std::string_view field : {"metadata", "metaPatch"}) {
    const Json* m = Find(doc, field);
    if (m == nullptr) continue;
    if (!m->IsObject()) {
      return Status::InvalidArgument(
          fmt::format("{} is a {}, expected an object", field, TypeName(*m)));
    }
    for (std::string_view key : {"labels", "annotations"}) {
      if (Status s = CheckStringMap(*m, key, field); !s.ok()) return s;
    }
  }
  for (std::string_view field :
       {"gameServerSelectors", "preferredGameServerSelectors", "priorities"}) {
    const Json* v = Find(doc, field);
    if (v != nullptr && !v->IsArray()) {
      return Status::InvalidArgument(
          fmt::format("{} is a {}, expected an array", field, TypeName(*v)));
    }
  }
  for (std::string_view field :
       {"requiredGameServerSelector", "multiClusterSetting", "counters", "lists"}) {
    const Json* v = Find(doc, field);
    if (v != nullptr && !v->IsObject()) {
      return Status::InvalidArgument(
          fmt::format("{} is a {}, expected an object", field, TypeName(*v)));
    }
  }
  // The deadline annotation: metadata (metaPatch is the deprecated spelling of the same).
  for (std::string_view field : {"metadata", "metaPatch"}) {
    const Json* m = Find(doc, field);
    const Json* ann = m ? Find(*m, "annotations") : nullptr;
    if (ann == nullptr) continue;
    if (const Json* d = Find(*ann, kDeadlineAnnotation)) {
      std::chrono::nanoseconds value{};
      // Bounded by the caller against its own maximum; here only the syntax is checked.
      Status s = ParseDeadline({d->GetString(), d->GetStringLength()},
                               fmt::format("{}.annotations[\"{}\"]", field, kDeadlineAnnotation),
                               std::chrono::hours(24 * 365), &value);
      if (!s.ok()) return s;
      out->deadline = value;
      break;
    }
  }
  return Status::Ok();
}

Status ParseAllocationResponse(std::string_view body, AllocationResponse* out) {
  rapidjson::Document doc;
  if (Status s = ParseJson(body, "the allocator's AllocationResponse", &doc); !s.ok()) return s;
  *out = AllocationResponse{};
  out->game_server_name = std::string(StringOr(&doc, "gameServerName"));
  if (out->game_server_name.empty()) {
    return Status::InvalidArgument("the allocator's AllocationResponse has no gameServerName");
  }
  const Json* meta = Find(doc, "metadata");
  const Json* ann = (meta && meta->IsObject()) ? Find(*meta, "annotations") : nullptr;
  const Json* labels = (meta && meta->IsObject()) ? Find(*meta, "labels") : nullptr;
  out->source = std::string(StringOr(&doc, "source"));
  out->remote = !out->source.empty() && out->source != kLocalSource;
  out->last_allocated = std::string(StringOr(ann, keys::kLastAllocated));
  out->gated = StringOr(labels, keys::kEnabledLabel) == "true";
  return Status::Ok();
}

Status RefreshMetadata(std::string_view response_body, const policy::GameServerView& gameserver,
                       std::string* out) {
  rapidjson::Document doc;
  if (Status s = ParseJson(response_body, "the allocator's AllocationResponse", &doc); !s.ok()) {
    return s;
  }
  auto& a = doc.GetAllocator();
  Json new_labels, new_ann;
  CopyMap(gameserver.labels, &new_labels, a);
  CopyMap(gameserver.annotations, &new_ann, a);
  auto meta_it = doc.FindMember("metadata");
  if (meta_it == doc.MemberEnd() || !meta_it->value.IsObject()) {
    Json meta(rapidjson::kObjectType);
    meta.AddMember("labels", new_labels, a);
    meta.AddMember("annotations", new_ann, a);
    if (meta_it == doc.MemberEnd()) {
      doc.AddMember("metadata", meta, a);
    } else {
      meta_it->value = meta;
    }
  } else {
    Json& meta = meta_it->value;
    auto set = [&](const char* key, Json& value) {
      auto it = meta.FindMember(key);
      if (it == meta.MemberEnd()) {
        meta.AddMember(rapidjson::StringRef(key), value, a);
      } else {
        it->value = value;
      }
    };
    set("labels", new_labels);
    set("annotations", new_ann);
  }
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  doc.Accept(w);
  out->assign(buf.GetString(), buf.GetSize());
  return Status::Ok();
}

std::string ErrorBody(GrpcCode code, std::string_view message) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("code");
  w.Int(static_cast<int>(code));
  w.Key("message");
  w.String(message.data(), static_cast<rapidjson::SizeType>(message.size()));
  w.Key("details");
  w.StartArray();
  w.EndArray();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

int HttpStatusOf(GrpcCode code) {
  switch (code) {
    case GrpcCode::kOk:
      return 200;
    case GrpcCode::kInvalidArgument:
      return 400;
    case GrpcCode::kDeadlineExceeded:
      return 504;
    case GrpcCode::kNotFound:
      return 404;
    case GrpcCode::kResourceExhausted:
      return 429;
    case GrpcCode::kAborted:
      return 409;
    case GrpcCode::kUnimplemented:
      return 501;
    case GrpcCode::kInternal:
      return 500;
    case GrpcCode::kUnavailable:
      return 503;
  }
  return 500;
}

std::string ErrorMessageOf(std::string_view body) {
  rapidjson::Document doc;
  if (json::FirstTooDeep(body, kMaxNestingDepth)) return std::string(body);
  doc.Parse(body.data(), body.size());
  if (!doc.HasParseError() && doc.IsObject()) {
    std::string_view m = StringOr(&doc, "message");
    if (!m.empty()) return std::string(m);
  }
  return std::string(body);
}

int ErrorCodeOf(std::string_view body) {
  if (json::FirstTooDeep(body, kMaxNestingDepth)) return -1;
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject()) return -1;
  auto it = doc.FindMember("code");
  if (it == doc.MemberEnd() || !it->value.IsInt()) return -1;
  return it->value.GetInt();
}

}  // namespace aw::gateway
