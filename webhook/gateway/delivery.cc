#include "gateway/delivery.h"

#include <fmt/format.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <array>

#include "contract/keys.h"
#include "policy/json_patch.h"

namespace aw::gateway {
namespace {

using Json = rapidjson::Value;

bool KeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '~' || c == ':' || c == '-';
}

const Json* Member(const Json& obj, std::string_view key) {
  if (!obj.IsObject()) return nullptr;
  auto it = obj.FindMember(rapidjson::StringRef(key.data(), key.size()));
  if (it == obj.MemberEnd() || it->value.IsNull()) return nullptr;
  return &it->value;
}

std::string AnnotationPath(std::string_view key) {
  return "/metadata/annotations/" + policy::EscapePointerToken(key);
}

void SetString(Json* obj, std::string_view key, std::string_view value,
               rapidjson::Document::AllocatorType& a) {
  // An empty view may have a null data(): RapidJSON copies from it with memcpy.
  Json v(value.empty() ? "" : value.data(), static_cast<rapidjson::SizeType>(value.size()), a);
  auto it = obj->FindMember(rapidjson::StringRef(key.data(), key.size()));
  if (it != obj->MemberEnd()) {
    it->value = std::move(v);
    return;
  }
  obj->AddMember(Json(key.data(), static_cast<rapidjson::SizeType>(key.size()), a), std::move(v),
                 a);
}

// obj[key] as an object, created (or replacing null) when absent.
Json& ObjectMember(Json* obj, std::string_view key, rapidjson::Document::AllocatorType& a) {
  auto it = obj->FindMember(rapidjson::StringRef(key.data(), key.size()));
  if (it == obj->MemberEnd()) {
    obj->AddMember(Json(key.data(), static_cast<rapidjson::SizeType>(key.size()), a),
                   Json(rapidjson::kObjectType), a);
    it = obj->FindMember(rapidjson::StringRef(key.data(), key.size()));
  } else if (!it->value.IsObject()) {
    it->value.SetObject();
  }
  return it->value;
}

std::string Write(const Json& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return {buf.GetString(), buf.GetSize()};
}

}  // namespace

Status ValidateIdempotencyKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxIdempotencyKeyLength) {
    return Status::InvalidArgument(fmt::format("{}: must be 1 to {} characters long (got {})",
                                               kIdempotencyKeyHeader, kMaxIdempotencyKeyLength,
                                               key.size()));
  }
  for (size_t i = 0; i < key.size(); ++i) {
    if (!KeyChar(key[i])) {
      return Status::InvalidArgument(fmt::format(
          "{}: character {} is not one of A-Z a-z 0-9 . _ ~ : -", kIdempotencyKeyHeader, i + 1));
    }
  }
  return Status::Ok();
}

Status WithGatewayAnnotations(std::string_view body, std::string_view answer_by,
                              std::string_view request_key, std::string* out) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return Status::InvalidArgument("the AllocationRequest is not a JSON object");
  }
  auto& a = doc.GetAllocator();
  // The caller has checked the shapes (ParseAllocationRequest): metadata is an object or absent.
  Json& metadata = ObjectMember(&doc, "metadata", a);
  Json& annotations = ObjectMember(&metadata, "annotations", a);
  for (std::string_view k : {keys::kAnswerBy, keys::kRequestKey, keys::kDelivered}) {
    if (Member(annotations, k) != nullptr) {
      return Status::InvalidArgument(fmt::format(
          "metadata.annotations[\"{}\"]: written by the allocation gateway, not by a request", k));
    }
  }
  SetString(&annotations, keys::kAnswerBy, answer_by, a);
  if (!request_key.empty()) SetString(&annotations, keys::kRequestKey, request_key, a);
  *out = Write(doc);
  return Status::Ok();
}

bool HoldsRequest(const policy::GameServerView& gs) {
  if (!gs.OptedIn() || gs.deleting) return false;
  if (gs.state != keys::kStateAllocating && gs.state != keys::kStateAllocated) return false;
  return gs.Annotation(keys::kOutcome) != keys::kOutcomeUndelivered;
}

Status AnswerFromGameServer(const policy::GameServerView& gs, std::string* out) {
  if (!gs.present) return Status::InvalidArgument("the GameServer is not a JSON object");
  rapidjson::Document doc(rapidjson::kObjectType);
  auto& a = doc.GetAllocator();
  SetString(&doc, "gameServerName", gs.name, a);
  Json ports(rapidjson::kArrayType);
  for (const policy::PortView& p : gs.ports) {
    Json port(rapidjson::kObjectType);
    SetString(&port, "name", p.name, a);
    port.AddMember("port", p.port, a);
    ports.PushBack(std::move(port), a);
  }
  doc.AddMember("ports", std::move(ports), a);
  SetString(&doc, "address", gs.address, a);
  Json addresses(rapidjson::kArrayType);
  for (const policy::AddressView& e : gs.addresses) {
    Json addr(rapidjson::kObjectType);
    SetString(&addr, "type", e.type, a);
    SetString(&addr, "address", e.address, a);
    addresses.PushBack(std::move(addr), a);
  }
  doc.AddMember("addresses", std::move(addresses), a);
  SetString(&doc, "nodeName", gs.node_name, a);
  SetString(&doc, "source", "local", a);
  Json metadata(rapidjson::kObjectType);
  for (const auto& [k, map] :
       {std::pair<std::string_view, const policy::StringMap*>{"labels", &gs.labels},
        {"annotations", &gs.annotations}}) {
    Json m(rapidjson::kObjectType);
    map->ForEach([&](std::string_view key, std::string_view value) {
      m.AddMember(Json(key.data(), static_cast<rapidjson::SizeType>(key.size()), a),
                  Json(value.data(), static_cast<rapidjson::SizeType>(value.size()), a), a);
    });
    metadata.AddMember(Json(k.data(), static_cast<rapidjson::SizeType>(k.size()), a), std::move(m),
                       a);
  }
  doc.AddMember("metadata", std::move(metadata), a);
  // Counters and lists as agones-allocator answers them: {name: {count, capacity}},
  // {name: {capacity, values}}; the record keeps them as compact JSON text.
  for (const auto& [k, text] :
       {std::pair<std::string_view, const std::string*>{"counters", &gs.counters_json},
        {"lists", &gs.lists_json}}) {
    Json m(rapidjson::kObjectType);
    if (!text->empty()) {
      rapidjson::Document d(&a);
      d.Parse(text->data(), text->size());
      if (!d.HasParseError() && d.IsObject()) m.CopyFrom(d, a);
    }
    doc.AddMember(Json(k.data(), static_cast<rapidjson::SizeType>(k.size()), a), std::move(m), a);
  }
  *out = Write(doc);
  return Status::Ok();
}

std::vector<std::string> DeliveriesOf(std::string_view value) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= value.size()) {
    size_t end = value.find(',', start);
    if (end == std::string_view::npos) end = value.size();
    if (end > start) out.emplace_back(value.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

namespace {

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

std::string DeliveredPatch(std::string_view resource_version, std::string_view current,
                           std::string_view delivered_at) {
  policy::JsonPatch patch;
  patch.Test("/metadata/resourceVersion", std::string(resource_version));
  patch.Test("/status/state", std::string(keys::kStateAllocated));
  std::vector<std::string> list = DeliveriesOf(current);
  list.emplace_back(delivered_at);
  patch.AddString(AnnotationPath(keys::kDelivered), Joined(list));
  return patch.ToJson();
}

std::string UndeliveredPatch(std::string_view resource_version, std::string_view current,
                             std::string_view delivered_at, std::string_view answer_by) {
  std::vector<std::string> list = DeliveriesOf(current);
  std::erase(list, std::string(delivered_at));
  policy::JsonPatch patch;
  patch.Test("/metadata/resourceVersion", std::string(resource_version));
  if (list.empty()) {
    patch.Remove(AnnotationPath(keys::kDelivered));
    patch.AddString(AnnotationPath(keys::kAnswerBy), std::string(answer_by));
  } else {
    patch.AddString(AnnotationPath(keys::kDelivered), Joined(list));
  }
  return patch.ToJson();
}

std::string AnswerByPatch(std::string_view answer_by, std::string_view expected) {
  policy::JsonPatch patch;
  if (!expected.empty()) patch.Test(AnnotationPath(keys::kAnswerBy), std::string(expected));
  patch.AddString(AnnotationPath(keys::kAnswerBy), std::string(answer_by));
  return patch.ToJson();
}

}  // namespace aw::gateway
