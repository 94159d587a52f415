#include "admission/json_view.h"

#include <fmt/format.h>

#include "admission/keys.h"

namespace aw::admission {
namespace {

rapidjson::Value::StringRefType Ref(std::string_view s) {
  return rapidjson::StringRef(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

[[noreturn]] void WrongType(std::string_view path, std::string_view key, const Json& v,
                            std::string_view expected) {
  throw BadRequest(fmt::format("{}.{} is {}, expected {}", path, key, JsonTypeName(v), expected));
}

}  // namespace

std::string_view JsonTypeName(const Json& v) {
  switch (v.GetType()) {
    case rapidjson::kNullType: return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType: return "a boolean";
    case rapidjson::kObjectType: return "an object";
    case rapidjson::kArrayType: return "an array";
    case rapidjson::kStringType: return "a string";
    case rapidjson::kNumberType: return "a number";
  }
  return "unknown";
}

const Json* Member(const Json& parent, std::string_view key) {
  auto it = parent.FindMember(Ref(key));
  if (it == parent.MemberEnd() || it->value.IsNull()) return nullptr;
  return &it->value;
}

const Json* OptObject(const Json& parent, std::string_view key, std::string_view path) {
  const Json* v = Member(parent, key);
  if (v && !v->IsObject()) WrongType(path, key, *v, "an object");
  return v;
}

std::optional<std::string_view> OptString(const Json& parent, std::string_view key,
                                          std::string_view path) {
  const Json* v = Member(parent, key);
  if (!v) return std::nullopt;
  if (!v->IsString()) WrongType(path, key, *v, "a string");
  return std::string_view(v->GetString(), v->GetStringLength());
}

std::optional<bool> OptBool(const Json& parent, std::string_view key, std::string_view path) {
  const Json* v = Member(parent, key);
  if (!v) return std::nullopt;
  if (!v->IsBool()) WrongType(path, key, *v, "a boolean");
  return v->GetBool();
}

StringMap::StringMap(const Json* obj, std::string_view path) : obj_(obj) {
  if (!obj_) return;
  if (!obj_->IsObject()) {
    throw BadRequest(fmt::format("{} is {}, expected an object", path, JsonTypeName(*obj_)));
  }
  for (auto it = obj_->MemberBegin(); it != obj_->MemberEnd(); ++it) {
    if (!it->value.IsString()) {
      throw BadRequest(fmt::format("{}[\"{}\"] is {}, expected a string", path,
                                   std::string_view(it->name.GetString(),
                                                    std::min<size_t>(it->name.GetStringLength(), 100)),
                                   JsonTypeName(it->value)));
    }
  }
}

std::optional<std::string_view> StringMap::Get(std::string_view key) const {
  if (!obj_) return std::nullopt;
  auto it = obj_->FindMember(Ref(key));
  if (it == obj_->MemberEnd()) return std::nullopt;
  return std::string_view(it->value.GetString(), it->value.GetStringLength());
}

MetaView ReadMeta(const Json* meta, const std::string& path) {
  MetaView m;
  if (!meta) return m;
  if (!meta->IsObject()) {
    throw BadRequest(fmt::format("{} is {}, expected an object", path, JsonTypeName(*meta)));
  }
  m.present = true;
  m.name = OptString(*meta, "name", path).value_or("");
  m.generate_name = OptString(*meta, "generateName", path).value_or("");
  m.namespace_ = OptString(*meta, "namespace", path).value_or("");
  m.deleting = OptString(*meta, "deletionTimestamp", path).has_value();
  const Json* labels = Member(*meta, "labels");
  m.labels = StringMap(labels, path + ".labels");
  const Json* annotations = Member(*meta, "annotations");
  m.annotations = StringMap(annotations, path + ".annotations");
  return m;
}

bool GameServerView::OptedIn() const {
  auto v = Label(keys::kEnabledLabel);
  return v && *v == "true";
}

GameServerView ReadGameServer(const Json* obj, const std::string& path) {
  GameServerView g;
  if (!obj) return g;
  if (!obj->IsObject()) {
    throw BadRequest(fmt::format("{} is {}, expected an object", path, JsonTypeName(*obj)));
  }
  g.present = true;
  g.json = obj;
  const Json* meta = Member(*obj, "metadata");
  if (!meta) throw BadRequest(fmt::format("{}.metadata is missing", path));
  g.meta = ReadMeta(meta, path + ".metadata");
  const Json* status = OptObject(*obj, "status", path);
  if (status) {
    g.has_status = true;
    auto st = OptString(*status, "state", path + ".status");
    if (st) {
      g.has_state = true;
      g.state = *st;
    }
  }
  return g;
}

std::optional<std::vector<std::string_view>> PortNames(const Json* spec, const std::string& path) {
  if (!spec) return std::nullopt;
  if (!spec->IsObject()) {
    throw BadRequest(fmt::format("{} is {}, expected an object", path, JsonTypeName(*spec)));
  }
  const Json* ports = Member(*spec, "ports");
  if (!ports) return std::nullopt;
  if (!ports->IsArray()) {
    throw BadRequest(fmt::format("{}.ports is {}, expected an array", path, JsonTypeName(*ports)));
  }
  std::vector<std::string_view> names;
  rapidjson::SizeType i = 0;
  for (const Json& p : ports->GetArray()) {
    std::string item = fmt::format("{}.ports[{}]", path, i++);
    if (!p.IsObject()) {
      throw BadRequest(fmt::format("{} is {}, expected an object", item, JsonTypeName(p)));
    }
    if (auto name = OptString(p, "name", item)) names.push_back(*name);
  }
  return names;
}

}  // namespace aw::admission
