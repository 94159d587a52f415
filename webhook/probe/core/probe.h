// Probe vocabulary: what to probe (a Target) and what came back (a Result).
//
// Promise: plain data, no I/O. A Target names one endpoint and one protocol; a Result says whether
// the endpoint answered as "ready" and, when not, a short human-readable reason that ends up in the
// resolver's Warning Event ("which checks failed last").
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace aw::probe {

enum class Type { kHttp, kTcp, kUdp };

// "http" | "tcp" | "udp".
std::string_view TypeName(Type type);

struct Target {
  Type type = Type::kHttp;
  std::string host;  // IPv4/IPv6 literal or a host name (resolved by the prober)
  uint16_t port = 0;
  std::string path = "/";  // HTTP only
  // This probe's timeout; zero means the prober's default (ProberOptions::timeout).
  std::chrono::milliseconds timeout{0};

  // Same endpoint (the timeout is not part of the identity).
  bool operator==(const Target& o) const {
    return type == o.type && host == o.host && port == o.port && path == o.path;
  }
};

// How one probe ended. kSuccess is the only "ready" answer.
enum class Status {
  kSuccess,  // HTTP 2xx, TCP connected, UDP datagram received
  kFailure,  // the endpoint answered "not ready": HTTP non-2xx, connection refused, ICMP
             // unreachable
  kTimeout,  // no answer within the probe timeout
  kError,    // the probe could not be attempted (bad address, resolution failure, local error)
};

// "success" | "failure" | "timeout" | "error" (metric label values).
std::string_view StatusName(Status status);

struct Result {
  Status status = Status::kError;
  std::string detail;  // e.g. "http 503", "connection refused", "timeout after 200ms"

  bool ok() const { return status == Status::kSuccess; }
};

// Called exactly once per probe, on the prober's own thread. Must not block.
using Callback = std::function<void(Result)>;

// "http 127.0.0.1:7777/ready" style description for logs and Events.
std::string Describe(const Target& target);

}  // namespace aw::probe
