#include "policy/gameserver.h"

#include <fmt/format.h>

#include <algorithm>

#include "contract/keys.h"
#include "util/time_format.h"

namespace aw::policy {
namespace {

rapidjson::Value::StringRefType Ref(std::string_view s) {
  return rapidjson::StringRef(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

std::string_view View(const Json& v) { return {v.GetString(), v.GetStringLength()}; }

[[noreturn]] void WrongType(std::string_view path, std::string_view key, const Json& v,
                            std::string_view expected) {
  throw BadRequest(fmt::format("{}.{} is {}, expected {}", path, key, JsonTypeName(v), expected));
}

[[noreturn]] void NotAnObject(std::string_view path, const Json& v) {
  throw BadRequest(fmt::format("{} is {}, expected an object", path, JsonTypeName(v)));
}

// A string member: kStrict throws on another type, kLenient yields "".
std::string StringField(const Json& parent, std::string_view key, std::string_view path,
                        Parse mode) {
  if (mode == Parse::kStrict) return std::string(OptString(parent, key, path).value_or(""));
  const Json* v = Member(parent, key);
  return v && v->IsString() ? std::string(View(*v)) : std::string();
}

}  // namespace

std::string_view JsonTypeName(const Json& v) {
  switch (v.GetType()) {
    case rapidjson::kNullType:
      return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType:
      return "a boolean";
    case rapidjson::kObjectType:
      return "an object";
    case rapidjson::kArrayType:
      return "an array";
    case rapidjson::kStringType:
      return "a string";
    case rapidjson::kNumberType:
      return "a number";
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
  return View(*v);
}

std::optional<bool> OptBool(const Json& parent, std::string_view key, std::string_view path) {
  const Json* v = Member(parent, key);
  if (!v) return std::nullopt;
  if (!v->IsBool()) WrongType(path, key, *v, "a boolean");
  return v->GetBool();
}

StringMap::StringMap(const Json* obj, std::string_view path, Parse mode) {
  if (!obj) return;
  if (!obj->IsObject()) {
    if (mode == Parse::kStrict) NotAnObject(path, *obj);
    return;
  }
  present_ = true;
  for (auto it = obj->MemberBegin(); it != obj->MemberEnd(); ++it) {
    if (!it->value.IsString()) {
      if (mode == Parse::kLenient) continue;
      throw BadRequest(fmt::format(
          "{}[\"{}\"] is {}, expected a string", path,
          std::string_view(it->name.GetString(), std::min<size_t>(it->name.GetStringLength(), 100)),
          JsonTypeName(it->value)));
    }
    // A repeated key keeps its first value, like rapidjson's FindMember (admission refuses
    // repeated keys before it gets here).
    entries_.emplace(std::string(View(it->name)), std::string(View(it->value)));
  }
}

std::optional<std::string_view> StringMap::Get(std::string_view key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return std::string_view(it->second);
}

std::string& StringMap::operator[](const std::string& key) {
  present_ = true;
  return entries_[key];
}

bool ObjectMeta::OptedIn() const {
  auto v = Label(keys::kEnabledLabel);
  return v && *v == "true";
}

std::string ObjectName(const ObjectMeta& meta, std::string_view fallback_namespace,
                       std::string_view fallback_name) {
  std::string_view ns = meta.namespace_.empty() ? fallback_namespace : meta.namespace_;
  std::string_view name = !meta.name.empty()       ? std::string_view(meta.name)
                          : !fallback_name.empty() ? fallback_name
                                                   : std::string_view(meta.generate_name);
  return fmt::format("{}/{}", ns, name);
}

std::optional<std::string_view> FreshLastAllocated(const ObjectMeta& old_gs,
                                                   const ObjectMeta& new_gs) {
  auto n = new_gs.Annotation(keys::kLastAllocated);
  if (!n || n->empty()) return std::nullopt;
  auto o = old_gs.Annotation(keys::kLastAllocated);
  if (o && *o == *n) return std::nullopt;
  return n;
}

ObjectMeta ReadMeta(const Json* meta, const std::string& path, Parse mode) {
  ObjectMeta m;
  if (!meta) return m;
  if (!meta->IsObject()) {
    if (mode == Parse::kStrict) NotAnObject(path, *meta);
    return m;
  }
  m.present = true;
  m.name = StringField(*meta, "name", path, mode);
  m.generate_name = StringField(*meta, "generateName", path, mode);
  m.namespace_ = StringField(*meta, "namespace", path, mode);
  m.uid = StringField(*meta, "uid", path, Parse::kLenient);
  m.resource_version = StringField(*meta, "resourceVersion", path, Parse::kLenient);
  m.deleting = mode == Parse::kStrict ? OptString(*meta, "deletionTimestamp", path).has_value()
                                      : Member(*meta, "deletionTimestamp") != nullptr;
  m.labels = StringMap(Member(*meta, "labels"), path + ".labels", mode);
  m.annotations = StringMap(Member(*meta, "annotations"), path + ".annotations", mode);
  return m;
}

GameServerView ParseGameServer(const Json* obj, const std::string& path, Parse mode) {
  GameServerView g;
  if (!obj) return g;
  if (!obj->IsObject()) {
    if (mode == Parse::kStrict) NotAnObject(path, *obj);
    return g;
  }
  const Json* meta = Member(*obj, "metadata");
  if (!meta && mode == Parse::kStrict)
    throw BadRequest(fmt::format("{}.metadata is missing", path));
  static_cast<ObjectMeta&>(g) = ReadMeta(meta, path + ".metadata", mode);
  g.present = true;
  const Json* status = Member(*obj, "status");
  if (status && !status->IsObject()) {
    if (mode == Parse::kStrict) WrongType(path, "status", *status, "an object");
    status = nullptr;
  }
  if (status) {
    g.state = StringField(*status, "state", path + ".status", mode);
    g.address = StringField(*status, "address", path + ".status", Parse::kLenient);
    if (const Json* ports = Member(*status, "ports"); ports && ports->IsArray()) {
      for (const Json& p : ports->GetArray()) {
        if (!p.IsObject()) {
          g.ports.push_back({});
          continue;
        }
        PortView pv;
        pv.name = StringField(p, "name", "", Parse::kLenient);
        const Json* num = Member(p, "port");
        if (num && num->IsInt()) pv.port = num->GetInt();
        g.ports.push_back(std::move(pv));
      }
    }
  }
  if (auto a = g.Annotation(keys::kAllocation)) g.allocation = std::string(*a);
  if (auto s = g.Annotation(keys::kSince)) {
    if (auto t = util::ParseRfc3339(*s))
      g.since = std::chrono::time_point_cast<Clock::duration>(*t);
  }
  return g;
}

GameServerView ParseGameServer(const Json& obj) {
  return ParseGameServer(&obj, "object", Parse::kLenient);
}

std::optional<std::vector<std::string_view>> PortNames(const Json* spec, const std::string& path) {
  if (!spec) return std::nullopt;
  if (!spec->IsObject()) NotAnObject(path, *spec);
  const Json* ports = Member(*spec, "ports");
  if (!ports) return std::nullopt;
  if (!ports->IsArray()) {
    throw BadRequest(fmt::format("{}.ports is {}, expected an array", path, JsonTypeName(*ports)));
  }
  std::vector<std::string_view> names;
  rapidjson::SizeType i = 0;
  for (const Json& p : ports->GetArray()) {
    std::string item = fmt::format("{}.ports[{}]", path, i++);
    if (!p.IsObject()) NotAnObject(item, p);
    if (auto name = OptString(p, "name", item)) names.push_back(*name);
  }
  return names;
}

}  // namespace aw::policy
