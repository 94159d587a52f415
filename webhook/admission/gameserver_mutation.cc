// /mutate/gameservers: the Allocating gate. The rule for each update is looked up in the gate's
// decision table (policy/decision_table.h, docs/design.md "Decision tables"); this file carries out
// the rule's edits.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "admission/decisions.h"
#include "admission/identity.h"
#include "contract/keys.h"
#include "policy/config.h"
#include "policy/decision_table.h"
#include "policy/json_patch.h"
#include "util/text.h"
#include "util/time_format.h"

namespace aw::admission {
namespace {

using policy::BadRequest;
using policy::FreshLastAllocated;
using policy::GameServerView;
using policy::JsonPatch;
using policy::MapEdit;

constexpr std::string_view kAnnotationsPath = "/metadata/annotations";
constexpr std::string_view kLabelsPath = "/metadata/labels";

// The allocation id for a cycle that starts with `since`: agones.dev/last-allocated when this
// update set it, else `since`.
std::string_view AllocationId(const GameServerView& o, const GameServerView& n,
                              std::string_view since) {
  auto fresh = FreshLastAllocated(o, n);
  return fresh ? *fresh : since;
}

// Annotation edits for an allocation (the allocator's or the SDK's write of state Allocated) that
// the webhook turns into a new cycle: `since` is now, the allocation id follows from it, and
// nothing from an earlier cycle or from the allocation's metadata survives. Reinvocation cannot
// see this write again: after the patch the state is Allocating (the path below).
// The allocation gateway's marks (docs/gateway.md, "No server lost") belong to one allocation:
// on entering the cycle, `delivered` goes (the new allocation is not delivered yet), and
// `answer-by`/`request-key` go unless this very write changed them (the allocation's own
// metadata, merged by Agones in the allocation's write); unchanged values are an earlier
// allocation's.
void DropEarlierDeliveryMarks(const GameServerView& o, const GameServerView& n, MapEdit* ann) {
  ann->Remove(keys::kDelivered);
  const auto answer_by = n.Annotation(keys::kAnswerBy);
  if (answer_by && answer_by == o.Annotation(keys::kAnswerBy)) {
    ann->Remove(keys::kAnswerBy);
    ann->Remove(keys::kRequestKey);
  } else if (!answer_by) {
    ann->Remove(keys::kRequestKey);
  }
}

void EnterCycleOnAllocation(const GameServerView& o, const GameServerView& n, std::string_view now,
                            MapEdit* ann) {
  DropEarlierDeliveryMarks(o, n, ann);
  ann->Set(keys::kSince, now);
  ann->Set(keys::kAllocation, AllocationId(o, n, now));
  ann->Remove(keys::kConfirmed);
  ann->Remove(keys::kOutcome);
  ann->Remove(keys::kShutdownRequested);
  ann->Remove(keys::kBypassed);
}

// Annotation edits for a direct write of state Allocating from another state (row 4), which is
// also what the webhook sees when kube-apiserver reinvokes it on its own patched object: a new
// `since` that is an RFC 3339 time is kept (so the decision is idempotent, whatever the clock
// says on reinvocation; the validating webhook bounds how far it may be from now), a stale or
// unreadable one is replaced; the allocation id always follows from `since`; confirmed/outcome
// are dropped.
void EnterCycleDirectly(const GameServerView& o, const GameServerView& n, std::string_view now,
                        MapEdit* ann) {
  DropEarlierDeliveryMarks(o, n, ann);
  auto since_n = n.Annotation(keys::kSince);
  auto since_o = o.Annotation(keys::kSince);
  std::string_view since;
  if (since_n && since_n != since_o && util::ParseRfc3339(*since_n)) {
    since = *since_n;
  } else {
    since = now;
    ann->Set(keys::kSince, since);
  }
  ann->Set(keys::kAllocation, AllocationId(o, n, since));
  ann->Remove(keys::kConfirmed);
  ann->Remove(keys::kOutcome);
  ann->Remove(keys::kShutdownRequested);
  ann->Remove(keys::kBypassed);
}

// Edits for an object that stays Allocating: restore since/allocation if someone dropped them
// (from the old object when it had them), never touching the cycle's identity otherwise.
void StayInCycle(const GameServerView& o, const GameServerView& n, std::string_view now,
                 MapEdit* ann) {
  if (!n.Annotation(keys::kSince)) {
    auto since_o = o.Annotation(keys::kSince);
    ann->Set(keys::kSince, since_o ? *since_o : now);
  }
  if (!n.Annotation(keys::kAllocation)) {
    auto alloc_o = o.Annotation(keys::kAllocation);
    auto fresh = FreshLastAllocated(o, n);
    std::string_view since = *ann->Get(keys::kSince);
    ann->Set(keys::kAllocation, alloc_o ? *alloc_o : fresh ? *fresh : since);
  }
}

// Reverts `key` to the old object's value when the writer changed it.
void Revert(std::string_view key, const GameServerView& o, const GameServerView& n, MapEdit* ann) {
  auto ov = o.Annotation(key);
  if (ov == n.Annotation(key)) return;
  if (ov) {
    ann->Set(key, *ov);
  } else {
    ann->Remove(key);
  }
}

// A write of state Allocated by an identity that is not trusted (the allocator merging an
// allocation's metadata, or the SDK's Allocate()): the project-owned annotations, and the
// readiness annotation unless the writer is the GameServer's own SDK, keep the old object's
// values. The cycle edits that follow may then set since/allocation anew.
void RevertForgedKeys(const GameServerView& o, const GameServerView& n, bool sdk_writer,
                      MapEdit* ann) {
  for (std::string_view k : keys::kOwnedAnnotations) Revert(k, o, n, ann);
  if (!sdk_writer) Revert(keys::kSdkReady, o, n, ann);
}

// The keys whose value the writer changed and this decision overrides with another value: what
// was forged (values the decision itself produces, e.g. on reinvocation, are not).
std::vector<std::string> Overridden(const GameServerView& o, const GameServerView& n,
                                    const MapEdit& ann) {
  std::vector<std::string> out;
  auto check = [&](std::string_view k) {
    auto nv = n.Annotation(k);
    if (nv != o.Annotation(k) && nv != ann.Get(k)) out.emplace_back(k);
  };
  for (std::string_view k : keys::kOwnedAnnotations) check(k);
  check(keys::kSdkReady);
  return out;
}

// A server that is (or stays) Allocating after this write keeps the opt-in label: the resolver
// watches only opted-in servers, and the gate holds a server until it leaves the cycle, whatever
// a later write (an allocation's metadata.labels included) does to the label.
void KeepOptedIn(const GameServerView& n, MapEdit* labels, std::vector<std::string>* neutralised) {
  if (n.OptedIn()) return;
  labels->Set(keys::kEnabledLabel, "true");
  neutralised->emplace_back(keys::kEnabledLabel);
}

// The AdmissionReview warnings for what was neutralised (annotations; the opt-in label).
std::vector<std::string> NeutralisedWarnings(const std::string& name,
                                             const std::vector<std::string>& ks,
                                             std::string_view user) {
  std::string list;
  bool label = false;
  for (const auto& k : ks) {
    if (k == keys::kEnabledLabel) {
      label = true;
    } else {
      list += (list.empty() ? "" : ", ") + k;
    }
  }
  std::vector<std::string> out;
  if (!list.empty()) {
    out.push_back(fmt::format(
        "allocating-webhook: GameServer {}: ignored {} (written only by the webhook, the resolver "
        "and the game server's SDK; user \"{}\" may not set them)",
        name, list, util::Clip(user, 200)));
  }
  if (label) {
    out.push_back(fmt::format(
        "allocating-webhook: GameServer {} is Allocating: the label {} stays \"true\" until it "
        "leaves Allocating",
        name, keys::kEnabledLabel));
  }
  return out;
}

// Policy::IsTrusted without a copy of the username.
bool Listed(const std::vector<std::string>& users, std::string_view user) {
  return !user.empty() && std::find(users.begin(), users.end(), user) != users.end();
}

// IsSdkWriter (identity.h) over the decision's input: whether the username is
// system:serviceaccount:<the GameServer's namespace>:<its pod's service account>, compared piece
// by piece.
bool SdkWriter(const MutateInput& req, const GameServerView& n, const policy::Policy& policy) {
  const std::string_view ns = n.namespace_.empty() ? req.namespace_ : n.namespace_;
  if (req.username.empty() || ns.empty()) return false;
  std::string_view sa = req.object_json != nullptr
                            ? PodServiceAccount(req.object_json, "request.object")
                            : req.service_account;
  if (sa.empty()) sa = policy.sdk_service_account;
  constexpr std::string_view kPrefix = "system:serviceaccount:";
  std::string_view u = req.username;
  if (u.size() != kPrefix.size() + ns.size() + 1 + sa.size()) return false;
  if (u.substr(0, kPrefix.size()) != kPrefix) return false;
  u.remove_prefix(kPrefix.size());
  if (u.substr(0, ns.size()) != ns || u[ns.size()] != ':') return false;
  return u.substr(ns.size() + 1) == sa;
}

std::string FailOpenWarning(const std::string& name) {
  return fmt::format(
      "allocating-webhook: the GameServer CRD does not accept state Allocating; {} became "
      "Allocated without the readiness gate (fail open)",
      name);
}

// The edits of one decision: annotations, labels, and what was neutralised.
struct Edits {
  Edits(const GameServerView& n)
      : ann(n.annotations, kAnnotationsPath), labels(n.labels, kLabelsPath) {}
  MapEdit ann;
  MapEdit labels;
  std::vector<std::string> neutralised;
};

template <typename NameFn>
Decision Finish(Decision d, const Edits& e, std::optional<std::string_view> new_state,
                const GameServerView& o, const GameServerView& n, const NameFn& name,
                std::string_view user) {
  JsonPatch patch;
  if (new_state) patch.ReplaceString("/status/state", *new_state);
  e.labels.AppendTo(&patch);
  e.ann.AppendTo(&patch);
  if (!patch.empty()) d.patch = patch.ToJson();
  d.neutralised = Overridden(o, n, e.ann);
  for (const auto& k : e.neutralised) d.neutralised.push_back(k);
  if (!d.neutralised.empty()) {
    for (auto& w : NeutralisedWarnings(name(), d.neutralised, user)) {
      d.warnings.push_back(std::move(w));
    }
  }
  return d;
}

}  // namespace

Decision MutateNotGated(std::string_view operation) {
  return Decision::Allow(fmt::format("operation {} is not gated", operation));
}

Decision MutateGameServer(const ReviewRequest& req, const Context& ctx) {
  if (req.operation != "UPDATE") return MutateNotGated(req.operation);
  if (!req.object) throw BadRequest("request.object is missing (required for UPDATE)");
  if (!req.old_object) throw BadRequest("request.oldObject is missing (required for UPDATE)");
  GameServerView n = policy::ParseGameServer(req.object, "request.object", policy::Parse::kStrict);
  GameServerView o =
      policy::ParseGameServer(req.old_object, "request.oldObject", policy::Parse::kStrict);
  return MutateGameServer(MutateInput{req.username, req.namespace_, req.name, n, o, req.object, {}},
                          ctx);
}

Decision MutateGameServer(const MutateInput& req, const Context& ctx) {
  const GameServerView& n = req.object;
  const GameServerView& o = req.old_object;
  const bool trusted = Listed(ctx.policy.trusted_users, req.username);
  policy::GateInput in;
  // The old object counts too, so that removing the label in the very update that allocates
  // cannot bypass the gate.
  in.opted_in = n.OptedIn() || o.OptedIn();
  in.old_phase = policy::PhaseOf(o.state);
  in.new_phase = policy::PhaseOf(n.state);
  in.writer = WriterOf(req.username, ctx.policy);
  if (in.opted_in) {
    auto confirmed = n.Annotation(keys::kConfirmed);
    auto allocation = n.Annotation(keys::kAllocation);
    in.confirmed = confirmed && !confirmed->empty() && allocation && *confirmed == *allocation;
    in.timed_out = n.Annotation(keys::kOutcome) == keys::kOutcomeTimedOut;
    in.crd_accepts = ctx.crd_accepts_allocating;
    if (in.new_phase == policy::Phase::kAllocated) {
      // Invalid configuration values fall back to defaults here; the validating webhook reports
      // them.
      in.mode = policy::ParseGateConfig(n.annotations, ctx.policy).config.mode;
    }
    in.deleting = n.deleting;
    in.has_since = n.Annotation(keys::kSince).has_value();
    in.shutdown_requested =
        o.Annotation(keys::kShutdownRequested) || n.Annotation(keys::kShutdownRequested);
    if (in.old_phase == policy::Phase::kAllocating && in.new_phase == policy::Phase::kShutdown) {
      // The old object's setting: the template's choice when the server was allocated (a
      // Shutdown write cannot change what it gets).
      in.hold_scale_down =
          policy::ParseGateConfig(o.annotations, ctx.policy).config.on_scale_down ==
          policy::OnScaleDown::kHold;
    }
  }
  const policy::GateRule& rule = policy::DecideGate(in);
  if (!in.opted_in) return Decision::Allow("not opted in");

  // How the server is named in messages: only a decision with a message or a warning needs it.
  const auto name = [&] { return policy::ObjectName(n, req.namespace_, req.name); };
  const std::string_view os = o.state;
  const std::string_view ns = n.state;
  const std::string_view user = req.username;
  Edits e(n);
  auto finish = [&](Decision d, std::optional<std::string_view> state) {
    return Finish(std::move(d), e, state, o, n, name, user);
  };
  // Whatever the rule, an untrusted write of Allocated (the allocator merging an allocation's
  // metadata, the SDK's Allocate()) never sets the keys it does not own: they are reverted with a
  // warning instead of denying the update, because a denied allocator update leaves the server
  // unallocatable in Agones' allocation cache.
  if (rule.neutralise && !trusted) {
    RevertForgedKeys(o, n, SdkWriter(req, n, ctx.policy), &e.ann);
  }
  // Why a write of Allocated is not let through (rows 1, 2, 3).
  const std::string why =
      os != keys::kStateAllocating ? std::string("new allocation")
      : trusted ? fmt::format("{} does not equal {}", keys::kConfirmed, keys::kAllocation)
                : fmt::format("user \"{}\" is not trusted to promote", user);
  util::Rfc3339Buffer now_text;
  const std::string_view now =
      util::FormatRfc3339To(ctx.now, util::Rfc3339Precision::kNanos, &now_text);
  switch (rule.cycle) {
    case policy::CycleEdit::kNone:
      break;
    case policy::CycleEdit::kEnterOnAllocation:
      EnterCycleOnAllocation(o, n, now, &e.ann);
      break;
    case policy::CycleEdit::kEnterDirectly:
      EnterCycleDirectly(o, n, now, &e.ann);
      break;
    case policy::CycleEdit::kStay:
      StayInCycle(o, n, now, &e.ann);
      break;
    case policy::CycleEdit::kHold:
      StayInCycle(o, n, now, &e.ann);
      if (!o.Annotation(keys::kShutdownRequested)) e.ann.Set(keys::kShutdownRequested, now);
      break;
    case policy::CycleEdit::kScaledDown:
      e.ann.Set(keys::kOutcome, keys::kOutcomeScaledDown);
      e.ann.Remove(keys::kConfirmed);
      e.ann.Remove(keys::kShutdownRequested);
      break;
    case policy::CycleEdit::kClear:
      for (std::string_view k : keys::kOwnedAnnotations) e.ann.Remove(k);
      break;
  }
  if (rule.keep_opted_in) KeepOptedIn(n, &e.labels, &e.neutralised);

  if (rule.verdict == policy::Verdict::kFailOpen) {
    Decision d = Decision::Allow("fail open: CRD does not accept Allocating (" + why + ")");
    d.fail_open = true;
    d.warnings.push_back(FailOpenWarning(name()));
    return finish(std::move(d), std::nullopt);
  }
  if (rule.verdict == policy::Verdict::kDeny) {
    std::string msg =
        os == keys::kStateAllocating
            ? fmt::format(
                  "GameServer {} is Allocating: only the resolver promotes it to Allocated, once "
                  "readiness is confirmed ({}: reject; {})",
                  name(), keys::kMode, why)
            : fmt::format(
                  "GameServer {} may not become Allocated before it is confirmed playable ({}: "
                  "reject); move it to Allocating and let the resolver promote it",
                  name(), keys::kMode);
    Decision d = Decision::Deny(403, "Forbidden", msg);
    d.reason = "reject mode: " + why;
    return d;
  }

  if (in.new_phase == policy::Phase::kAllocated) {
    if (in.old_phase == policy::Phase::kAllocated) {
      // Re-allocation (or any update) of a server that is already Allocated: it is playable.
      return finish(Decision::Allow("already Allocated"), std::nullopt);
    }
    if (rule.state == policy::StateWrite::kAsWritten) {
      return Decision::Allow(in.confirmed
                                 ? "promotion by a trusted identity with confirmed == allocation"
                                 : "timeout resolution to Allocated by a trusted identity");
    }
    return finish(Decision::Allow("rewritten to Allocating: " + why), keys::kStateAllocating);
  }
  if (rule.cycle == policy::CycleEdit::kHold) {
    // Scale-down protection: the Agones controller's Shutdown of a server that is being prepared
    // for a match (GameServerSet scale-down, rolling update) is not applied, as Agones never
    // shuts down an Allocated one; the update itself succeeds, so the controller's pass goes on.
    // Only a Shutdown that keeps the cycle's `since` is held: every full UPDATE of the stored
    // object does, while the webhook's own deferred Shutdown removes it, so re-invoking the
    // webhook on its own patch does not hold the server again.
    Decision d = Decision::Allow("scale-down protection: Shutdown by the Agones controller held");
    d.shutdown_held = true;
    d.warnings.push_back(fmt::format(
        "allocating-webhook: GameServer {} is Allocating (being prepared for a match): the Agones "
        "controller's Shutdown was not applied (scale-down protection); it stays Allocating until "
        "it is resolved within its {}, and is shut down when it leaves the allocation cycle ({})",
        name(), keys::kTimeout, keys::kShutdownRequested));
    return finish(std::move(d), keys::kStateAllocating);
  }
  if (rule.cycle == policy::CycleEdit::kScaledDown) {
    // Scale-down or rolling update (on-scale-down: Shutdown, the default): the Agones controller's
    // Shutdown of a server that is still being prepared for a match is applied, as it is for a
    // Ready server: nobody has been sent to it yet (players are sent at Allocated). Holding it
    // would stall the rollout: the controller counts a server it shut down in shutdownReplicas
    // until the object is deleted. `outcome: ScaledDown` records the abandoned allocation (the
    // resolver turns it into an Event and a metric); since/allocation stay to name it.
    Decision d = Decision::Allow(
        "scale-down of an Allocating server applied (on-scale-down: Shutdown): allocation " +
        std::string(o.allocation) + " abandoned before it was confirmed");
    d.scaled_down = true;
    return finish(std::move(d), std::nullopt);
  }
  if (in.new_phase == policy::Phase::kAllocating) {
    return finish(Decision::Allow("Allocating"), std::nullopt);
  }
  if (!policy::In(in.old_phase, policy::kInCycle))
    return Decision::Allow("outside the allocation cycle");

  // Row 5: leaving the cycle. Only the transition cleans up, and only after an untrusted write:
  // what a trusted identity (the resolver) leaves on a server it moves out, e.g. outcome:
  // TimedOut on an Unhealthy server, stays visible afterwards. Row 6 (deferred scale-down): the
  // Agones controller asked to shut this server down while it was Allocating, and from then on
  // counts it as deleted, so whatever state it leaves the cycle for, it is shut down now.
  const bool deferred = rule.state == policy::StateWrite::kShutdown;
  std::optional<std::string_view> new_state;
  Decision d = Decision::Allow(trusted ? "trusted identity leaving the cycle"
                                       : "outside the allocation cycle");
  if (deferred) {
    new_state = keys::kStateShutdown;
    d.shutdown_deferred = true;
    d.reason = fmt::format("deferred scale-down: {} -> Shutdown instead of {}", os,
                           ns.empty() ? std::string_view("(no state)") : ns);
    d.warnings.push_back(fmt::format(
        "allocating-webhook: GameServer {} leaves the allocation cycle: the Agones controller's "
        "Shutdown, held while it was Allocating ({}), is applied now instead of state \"{}\"",
        name(), keys::kShutdownRequested, util::Clip(ns, 60)));
  }
  JsonPatch patch;
  if (new_state) patch.ReplaceString("/status/state", *new_state);
  e.ann.AppendTo(&patch);
  if (!patch.empty()) {
    d.patch = patch.ToJson();
    if (!deferred) d.reason = "left the allocation cycle: owned annotations removed";
  }
  return d;
}

}  // namespace aw::admission
