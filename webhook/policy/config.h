// GateConfig: the per-GameServer configuration of the Allocating gate, parsed from the
// `allocating.agones.dev/*` annotations (docs/design.md, "The contract"), with defaults and bounds
// from Policy.
//
// Promise: ParseGateConfig never throws and always returns a complete config: every field that is
// absent or invalid holds its default, and each invalid value adds one error that names the key
// and the bad value, e.g.
//   allocating.agones.dev/timeout: "90x" is not a duration (e.g. 30s, 1m30s)
// Warnings describe settings that are valid but have no effect. CanNeverConfirm() is true when the
// readiness annotation is not required and no probe is configured: such a server can only time out.
// Enumerated values (mode, on-timeout, on-scale-down, probe-type, require-annotation) are matched
// case-insensitively. Shared by the admission webhook and the resolver; pure, thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/gameserver.h"
#include "policy/policy.h"

namespace aw::policy {

enum class OnTimeout { kUnhealthy, kAllocated, kShutdown };
enum class GateMode { kRewrite, kReject };
// What the Agones controller's Shutdown of an Allocating server does (scale-down, rolling update).
enum class OnScaleDown { kShutdown, kHold };
enum class ProbeType { kHttp, kTcp, kUdp };
// What the resolver writes to a gated server the gateway never delivered (keys::kOnUndelivered).
// Both leave the allocation cycle: a kept server would be held for nobody, which is what the
// release exists to prevent.
enum class OnUndelivered { kShutdown, kUnhealthy };

std::string_view OnTimeoutName(OnTimeout v);          // "Unhealthy" | "Allocated" | "Shutdown"
std::string_view GateModeName(GateMode v);            // "rewrite" | "reject"
std::string_view OnScaleDownName(OnScaleDown v);      // "Shutdown" | "Hold"
std::string_view ProbeTypeName(ProbeType v);          // "http" | "tcp" | "udp"
std::string_view OnUndeliveredName(OnUndelivered v);  // "Shutdown" | "Unhealthy"

// The probe-port annotation: a GameServer port name (resolved through status.ports) or a number.
struct ProbePort {
  std::string name;  // set when the annotation is not a number
  int number = 0;    // 1..65535 when the annotation is a number, else 0
  bool IsNumber() const { return number != 0; }
  bool operator==(const ProbePort&) const = default;
};

struct GateConfig {
  std::chrono::nanoseconds timeout{};
  OnTimeout on_timeout = OnTimeout::kUnhealthy;
  GateMode mode = GateMode::kRewrite;
  OnScaleDown on_scale_down = OnScaleDown::kShutdown;
  OnUndelivered on_undelivered = OnUndelivered::kShutdown;
  bool require_annotation = true;
  std::optional<ProbePort> probe_port;  // no probe when absent
  ProbeType probe_type = ProbeType::kHttp;
  std::string probe_path = "/";
  std::chrono::nanoseconds probe_period{};

  // Neither the readiness annotation nor a probe: the server could never be confirmed.
  bool CanNeverConfirm() const { return !require_annotation && !probe_port.has_value(); }
};

struct GateConfigResult {
  GateConfig config;                    // complete: defaults where absent or invalid
  std::vector<std::string> errors;      // one per invalid annotation, naming key and value
  std::vector<std::string> error_keys;  // parallel to errors: the annotation key of each error
  std::vector<std::string> warnings;    // valid but ineffective settings
  bool ok() const { return errors.empty(); }
  // All errors joined with "; " (empty when ok()).
  std::string ErrorText() const;
};

// Looks up an annotation value by key; std::nullopt when absent.
using AnnotationLookup = std::function<std::optional<std::string_view>(std::string_view key)>;

GateConfigResult ParseGateConfig(const AnnotationLookup& lookup, const Policy& policy);
GateConfigResult ParseGateConfig(const StringMap& annotations, const Policy& policy);

// The message used when CanNeverConfirm() (names the keys involved).
std::string CanNeverConfirmMessage();

// Every configuration annotation key, in a stable order (for change detection and docs).
const std::vector<std::string_view>& ConfigAnnotationKeys();

}  // namespace aw::policy
