#include "policy/config.h"

#include <fmt/format.h>

#include "contract/keys.h"
#include "util/duration.h"
#include "util/text.h"

namespace aw::policy {
namespace {

using util::EqualsIgnoreCase;

// Quotes a user value for messages, truncating very long ones.
std::string Quote(std::string_view v) {
  std::string s = util::Clip(v, 100);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string BadValue(std::string_view key, std::string_view value, std::string_view why) {
  return fmt::format("{}: {} {}", key, Quote(value), why);
}

void ParseBoundedDuration(const AnnotationLookup& lookup, std::string_view key,
                          std::chrono::nanoseconds min, std::chrono::nanoseconds max,
                          std::chrono::nanoseconds* out, GateConfigResult* r) {
  auto v = lookup(key);
  if (!v) return;
  auto d = util::ParseDuration(*v);
  if (!d) {
    r->error_keys.emplace_back(key);
    r->errors.push_back(BadValue(key, *v, "is not a duration (e.g. 30s, 1m30s)"));
    return;
  }
  if (*d < min || *d > max) {
    r->error_keys.emplace_back(key);
    r->errors.push_back(
        BadValue(key, *v,
                 fmt::format("is out of bounds (must be between {} and {})",
                             util::FormatDuration(min), util::FormatDuration(max))));
    return;
  }
  *out = *d;
}

bool ValidPath(std::string_view p) {
  if (p.empty() || p.front() != '/' || p.size() > 2048) return false;
  for (char c : p) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return false;
  }
  return true;
}

bool ValidPortName(std::string_view p) {
  if (p.empty() || p.size() > 253) return false;
  for (char c : p) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return false;
  }
  return true;
}

}  // namespace

std::string_view OnTimeoutName(OnTimeout v) {
  switch (v) {
    case OnTimeout::kUnhealthy:
      return "Unhealthy";
    case OnTimeout::kAllocated:
      return "Allocated";
    case OnTimeout::kShutdown:
      return "Shutdown";
  }
  return "Unhealthy";
}

std::string_view GateModeName(GateMode v) { return v == GateMode::kReject ? "reject" : "rewrite"; }

std::string_view OnScaleDownName(OnScaleDown v) {
  return v == OnScaleDown::kHold ? "Hold" : "Shutdown";
}

std::string_view OnUndeliveredName(OnUndelivered v) {
  return v == OnUndelivered::kUnhealthy ? "Unhealthy" : "Shutdown";
}

std::string_view ProbeTypeName(ProbeType v) {
  switch (v) {
    case ProbeType::kHttp:
      return "http";
    case ProbeType::kTcp:
      return "tcp";
    case ProbeType::kUdp:
      return "udp";
  }
  return "http";
}

std::string GateConfigResult::ErrorText() const {
  std::string out;
  for (const auto& e : errors) {
    if (!out.empty()) out += "; ";
    out += e;
  }
  return out;
}

std::string CanNeverConfirmMessage() {
  return fmt::format(
      "{}: \"false\" and no {}: the server could never be confirmed playable and would always "
      "time out; require the readiness annotation or configure a probe",
      keys::kRequireAnnotation, keys::kProbePort);
}

const std::vector<std::string_view>& ConfigAnnotationKeys() {
  static const std::vector<std::string_view> k = {
      keys::kTimeout,       keys::kOnTimeout,         keys::kMode,      keys::kOnScaleDown,
      keys::kOnUndelivered, keys::kRequireAnnotation, keys::kProbePort, keys::kProbeType,
      keys::kProbePath,     keys::kProbePeriod};
  return k;
}

GateConfigResult ParseGateConfig(const AnnotationLookup& lookup, const Policy& policy) {
  GateConfigResult r;
  GateConfig& c = r.config;
  c.timeout = policy.default_timeout;
  c.probe_period = policy.default_probe_period;

  ParseBoundedDuration(lookup, keys::kTimeout, policy.min_timeout, policy.max_timeout, &c.timeout,
                       &r);
  ParseBoundedDuration(lookup, keys::kProbePeriod, policy.min_probe_period, policy.max_probe_period,
                       &c.probe_period, &r);

  if (auto v = lookup(keys::kOnTimeout)) {
    if (EqualsIgnoreCase(*v, "Unhealthy")) {
      c.on_timeout = OnTimeout::kUnhealthy;
    } else if (EqualsIgnoreCase(*v, "Allocated")) {
      c.on_timeout = OnTimeout::kAllocated;
    } else if (EqualsIgnoreCase(*v, "Shutdown")) {
      c.on_timeout = OnTimeout::kShutdown;
    } else {
      r.error_keys.emplace_back(keys::kOnTimeout);
      r.errors.push_back(
          BadValue(keys::kOnTimeout, *v, "is not one of Unhealthy, Allocated, Shutdown"));
    }
  }
  if (auto v = lookup(keys::kMode)) {
    if (EqualsIgnoreCase(*v, "rewrite")) {
      c.mode = GateMode::kRewrite;
    } else if (EqualsIgnoreCase(*v, "reject")) {
      c.mode = GateMode::kReject;
    } else {
      r.error_keys.emplace_back(keys::kMode);
      r.errors.push_back(BadValue(keys::kMode, *v, "is not one of rewrite, reject"));
    }
  }
  if (auto v = lookup(keys::kOnScaleDown)) {
    if (EqualsIgnoreCase(*v, "Shutdown")) {
      c.on_scale_down = OnScaleDown::kShutdown;
    } else if (EqualsIgnoreCase(*v, "Hold")) {
      c.on_scale_down = OnScaleDown::kHold;
    } else {
      r.error_keys.emplace_back(keys::kOnScaleDown);
      r.errors.push_back(BadValue(keys::kOnScaleDown, *v, "is not one of Shutdown, Hold"));
    }
  }
  if (auto v = lookup(keys::kOnUndelivered)) {
    if (EqualsIgnoreCase(*v, "Shutdown")) {
      c.on_undelivered = OnUndelivered::kShutdown;
    } else if (EqualsIgnoreCase(*v, "Unhealthy")) {
      c.on_undelivered = OnUndelivered::kUnhealthy;
    } else {
      r.error_keys.emplace_back(keys::kOnUndelivered);
      r.errors.push_back(BadValue(keys::kOnUndelivered, *v, "is not one of Shutdown, Unhealthy"));
    }
  }
  if (auto v = lookup(keys::kRequireAnnotation)) {
    if (EqualsIgnoreCase(*v, "true")) {
      c.require_annotation = true;
    } else if (EqualsIgnoreCase(*v, "false")) {
      c.require_annotation = false;
    } else {
      r.error_keys.emplace_back(keys::kRequireAnnotation);
      r.errors.push_back(BadValue(keys::kRequireAnnotation, *v, "is not \"true\" or \"false\""));
    }
  }
  bool port_given = false;
  if (auto v = lookup(keys::kProbePort)) {
    port_given = true;
    bool all_digits = !v->empty();
    for (char ch : *v) all_digits = all_digits && ch >= '0' && ch <= '9';
    if (all_digits) {
      int n = 0;
      for (char ch : *v) {
        n = n * 10 + (ch - '0');
        if (n > 65535) break;
      }
      if (n < 1 || n > 65535) {
        r.error_keys.emplace_back(keys::kProbePort);
        r.errors.push_back(BadValue(keys::kProbePort, *v, "is not a port number (1-65535)"));
      } else {
        c.probe_port = ProbePort{"", n};
      }
    } else if (ValidPortName(*v)) {
      c.probe_port = ProbePort{std::string(*v), 0};
    } else {
      r.error_keys.emplace_back(keys::kProbePort);
      r.errors.push_back(BadValue(keys::kProbePort, *v,
                                  "is not a GameServer port name or a port number (1-65535)"));
    }
  }
  bool type_given = false;
  if (auto v = lookup(keys::kProbeType)) {
    type_given = true;
    if (EqualsIgnoreCase(*v, "http")) {
      c.probe_type = ProbeType::kHttp;
    } else if (EqualsIgnoreCase(*v, "tcp")) {
      c.probe_type = ProbeType::kTcp;
    } else if (EqualsIgnoreCase(*v, "udp")) {
      c.probe_type = ProbeType::kUdp;
    } else {
      r.error_keys.emplace_back(keys::kProbeType);
      r.errors.push_back(BadValue(keys::kProbeType, *v, "is not one of http, tcp, udp"));
    }
  }
  bool path_given = false;
  if (auto v = lookup(keys::kProbePath)) {
    path_given = true;
    if (ValidPath(*v)) {
      c.probe_path = std::string(*v);
    } else {
      r.error_keys.emplace_back(keys::kProbePath);
      r.errors.push_back(
          BadValue(keys::kProbePath, *v, "is not an HTTP path (must start with \"/\", no spaces)"));
    }
  }
  bool period_given = lookup(keys::kProbePeriod).has_value();

  if (!port_given) {
    for (auto [given, key] :
         {std::pair{type_given, keys::kProbeType}, std::pair{path_given, keys::kProbePath},
          std::pair{period_given, keys::kProbePeriod}}) {
      if (given) {
        r.warnings.push_back(fmt::format("{} has no effect without {}", key, keys::kProbePort));
      }
    }
  } else if (path_given && c.probe_type != ProbeType::kHttp) {
    r.warnings.push_back(fmt::format("{} has no effect with {}: {}", keys::kProbePath,
                                     keys::kProbeType, ProbeTypeName(c.probe_type)));
  }
  return r;
}

GateConfigResult ParseGateConfig(const StringMap& annotations, const Policy& policy) {
  return ParseGateConfig([&annotations](std::string_view key) { return annotations.Get(key); },
                         policy);
}

}  // namespace aw::policy
