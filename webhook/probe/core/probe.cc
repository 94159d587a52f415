#include "probe/core/probe.h"

namespace aw::probe {

std::string_view TypeName(Type type) {
  switch (type) {
    case Type::kHttp:
      return "http";
    case Type::kTcp:
      return "tcp";
    case Type::kUdp:
      return "udp";
  }
  return "unknown";
}

std::string_view StatusName(Status status) {
  switch (status) {
    case Status::kSuccess:
      return "success";
    case Status::kFailure:
      return "failure";
    case Status::kTimeout:
      return "timeout";
    case Status::kError:
      return "error";
  }
  return "unknown";
}

std::string Describe(const Target& target) {
  std::string host =
      target.host.find(':') != std::string::npos ? "[" + target.host + "]" : target.host;
  std::string out =
      std::string(TypeName(target.type)) + " " + host + ":" + std::to_string(target.port);
  if (target.type == Type::kHttp) out += target.path;
  return out;
}

}  // namespace aw::probe
