#include "kube/core/crd_enum.h"

#include <fmt/format.h>

#include "kube/core/json_text.h"

namespace aw::kube {
namespace {

const rapidjson::Value* Child(const rapidjson::Value* v, const char* key) {
  if (!v || !v->IsObject()) return nullptr;
  auto it = v->FindMember(key);
  return it == v->MemberEnd() ? nullptr : &it->value;
}

std::string JsonString(std::string_view s) {
  rapidjson::Value v(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  return ToJson(v);
}

}  // namespace

std::string EnumPointer(int i) {
  return fmt::format(
      "/spec/versions/{}/schema/openAPIV3Schema/properties/status/properties/state/enum", i);
}

CrdEnumCheck CheckStateEnum(const rapidjson::Value& crd, std::string_view value) {
  CrdEnumCheck out;
  const rapidjson::Value* versions = Child(Child(&crd, "spec"), "versions");
  if (!versions || !versions->IsArray()) {
    out.summary = "not a CustomResourceDefinition with spec.versions";
    return out;
  }
  out.valid = true;
  bool any_served = false;
  bool all_ok = true;
  int i = 0;
  for (const auto& v : versions->GetArray()) {
    VersionEnumState s;
    s.index = i++;
    const rapidjson::Value* name = Child(&v, "name");
    if (name && name->IsString()) s.version = name->GetString();
    const rapidjson::Value* served = Child(&v, "served");
    s.served = served && served->IsBool() && served->GetBool();
    const rapidjson::Value* state = Child(
        Child(Child(Child(Child(Child(&v, "schema"), "openAPIV3Schema"), "properties"), "status"),
              "properties"),
        "state");
    const rapidjson::Value* en = Child(state, "enum");
    if (en && en->IsArray()) {
      s.has_enum = true;
      s.enum_json = ToJson(*en);
      for (const auto& e : en->GetArray()) {
        if (e.IsString() && std::string_view(e.GetString(), e.GetStringLength()) == value) {
          s.lists_value = true;
        }
      }
    }
    if (s.served) {
      any_served = true;
      bool ok = !s.has_enum || s.lists_value;
      if (!ok) all_ok = false;
      if (!out.summary.empty()) out.summary += ", ";
      out.summary += fmt::format("{}: {}", s.version,
                                 !s.has_enum ? "no enum"
                                             : (s.lists_value ? "lists " + std::string(value)
                                                              : "missing " + std::string(value)));
    }
    out.versions.push_back(std::move(s));
  }
  out.accepts = any_served && all_ok;
  if (!any_served) out.summary = "no served version";
  return out;
}

std::string BuildEnumPatch(const CrdEnumCheck& check, std::string_view value) {
  std::string ops;
  for (const auto& s : check.versions) {
    if (!s.served || !s.has_enum || s.lists_value) continue;
    std::string ptr = EnumPointer(s.index);
    if (!ops.empty()) ops += ",";
    ops += fmt::format(
        R"({{"op":"test","path":"{}","value":{}}},{{"op":"add","path":"{}/-","value":{}}})", ptr,
        s.enum_json, ptr, JsonString(value));
  }
  if (ops.empty()) return {};
  return "[" + ops + "]";
}

}  // namespace aw::kube
