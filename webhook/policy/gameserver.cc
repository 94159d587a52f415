#include "policy/gameserver.h"

#include <fmt/format.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>

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

// The object as compact JSON text; "" when absent or not an object.
std::string CompactObject(const Json* v) {
  if (!v || !v->IsObject()) return {};
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v->Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

// What malloc adds to each block it hands out (header and rounding, glibc on 64 bits: about 16).
constexpr size_t kBlockOverhead = 16;

size_t StringBytes(const std::string& s) {
  // Beyond the small-string buffer only.
  return s.capacity() > 15 ? s.capacity() + 1 + kBlockOverhead : 0;
}

template <typename V>
size_t VectorBytes(const V& v) {
  return v.capacity() ? v.capacity() * sizeof(typename V::value_type) + kBlockOverhead : 0;
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

namespace {

// Keys that Agones and this project write on every GameServer: a map points at these instead of
// storing them (sorted; looked up by binary search).
constexpr std::array kStaticKeys = std::to_array<std::string_view>({
    "agones.dev/fleet",
    "agones.dev/gameserverset",
    "agones.dev/last-allocated",
    "agones.dev/ready-container-id",
    "agones.dev/role",
    "agones.dev/sdk-allocating-ready",
    "agones.dev/sdk-gs-session-ready",
    "agones.dev/sdk-version",
    "allocating.agones.dev/allocation",
    "allocating.agones.dev/answer-by",
    "allocating.agones.dev/bypassed",
    "allocating.agones.dev/confirmed",
    "allocating.agones.dev/delivered",
    "allocating.agones.dev/enabled",
    "allocating.agones.dev/gateway-deadline",
    "allocating.agones.dev/mode",
    "allocating.agones.dev/on-scale-down",
    "allocating.agones.dev/on-timeout",
    "allocating.agones.dev/on-undelivered",
    "allocating.agones.dev/outcome",
    "allocating.agones.dev/probe-path",
    "allocating.agones.dev/probe-period",
    "allocating.agones.dev/probe-port",
    "allocating.agones.dev/probe-type",
    "allocating.agones.dev/request-key",
    "allocating.agones.dev/require-annotation",
    "allocating.agones.dev/shutdown-requested",
    "allocating.agones.dev/since",
    "allocating.agones.dev/timeout",
    "cluster-autoscaler.kubernetes.io/safe-to-evict",
    "quilkin.dev/tokens",
});
static_assert(std::is_sorted(kStaticKeys.begin(), kStaticKeys.end()));

std::optional<uint32_t> StaticKey(std::string_view key) {
  auto it = std::lower_bound(kStaticKeys.begin(), kStaticKeys.end(), key);
  if (it == kStaticKeys.end() || *it != key) return std::nullopt;
  return static_cast<uint32_t>(it - kStaticKeys.begin());
}

}  // namespace

std::string_view StringMap::KeyOf(const Entry& e) const {
  if (e.key & kStatic) return kStaticKeys[e.key & ~kStatic];
  return std::string_view(chars() + e.key, e.key_len);
}

void StringMap::Borrow(const char* base,
                       std::span<const std::pair<std::string_view, std::string_view>> items) {
  present_ = true;
  borrowed_ = base;
  chars_.clear();
  entries_.clear();
  entries_.reserve(items.size());
  for (const auto& [k, v] : items) {
    Entry e{};
    e.key_len = static_cast<uint32_t>(k.size());
    if (auto s = StaticKey(k)) {
      e.key = kStatic | *s;
    } else {
      e.key = static_cast<uint32_t>(k.data() - base);
    }
    e.value = static_cast<uint32_t>(v.data() - base);
    e.value_len = static_cast<uint32_t>(v.size());
    entries_.push_back(e);
  }
  auto less = [this](const Entry& a, const Entry& b) { return KeyOf(a) < KeyOf(b); };
  std::sort(entries_.begin(), entries_.end(), less);
}

void StringMap::Clear() {
  present_ = false;
  borrowed_ = nullptr;
  entries_.clear();
  chars_.clear();
}

void StringMap::Assign(const std::vector<std::pair<std::string_view, std::string_view>>& items) {
  present_ = true;
  size_t chars = 0;
  for (const auto& [k, v] : items) chars += (StaticKey(k) ? 0 : k.size()) + v.size();
  if (chars > UINT32_MAX / 2) throw BadRequest("string map larger than 2 GiB");
  std::vector<Entry> entries;
  entries.reserve(items.size());
  std::string buf;
  buf.reserve(chars);
  for (const auto& [k, v] : items) {
    Entry e{};
    if (auto s = StaticKey(k)) {
      e.key = kStatic | *s;
      e.key_len = static_cast<uint32_t>(k.size());
    } else {
      e.key = static_cast<uint32_t>(buf.size());
      e.key_len = static_cast<uint32_t>(k.size());
      buf.append(k);
    }
    e.value = static_cast<uint32_t>(buf.size());
    e.value_len = static_cast<uint32_t>(v.size());
    buf.append(v);
    entries.push_back(e);
  }
  entries_ = std::move(entries);
  chars_ = std::move(buf);
  borrowed_ = nullptr;
}

StringMap::StringMap(const Map& entries) {
  std::vector<std::pair<std::string_view, std::string_view>> items(entries.begin(), entries.end());
  Assign(items);
}

StringMap::StringMap(const Json* obj, std::string_view path, Parse mode) {
  if (!obj) return;
  if (!obj->IsObject()) {
    if (mode == Parse::kStrict) NotAnObject(path, *obj);
    return;
  }
  std::vector<std::pair<std::string_view, std::string_view>> items;
  items.reserve(obj->MemberCount());
  for (auto it = obj->MemberBegin(); it != obj->MemberEnd(); ++it) {
    if (!it->value.IsString()) {
      if (mode == Parse::kLenient) continue;
      throw BadRequest(fmt::format(
          "{}[\"{}\"] is {}, expected a string", path,
          std::string_view(it->name.GetString(), std::min<size_t>(it->name.GetStringLength(), 100)),
          JsonTypeName(it->value)));
    }
    items.emplace_back(View(it->name), View(it->value));
  }
  // A repeated key keeps its first value, like rapidjson's FindMember (admission refuses
  // repeated keys before it gets here): a stable sort keeps the first of equal keys first.
  std::stable_sort(items.begin(), items.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  items.erase(std::unique(items.begin(), items.end(),
                          [](const auto& a, const auto& b) { return a.first == b.first; }),
              items.end());
  Assign(items);
}

std::optional<std::string_view> StringMap::Get(std::string_view key) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), key,
                             [this](const Entry& e, std::string_view k) { return KeyOf(e) < k; });
  if (it == entries_.end() || KeyOf(*it) != key) return std::nullopt;
  return ValueOf(*it);
}

StringMap::Map StringMap::entries() const {
  Map m;
  for (const Entry& e : entries_) m.emplace(std::string(KeyOf(e)), std::string(ValueOf(e)));
  return m;
}

void StringMap::Set(std::string_view key, std::string_view value) {
  // Rebuilt whole: Set is for tests and the rare edit, never the cache's path.
  std::string k(key), v(value);
  std::vector<std::pair<std::string_view, std::string_view>> items;
  items.reserve(entries_.size() + 1);
  bool placed = false;
  for (const Entry& e : entries_) {
    std::string_view ek = KeyOf(e);
    if (!placed && ek >= std::string_view(k)) {
      items.emplace_back(k, v);
      placed = true;
      if (ek == std::string_view(k)) continue;
    }
    items.emplace_back(ek, ValueOf(e));
  }
  if (!placed) items.emplace_back(k, v);
  StringMap next;
  next.Assign(items);
  *this = std::move(next);
}

bool StringMap::operator==(const StringMap& o) const {
  if (present_ != o.present_ || entries_.size() != o.entries_.size()) return false;
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (KeyOf(entries_[i]) != o.KeyOf(o.entries_[i]) ||
        ValueOf(entries_[i]) != o.ValueOf(o.entries_[i]))
      return false;
  }
  return true;
}

void StringMap::Builder::Add(std::string_view key, std::string_view value) {
  // Straight into the map's own layout: no string of its own per entry.
  if (chars_.size() + key.size() + value.size() > UINT32_MAX / 2)
    throw BadRequest("string map larger than 2 GiB");
  Entry e{};
  e.key_len = static_cast<uint32_t>(key.size());
  if (auto s = StaticKey(key)) {
    e.key = kStatic | *s;
  } else {
    e.key = static_cast<uint32_t>(chars_.size());
    chars_.append(key);
  }
  e.value = static_cast<uint32_t>(chars_.size());
  e.value_len = static_cast<uint32_t>(value.size());
  chars_.append(value);
  entries_.push_back(e);
}

StringMap StringMap::Builder::Finish() && {
  StringMap m;
  m.present_ = true;
  m.entries_ = std::move(entries_);
  m.chars_ = std::move(chars_);
  // A stable sort keeps the first of equal keys first; unique then keeps it (first value wins).
  // The characters of a dropped duplicate stay in the buffer: rare, and bounded by the input.
  auto less = [&m](const Entry& a, const Entry& b) { return m.KeyOf(a) < m.KeyOf(b); };
  auto same = [&m](const Entry& a, const Entry& b) { return m.KeyOf(a) == m.KeyOf(b); };
  std::stable_sort(m.entries_.begin(), m.entries_.end(), less);
  m.entries_.erase(std::unique(m.entries_.begin(), m.entries_.end(), same), m.entries_.end());
  m.entries_.shrink_to_fit();
  m.chars_.shrink_to_fit();
  return m;
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
    g.node_name = StringField(*status, "nodeName", path + ".status", Parse::kLenient);
    if (const Json* addrs = Member(*status, "addresses"); addrs && addrs->IsArray()) {
      for (const Json& a : addrs->GetArray()) {
        AddressView av;
        if (a.IsObject()) {
          av.type = StringField(a, "type", "", Parse::kLenient);
          av.address = StringField(a, "address", "", Parse::kLenient);
        }
        g.addresses.push_back(std::move(av));
      }
    }
    g.counters_json = CompactObject(Member(*status, "counters"));
    g.lists_json = CompactObject(Member(*status, "lists"));
  }
  if (auto a = g.Annotation(keys::kAllocation)) g.allocation = std::string(*a);
  if (auto s = g.Annotation(keys::kSince)) {
    if (auto t = util::ParseRfc3339(*s))
      g.since = std::chrono::time_point_cast<Clock::duration>(*t);
  }
  return g;
}

size_t GameServerView::HeapBytes() const {
  size_t n = labels.HeapBytes() + annotations.HeapBytes();
  for (const std::string* s : {&namespace_, &name, &generate_name, &uid, &resource_version, &state,
                               &address, &allocation, &node_name, &counters_json, &lists_json}) {
    n += StringBytes(*s);
  }
  n += VectorBytes(ports);
  for (const PortView& p : ports) n += StringBytes(p.name);
  n += VectorBytes(addresses);
  for (const AddressView& a : addresses) n += StringBytes(a.type) + StringBytes(a.address);
  return n;
}

bool operator==(const ObjectMeta& a, const ObjectMeta& b) {
  return a.present == b.present && a.namespace_ == b.namespace_ && a.name == b.name &&
         a.generate_name == b.generate_name && a.uid == b.uid &&
         a.resource_version == b.resource_version && a.deleting == b.deleting &&
         a.labels == b.labels && a.annotations == b.annotations;
}

bool operator==(const GameServerView& a, const GameServerView& b) {
  return static_cast<const ObjectMeta&>(a) == static_cast<const ObjectMeta&>(b) &&
         a.state == b.state && a.address == b.address && a.ports == b.ports &&
         a.allocation == b.allocation && a.since == b.since && a.node_name == b.node_name &&
         a.addresses == b.addresses && a.counters_json == b.counters_json &&
         a.lists_json == b.lists_json;
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
