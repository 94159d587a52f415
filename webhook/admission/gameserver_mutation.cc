// /mutate/gameservers: the Allocating gate (DESIGN.md section 3, rows 1-5).
#include <fmt/format.h>

#include "admission/decisions.h"
#include "admission/gate_config.h"
#include "admission/json_patch.h"
#include "admission/keys.h"
#include "util/time_format.h"

namespace aw::admission {
namespace {

constexpr std::string_view kAnnotationsPath = "/metadata/annotations";

std::string ObjectName(const ReviewRequest& req, const GameServerView& gs) {
  std::string_view ns = gs.meta.namespace_.empty() ? req.namespace_ : gs.meta.namespace_;
  std::string_view name = gs.meta.name.empty() ? req.name : gs.meta.name;
  return fmt::format("{}/{}", ns, name);
}

// Annotation edits that put an object entering Allocating (from any other state) into a clean
// new cycle: a fresh since (unless the writer already supplied a new one), the allocation id,
// and no confirmed/outcome left from an earlier cycle. Idempotent: the same oldObject and the
// patched object yield no further edits, because the new since then differs from the old one.
void EnterCycle(const GameServerView& o, const GameServerView& n, const std::string& now,
                MapEdit* ann) {
  auto since_n = n.Annotation(keys::kSince);
  auto since_o = o.Annotation(keys::kSince);
  bool stale = !since_n || (since_o && *since_o == *since_n);
  auto fresh = FreshLastAllocated(o, n);
  if (stale) {
    ann->Set(keys::kSince, now);
    ann->Set(keys::kAllocation, fresh ? *fresh : std::string_view(now));
  } else if (!n.Annotation(keys::kAllocation)) {
    ann->Set(keys::kAllocation, fresh ? *fresh : *since_n);
  }
  ann->Remove(keys::kConfirmed);
  ann->Remove(keys::kOutcome);
}

// Edits for an object that stays Allocating: restore since/allocation if someone dropped them
// (from the old object when it had them), never touching the cycle's identity otherwise.
void StayInCycle(const GameServerView& o, const GameServerView& n, const std::string& now,
                 MapEdit* ann) {
  if (!n.Annotation(keys::kSince)) {
    auto since_o = o.Annotation(keys::kSince);
    ann->Set(keys::kSince, since_o ? *since_o : std::string_view(now));
  }
  if (!n.Annotation(keys::kAllocation)) {
    auto alloc_o = o.Annotation(keys::kAllocation);
    auto fresh = FreshLastAllocated(o, n);
    std::string_view since = *ann->Get(keys::kSince);
    ann->Set(keys::kAllocation, alloc_o ? *alloc_o : fresh ? *fresh : since);
  }
}

std::string FailOpenWarning(const std::string& name) {
  return fmt::format(
      "allocating-webhook: the GameServer CRD does not accept state Allocating; {} became "
      "Allocated without the readiness gate (fail open)",
      name);
}

Decision Finish(Decision d, const MapEdit& ann, std::optional<std::string_view> new_state) {
  JsonPatch patch;
  if (new_state) patch.ReplaceString("/status/state", std::string(*new_state));
  ann.AppendTo(&patch);
  if (!patch.empty()) d.patch = patch.ToJson();
  return d;
}

}  // namespace

const std::vector<std::string_view>& OwnedAnnotationKeys() {
  static const std::vector<std::string_view> k = {keys::kSince, keys::kAllocation,
                                                  keys::kConfirmed, keys::kOutcome};
  return k;
}

std::optional<std::string_view> FreshLastAllocated(const GameServerView& old_gs,
                                                   const GameServerView& new_gs) {
  auto n = new_gs.Annotation(keys::kLastAllocated);
  if (!n || n->empty()) return std::nullopt;
  auto o = old_gs.Annotation(keys::kLastAllocated);
  if (o && *o == *n) return std::nullopt;
  return n;
}

Decision MutateGameServer(const ReviewRequest& req, const Context& ctx) {
  if (req.operation != "UPDATE") {
    return Decision::Allow(fmt::format("operation {} is not gated", req.operation));
  }
  if (!req.object) throw BadRequest("request.object is missing (required for UPDATE)");
  if (!req.old_object) throw BadRequest("request.oldObject is missing (required for UPDATE)");
  GameServerView n = ReadGameServer(req.object, "request.object");
  GameServerView o = ReadGameServer(req.old_object, "request.oldObject");

  // Row 1: opt-in. The old object counts too, so that removing the label in the very update
  // that allocates cannot bypass the gate.
  if (!n.OptedIn() && !o.OptedIn()) return Decision::Allow("not opted in");

  const std::string name = ObjectName(req, n);
  const std::string_view os = o.state;
  const std::string_view ns = n.state;
  const bool trusted = ctx.policy.IsTrusted(std::string(req.username));
  MapEdit ann(n.meta.annotations, std::string(kAnnotationsPath));

  if (ns == keys::kStateAllocated) {
    if (os == keys::kStateAllocated) {
      // Re-allocation (or any update) of a server that is already Allocated: it is playable.
      return Decision::Allow("already Allocated");
    }
    std::string why;
    if (os == keys::kStateAllocating) {
      // Row 3: promotion.
      auto confirmed = n.Annotation(keys::kConfirmed);
      auto allocation = n.Annotation(keys::kAllocation);
      auto outcome = n.Annotation(keys::kOutcome);
      if (trusted && confirmed && !confirmed->empty() && allocation && *confirmed == *allocation) {
        return Decision::Allow("promotion by a trusted identity with confirmed == allocation");
      }
      if (trusted && outcome && *outcome == keys::kOutcomeTimedOut) {
        return Decision::Allow("timeout resolution to Allocated by a trusted identity");
      }
      why = trusted ? fmt::format("{} does not equal {}", keys::kConfirmed, keys::kAllocation)
                    : fmt::format("user \"{}\" is not trusted to promote", req.username);
    } else {
      why = "new allocation";
    }
    // Rows 2 and 3.
    if (!ctx.crd_accepts_allocating) {
      Decision d = Decision::Allow("fail open: CRD does not accept Allocating (" + why + ")");
      d.fail_open = true;
      d.warnings.push_back(FailOpenWarning(name));
      return d;
    }
    // Invalid configuration values fall back to defaults here; the validating webhook reports
    // them.
    const GateConfig cfg = ParseGateConfig(
                               [&n](std::string_view k) { return n.Annotation(k); }, ctx.policy)
                               .config;
    if (cfg.mode == GateMode::kReject) {
      std::string msg =
          os == keys::kStateAllocating
              ? fmt::format(
                    "GameServer {} is Allocating: only the resolver promotes it to Allocated, once "
                    "readiness is confirmed ({}: reject; {})",
                    name, keys::kMode, why)
              : fmt::format(
                    "GameServer {} may not become Allocated before it is confirmed playable ({}: "
                    "reject); move it to Allocating and let the resolver promote it",
                    name, keys::kMode);
      Decision d = Decision::Deny(403, "Forbidden", msg);
      d.reason = "reject mode: " + why;
      return d;
    }
    const std::string now = util::FormatRfc3339Nano(ctx.now);
    if (os == keys::kStateAllocating) {
      StayInCycle(o, n, now, &ann);
    } else {
      EnterCycle(o, n, now, &ann);
    }
    Decision d = Decision::Allow("rewritten to Allocating: " + why);
    return Finish(std::move(d), ann, keys::kStateAllocating);
  }

  if (ns == keys::kStateAllocating) {
    // Row 4 (entering directly) or staying Allocating.
    const std::string now = util::FormatRfc3339Nano(ctx.now);
    if (os == keys::kStateAllocating) {
      StayInCycle(o, n, now, &ann);
    } else {
      EnterCycle(o, n, now, &ann);
    }
    return Finish(Decision::Allow("Allocating"), ann, std::nullopt);
  }

  // Row 5: leaving the cycle. Only the transition cleans up: what a trusted identity (the
  // resolver) leaves on a server it moves out, e.g. outcome: TimedOut on an Unhealthy server,
  // stays visible afterwards; leftovers on a server outside the cycle are harmless, because
  // entering a new cycle replaces a stale since and drops confirmed/outcome.
  if (os != keys::kStateAllocating && os != keys::kStateAllocated) {
    return Decision::Allow("outside the allocation cycle");
  }
  if (trusted) return Decision::Allow("trusted identity leaving the cycle");
  for (std::string_view k : OwnedAnnotationKeys()) ann.Remove(k);
  Decision d = Finish(Decision::Allow("outside the allocation cycle"), ann, std::nullopt);
  if (!d.patch.empty()) d.reason = "left the allocation cycle: owned annotations removed";
  return d;
}

}  // namespace aw::admission
