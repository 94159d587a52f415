// GameServerView: the few fields of an agones.dev/v1 GameServer that the resolver reads.
//
// Promise: ParseGameServer is pure and total: any JSON value yields a view (missing or mistyped
// fields are left empty), so a malformed object can never crash the resolver. `since` is parsed
// from allocating.agones.dev/since (RFC 3339) and is empty when absent or unparsable.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <rapidjson/document.h>

namespace aw::resolver {

using Clock = std::chrono::system_clock;
using TimePoint = std::chrono::system_clock::time_point;

struct PortView {
  std::string name;
  int port = 0;
};

struct GameServerView {
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string resource_version;
  std::string state;      // status.state
  bool opted_in = false;  // label allocating.agones.dev/enabled == "true"
  bool deleting = false;  // metadata.deletionTimestamp is set
  bool has_annotations = false;  // metadata.annotations exists as an object
  std::map<std::string, std::string, std::less<>> annotations;
  std::string address;  // status.address
  std::vector<PortView> ports;  // status.ports[].{name,port}

  // Derived for convenience.
  std::string allocation;        // allocating.agones.dev/allocation ("" when absent)
  std::optional<TimePoint> since;  // allocating.agones.dev/since, parsed

  std::string Key() const { return namespace_ + "/" + name; }
  // The annotation value or nullptr.
  const std::string* Annotation(std::string_view key) const;
};

GameServerView ParseGameServer(const rapidjson::Value& gs);

}  // namespace aw::resolver
