// Typed, read-only access to the parts of Kubernetes objects that admission decisions read.
//
// Promise: every accessor checks the JSON type of what it reads and throws BadRequest with the
// JSON path of the offending value ("request.object.metadata.labels is a array, expected an
// object") on a mismatch; nothing here crashes on any input. JSON null is treated like an absent
// field (Kubernetes clients may send null for empty maps). Views borrow from the parsed document
// and must not outlive it.
#pragma once

#include <rapidjson/document.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace aw::admission {

using Json = rapidjson::Value;

// Malformed input: becomes an HTTP 400 with this message.
class BadRequest : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string_view JsonTypeName(const Json& v);

// `parent` must be an object. Returns the member, or nullptr when absent or null.
const Json* Member(const Json& parent, std::string_view key);
// Returns the member if it is an object; nullptr when absent/null; throws on another type.
const Json* OptObject(const Json& parent, std::string_view key, std::string_view path);
std::optional<std::string_view> OptString(const Json& parent, std::string_view key,
                                          std::string_view path);
std::optional<bool> OptBool(const Json& parent, std::string_view key, std::string_view path);

// A map[string]string (labels, annotations); validated at construction.
class StringMap {
 public:
  StringMap() = default;
  // `obj` may be nullptr (absent map). Throws BadRequest if obj is not an object of strings.
  StringMap(const Json* obj, std::string_view path);
  bool present() const { return obj_ != nullptr; }
  std::optional<std::string_view> Get(std::string_view key) const;
  const Json* json() const { return obj_; }
  template <typename F>
  void ForEach(F&& f) const {
    if (!obj_) return;
    for (auto it = obj_->MemberBegin(); it != obj_->MemberEnd(); ++it) {
      f(std::string_view(it->name.GetString(), it->name.GetStringLength()),
        std::string_view(it->value.GetString(), it->value.GetStringLength()));
    }
  }

 private:
  const Json* obj_ = nullptr;
};

// metadata of any object: name, namespace, labels, annotations.
struct MetaView {
  bool present = false;
  std::string_view name;
  std::string_view generate_name;
  std::string_view namespace_;
  bool deleting = false;  // metadata.deletionTimestamp is set
  StringMap labels;
  StringMap annotations;
};
// `meta` may be nullptr. `path` is the JSON path of the metadata object.
MetaView ReadMeta(const Json* meta, const std::string& path);

// A GameServer (or nullptr-backed empty view when absent).
struct GameServerView {
  bool present = false;
  const Json* json = nullptr;
  MetaView meta;
  bool has_status = false;
  bool has_state = false;
  std::string_view state;  // status.state ("" when absent)

  std::optional<std::string_view> Annotation(std::string_view key) const {
    return meta.annotations.Get(key);
  }
  std::optional<std::string_view> Label(std::string_view key) const {
    return meta.labels.Get(key);
  }
  bool OptedIn() const;  // label allocating.agones.dev/enabled == "true"
};
GameServerView ReadGameServer(const Json* obj, const std::string& path);

// The port names of a GameServer spec (`spec` may be nullptr): spec.ports[].name. std::nullopt
// when spec.ports is absent. Throws BadRequest on wrong types.
std::optional<std::vector<std::string_view>> PortNames(const Json* spec, const std::string& path);

}  // namespace aw::admission
