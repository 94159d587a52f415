#include "policy/decision_table.h"

#include <fmt/format.h>

#include <array>
#include <vector>

#include "contract/keys.h"

namespace aw::policy {
namespace {

constexpr Phases kOutside = Only(Phase::kOutside);
constexpr Phases kShutdown = Only(Phase::kShutdown);
constexpr Phases kAllocating = Only(Phase::kAllocating);
constexpr Phases kAllocated = Only(Phase::kAllocated);
constexpr Phases kNotAllocated = kAnyPhase & ~kAllocated;
constexpr Phases kNotAllocating = kAnyPhase & ~kAllocating;
constexpr Writers kTrusted = static_cast<Writers>(Writer::kTrusted);
constexpr Writers kController = static_cast<Writers>(Writer::kAgonesController);
constexpr Bypasses kUnseen = static_cast<Bypasses>(Bypass::kUnseen);
constexpr Bypasses kOpen = static_cast<Bypasses>(Bypass::kOpen);
constexpr Deliveries kPending = static_cast<Deliveries>(Delivery::kPending);
constexpr Deliveries kOverdue = static_cast<Deliveries>(Delivery::kOverdue);

constexpr std::array kGateRules = {
    GateRule{.row = "1", .opted_in = Cond::kNo, .what = "not opted in: allowed unchanged"},
    GateRule{.row = "-",
             .old_phase = kAllocated,
             .new_phase = kAllocated,
             .neutralise = true,
             .what = "already Allocated (re-allocation): allowed"},
    GateRule{.row = "3",
             .old_phase = kAllocating,
             .new_phase = kAllocated,
             .writer = kTrusted,
             .confirmed = Cond::kYes,
             .what = "promotion: allowed unchanged"},
    GateRule{.row = "3",
             .old_phase = kAllocating,
             .new_phase = kAllocated,
             .writer = kTrusted,
             .timed_out = Cond::kYes,
             .what = "on-timeout Allocated: allowed unchanged"},
    GateRule{.row = "1",
             .new_phase = kAllocated,
             .crd_accepts = Cond::kNo,
             .verdict = Verdict::kFailOpen,
             .neutralise = true,
             .what = "fail open: allowed, with a warning"},
    GateRule{.row = "2",
             .old_phase = kOutOfCycle,
             .new_phase = kAllocated,
             .reject_mode = Cond::kYes,
             .verdict = Verdict::kDeny,
             .what = "new allocation in reject mode: denied"},
    GateRule{.row = "3",
             .old_phase = kAllocating,
             .new_phase = kAllocated,
             .reject_mode = Cond::kYes,
             .verdict = Verdict::kDeny,
             .what = "unconfirmed promotion in reject mode: denied"},
    GateRule{.row = "2",
             .old_phase = kOutOfCycle,
             .new_phase = kAllocated,
             .state = StateWrite::kAllocating,
             .cycle = CycleEdit::kEnterOnAllocation,
             .neutralise = true,
             .keep_opted_in = true,
             .what = "new allocation: rewritten"},
    GateRule{.row = "3",
             .old_phase = kAllocating,
             .new_phase = kAllocated,
             .state = StateWrite::kAllocating,
             .cycle = CycleEdit::kStay,
             .neutralise = true,
             .keep_opted_in = true,
             .what = "unconfirmed promotion: rewritten back"},
    GateRule{.row = "6",
             .old_phase = kAllocating,
             .new_phase = kShutdown,
             .writer = kController,
             .crd_accepts = Cond::kYes,
             .deleting = Cond::kNo,
             .has_since = Cond::kYes,
             .hold_scale_down = Cond::kYes,
             .state = StateWrite::kAllocating,
             .cycle = CycleEdit::kHold,
             .keep_opted_in = true,
             .what = "scale-down, on-scale-down Hold: Shutdown held"},
    GateRule{.row = "6",
             .old_phase = kAllocating,
             .new_phase = kShutdown,
             .writer = kController,
             .deleting = Cond::kNo,
             .shutdown_requested = Cond::kNo,
             .cycle = CycleEdit::kScaledDown,
             .what = "scale-down of an unconfirmed allocation: applied, outcome ScaledDown"},
    GateRule{.row = "4",
             .old_phase = kAllocating,
             .new_phase = kAllocating,
             .cycle = CycleEdit::kStay,
             .keep_opted_in = true,
             .what = "stays Allocating"},
    GateRule{.row = "4",
             .old_phase = kNotAllocating,
             .new_phase = kAllocating,
             .cycle = CycleEdit::kEnterDirectly,
             .keep_opted_in = true,
             .what = "Allocating set directly: stamped"},
    GateRule{.row = "-",
             .old_phase = kOutOfCycle,
             .new_phase = kOutOfCycle,
             .what = "outside the cycle: allowed unchanged"},
    GateRule{.row = "6",
             .old_phase = kInCycle,
             .new_phase = kOutside,
             .writer = kTrusted,
             .crd_accepts = Cond::kYes,
             .deleting = Cond::kNo,
             .shutdown_requested = Cond::kYes,
             .state = StateWrite::kShutdown,
             .what = "deferred scale-down: rewritten"},
    GateRule{.row = "6",
             .old_phase = kInCycle,
             .new_phase = kOutside,
             .crd_accepts = Cond::kYes,
             .deleting = Cond::kNo,
             .shutdown_requested = Cond::kYes,
             .state = StateWrite::kShutdown,
             .cycle = CycleEdit::kClear,
             .what = "deferred scale-down: rewritten"},
    GateRule{.row = "5",
             .old_phase = kInCycle,
             .writer = kTrusted,
             .what = "leaves the cycle: allowed as written"},
    GateRule{.row = "5", .cycle = CycleEdit::kClear, .what = "leaves the cycle: cleaned"},
};

constexpr OwnedKeys kSinceBit = static_cast<OwnedKeys>(OwnedKey::kSince);
constexpr OwnedKeys kAllocationBit = static_cast<OwnedKeys>(OwnedKey::kAllocation);
constexpr OwnedKeys kConfirmedBit = static_cast<OwnedKeys>(OwnedKey::kConfirmed);
constexpr OwnedKeys kOutcomeBit = static_cast<OwnedKeys>(OwnedKey::kOutcome);
constexpr OwnedKeys kShutdownBit = static_cast<OwnedKeys>(OwnedKey::kShutdownRequested);
constexpr OwnedKeys kBypassedBit = static_cast<OwnedKeys>(OwnedKey::kBypassed);

constexpr std::array kOwnedRules = {
    OwnedRule{.change = OwnedChange::kRemove,
              .new_phase = kOutOfCycle,
              .verdict = OwnedVerdict::kAllow,
              .what = "the server leaves the cycle"},
    OwnedRule{.keys = kConfirmedBit | kOutcomeBit | kShutdownBit | kBypassedBit,
              .change = OwnedChange::kRemove,
              .old_phase = kNotAllocating,
              .new_phase = kAllocating,
              .verdict = OwnedVerdict::kAllow,
              .what = "the server enters Allocating"},
    OwnedRule{.change = OwnedChange::kRemove, .what = "may not be removed"},
    OwnedRule{.keys = kShutdownBit,
              .old_phase = kAllocating,
              .new_phase = kAllocating,
              .writer = kController,
              .was_absent = Cond::kYes,
              .verdict = OwnedVerdict::kAllow,
              .what = "scale-down protection"},
    OwnedRule{.keys = kShutdownBit, .what = "written only by the webhook"},
    OwnedRule{.keys = kOutcomeBit,
              .old_phase = kAllocating,
              .new_phase = kShutdown,
              .writer = kController,
              .verdict = OwnedVerdict::kCheckValue,
              .what = "scale-down of an unconfirmed allocation"},
    OwnedRule{.keys = kConfirmedBit | kOutcomeBit | kBypassedBit,
              .what = "written only by the resolver"},
    OwnedRule{.keys = kSinceBit | kAllocationBit,
              .old_phase = kNotAllocating,
              .new_phase = kAllocating,
              .verdict = OwnedVerdict::kCheckValue,
              .what = "the server enters Allocating"},
    OwnedRule{.keys = kSinceBit | kAllocationBit,
              .old_phase = kAllocating,
              .new_phase = kAllocating,
              .was_absent = Cond::kYes,
              .verdict = OwnedVerdict::kCheckValue,
              .what = "restored while Allocating"},
    OwnedRule{.what = "written only by the webhook when the server enters Allocating"},
};

constexpr std::array kResolveRules = {
    ResolveRule{.scaled_down = Cond::kYes,
                .phase = kShutdown,
                .verdict = ResolveVerdict::kRecord,
                .what = "scale-down let through by the webhook: record the outcome once"},
    ResolveRule{.opted_in = Cond::kNo, .verdict = ResolveVerdict::kIgnore, .what = "not opted in"},
    ResolveRule{
        .deleting = Cond::kYes, .verdict = ResolveVerdict::kIgnore, .what = "being deleted"},
    ResolveRule{.phase = kInCycle,
                .delivery = kOverdue,
                .verdict = ResolveVerdict::kRelease,
                .what = "allocated by the gateway, never delivered: release (on-undelivered)"},
    ResolveRule{.phase = kAllocated,
                .bypass = kUnseen,
                .verdict = ResolveVerdict::kRecordBypass,
                .what = "Allocated without the gate's marks: record the bypass"},
    ResolveRule{.phase = kAllocated,
                .bypass = kOpen,
                .ready = Cond::kYes,
                .verdict = ResolveVerdict::kConfirmBypass,
                .what = "confirmed after the fact"},
    ResolveRule{.phase = kAllocated,
                .bypass = kOpen,
                .past_deadline = Cond::kYes,
                .verdict = ResolveVerdict::kBypassDeadline,
                .what = "bypassed allocation not confirmed in time"},
    ResolveRule{.phase = kAllocated,
                .bypass = kOpen,
                .verdict = ResolveVerdict::kWait,
                .what = "bypassed: probe on its period, re-check"},
    ResolveRule{.phase = kAllocated,
                .delivery = kPending,
                .verdict = ResolveVerdict::kWait,
                .what = "allocated by the gateway: re-check at answer-by + grace"},
    ResolveRule{
        .phase = kNotAllocating, .verdict = ResolveVerdict::kIgnore, .what = "not Allocating"},
    ResolveRule{.ready = Cond::kYes,
                .verdict = ResolveVerdict::kPromote,
                .what = "readiness wins over a deadline that passed at the same moment"},
    ResolveRule{.past_deadline = Cond::kYes,
                .verdict = ResolveVerdict::kTimeOut,
                .what = "apply on-timeout"},
    ResolveRule{.verdict = ResolveVerdict::kWait, .what = "probe on its period, re-check"},
};

constexpr std::array kTimeoutRules = {
    TimeoutRule{OnTimeout::kUnhealthy, Cond::kYes, OnTimeout::kShutdown},
    TimeoutRule{OnTimeout::kUnhealthy, Cond::kAny, OnTimeout::kUnhealthy},
    TimeoutRule{OnTimeout::kAllocated, Cond::kAny, OnTimeout::kAllocated},
    TimeoutRule{OnTimeout::kShutdown, Cond::kAny, OnTimeout::kShutdown},
};

constexpr std::array kBypassTimeoutRules = {
    BypassTimeoutRule{OnTimeout::kAllocated, true, keys::kOutcomeTimedOut},
    BypassTimeoutRule{OnTimeout::kUnhealthy, false, keys::kOutcomeUnconfirmed},
    BypassTimeoutRule{OnTimeout::kShutdown, false, keys::kOutcomeUnconfirmed},
};

// ---- rendering ----

std::string PhasesText(Phases p) {
  switch (p) {
    case kAnyPhase:
      return "any";
    case kOutOfCycle:
      return "out of cycle";
    case kInCycle:
      return "Allocating, Allocated";
    case kNotAllocating:
      return "not Allocating";
    case kNotAllocated:
      return "not Allocated";
    case kOutside:
      return "out of cycle, not Shutdown";
    default:
      break;
  }
  std::string out;
  for (auto [bit, name] :
       {std::pair{kOutside, "other"}, std::pair{kShutdown, "Shutdown"},
        std::pair{kAllocating, "Allocating"}, std::pair{kAllocated, "Allocated"}}) {
    if (p & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  }
  return out;
}

std::string WritersText(Writers w) {
  switch (w) {
    case kAnyWriter:
      return "any";
    case kTrusted:
      return "trusted";
    case kController:
      return "Agones controller";
    case kUntrusted:
      return "untrusted";
    default:
      return "other";
  }
}

void AddCond(std::vector<std::string>* out, Cond c, std::string_view yes, std::string_view no) {
  if (c == Cond::kYes) out->emplace_back(yes);
  if (c == Cond::kNo) out->emplace_back(no);
}

std::string Join(const std::vector<std::string>& parts, std::string_view empty) {
  if (parts.empty()) return std::string(empty);
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string_view StateWriteText(StateWrite s) {
  switch (s) {
    case StateWrite::kAsWritten:
      return "as written";
    case StateWrite::kAllocating:
      return "Allocating";
    case StateWrite::kShutdown:
      return "Shutdown";
  }
  return "as written";
}

std::string_view CycleEditText(CycleEdit c) {
  switch (c) {
    case CycleEdit::kNone:
      return "-";
    case CycleEdit::kEnterOnAllocation:
      return "enter on allocation";
    case CycleEdit::kEnterDirectly:
      return "enter directly";
    case CycleEdit::kStay:
      return "stay";
    case CycleEdit::kHold:
      return "hold";
    case CycleEdit::kScaledDown:
      return "scaled down";
    case CycleEdit::kClear:
      return "clear";
  }
  return "-";
}

std::string_view VerdictText(Verdict v) {
  switch (v) {
    case Verdict::kAllow:
      return "allow";
    case Verdict::kFailOpen:
      return "fail open";
    case Verdict::kDeny:
      return "deny";
  }
  return "allow";
}

std::string OwnedKeysText(OwnedKeys k) {
  if (k == kAnyOwnedKey) return "any owned";
  std::string out;
  for (auto [bit, name] :
       {std::pair{kSinceBit, "since"}, std::pair{kAllocationBit, "allocation"},
        std::pair{kConfirmedBit, "confirmed"}, std::pair{kOutcomeBit, "outcome"},
        std::pair{kShutdownBit, "shutdown-requested"}, std::pair{kBypassedBit, "bypassed"}}) {
    if (k & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  }
  return out;
}

std::string_view OwnedVerdictText(OwnedVerdict v) {
  switch (v) {
    case OwnedVerdict::kAllow:
      return "allow";
    case OwnedVerdict::kCheckValue:
      return "allow if the value is the gate's";
    case OwnedVerdict::kDeny:
      return "deny";
  }
  return "deny";
}

std::string_view ResolveVerdictText(ResolveVerdict v) {
  switch (v) {
    case ResolveVerdict::kIgnore:
      return "ignore";
    case ResolveVerdict::kWait:
      return "wait";
    case ResolveVerdict::kPromote:
      return "promote";
    case ResolveVerdict::kTimeOut:
      return "time out";
    case ResolveVerdict::kRecord:
      return "record";
    case ResolveVerdict::kRecordBypass:
      return "record bypass";
    case ResolveVerdict::kRelease:
      return "release";
    case ResolveVerdict::kConfirmBypass:
      return "confirm";
    case ResolveVerdict::kBypassDeadline:
      return "bypass deadline";
  }
  return "wait";
}

std::string BypassesText(Bypasses b) {
  switch (b) {
    case kAnyBypass:
      return "any";
    case kUnseen:
      return "unseen";
    case kOpen:
      return "open";
    default:
      return "other";
  }
}

std::string DeliveriesText(Deliveries d) {
  switch (d) {
    case kAnyDelivery:
      return "any";
    case kPending:
      return "pending";
    case kOverdue:
      return "overdue";
    default:
      return "other";
  }
}

std::string_view CondText(Cond c) {
  return c == Cond::kYes ? "yes" : c == Cond::kNo ? "no" : "any";
}

}  // namespace

Phase PhaseOf(std::string_view state) {
  if (state == keys::kStateAllocating) return Phase::kAllocating;
  if (state == keys::kStateAllocated) return Phase::kAllocated;
  if (state == keys::kStateShutdown) return Phase::kShutdown;
  return Phase::kOutside;
}

std::span<const GateRule> GateRules() { return kGateRules; }

const GateRule& DecideGate(const GateInput& in) {
  for (const GateRule& r : kGateRules) {
    if (In(in.old_phase, r.old_phase) && In(in.new_phase, r.new_phase) && In(in.writer, r.writer) &&
        Matches(r.opted_in, in.opted_in) && Matches(r.confirmed, in.confirmed) &&
        Matches(r.timed_out, in.timed_out) && Matches(r.crd_accepts, in.crd_accepts) &&
        Matches(r.reject_mode, in.mode == GateMode::kReject) && Matches(r.deleting, in.deleting) &&
        Matches(r.has_since, in.has_since) &&
        Matches(r.shutdown_requested, in.shutdown_requested) &&
        Matches(r.hold_scale_down, in.hold_scale_down)) {
      return r;
    }
  }
  return kGateRules.back();  // unreachable: the last rule matches everything
}

OwnedKeys OwnedKeyOf(std::string_view key) {
  if (key == keys::kSince) return kSinceBit;
  if (key == keys::kAllocation) return kAllocationBit;
  if (key == keys::kConfirmed) return kConfirmedBit;
  if (key == keys::kOutcome) return kOutcomeBit;
  if (key == keys::kShutdownRequested) return kShutdownBit;
  if (key == keys::kBypassed) return kBypassedBit;
  return 0;
}

std::span<const OwnedRule> OwnedRules() { return kOwnedRules; }

const OwnedRule& DecideOwned(const OwnedInput& in) {
  for (const OwnedRule& r : kOwnedRules) {
    if ((r.keys & in.key) != 0 && r.change == in.change && In(in.old_phase, r.old_phase) &&
        In(in.new_phase, r.new_phase) && In(in.writer, r.writer) &&
        Matches(r.was_absent, in.was_absent)) {
      return r;
    }
  }
  return kOwnedRules.back();  // a set nothing else allows is denied
}

Bypass BypassOf(const GameServerView& gs) {
  if (gs.state != keys::kStateAllocated) return Bypass::kNone;
  if (gs.allocation.empty() || !gs.Annotation(keys::kSince)) return Bypass::kUnseen;
  auto bypassed = gs.Annotation(keys::kBypassed);
  if (!bypassed || *bypassed != gs.allocation) return Bypass::kNone;
  if (gs.Annotation(keys::kConfirmed) == gs.allocation) return Bypass::kNone;
  auto outcome = gs.Annotation(keys::kOutcome);
  if (outcome == keys::kOutcomeTimedOut || outcome == keys::kOutcomeUnconfirmed) {
    return Bypass::kNone;
  }
  return Bypass::kOpen;
}

std::span<const ResolveRule> ResolveRules() { return kResolveRules; }

const ResolveRule& DecideResolve(const ResolveInput& in) {
  for (const ResolveRule& r : kResolveRules) {
    if (Matches(r.scaled_down, in.scaled_down) && Matches(r.opted_in, in.opted_in) &&
        Matches(r.deleting, in.deleting) && In(in.phase, r.phase) && In(in.bypass, r.bypass) &&
        In(in.delivery, r.delivery) && Matches(r.ready, in.ready) &&
        Matches(r.past_deadline, in.past_deadline)) {
      return r;
    }
  }
  return kResolveRules.back();
}

std::span<const TimeoutRule> TimeoutRules() { return kTimeoutRules; }

OnTimeout TimeoutAction(OnTimeout on_timeout, bool shutdown_requested) {
  for (const TimeoutRule& r : kTimeoutRules) {
    if (r.on_timeout == on_timeout && Matches(r.shutdown_requested, shutdown_requested)) {
      return r.writes;
    }
  }
  return on_timeout;
}

std::span<const BypassTimeoutRule> BypassTimeoutRules() { return kBypassTimeoutRules; }

const BypassTimeoutRule& BypassTimeoutAction(OnTimeout on_timeout) {
  for (const BypassTimeoutRule& r : kBypassTimeoutRules) {
    if (r.on_timeout == on_timeout) return r;
  }
  return kBypassTimeoutRules.back();
}

std::string RenderGateTable() {
  std::string out =
      "| # | row | old | new | writer | when | verdict | state | annotations | also | what |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n";
  int i = 0;
  for (const GateRule& r : kGateRules) {
    std::vector<std::string> when;
    AddCond(&when, r.opted_in, "opted in", "not opted in");
    AddCond(&when, r.confirmed, "confirmed = allocation", "confirmed != allocation");
    AddCond(&when, r.timed_out, "outcome TimedOut", "no outcome TimedOut");
    AddCond(&when, r.crd_accepts, "CRD accepts Allocating", "CRD lacks Allocating");
    AddCond(&when, r.reject_mode, "mode reject", "mode rewrite");
    AddCond(&when, r.deleting, "being deleted", "not being deleted");
    AddCond(&when, r.has_since, "has since", "no since");
    AddCond(&when, r.shutdown_requested, "shutdown-requested", "no shutdown-requested");
    AddCond(&when, r.hold_scale_down, "on-scale-down Hold", "on-scale-down Shutdown");
    std::vector<std::string> also;
    if (r.neutralise) also.emplace_back("neutralise forged keys");
    if (r.keep_opted_in) also.emplace_back("keep label");
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", ++i, r.row,
                       PhasesText(r.old_phase), PhasesText(r.new_phase), WritersText(r.writer),
                       Join(when, "-"), VerdictText(r.verdict), StateWriteText(r.state),
                       CycleEditText(r.cycle), Join(also, "-"), r.what);
  }
  return out;
}

std::string RenderOwnedTable() {
  std::string out =
      "| # | keys | change | old | new | writer | key was absent | verdict | what |\n"
      "|---|---|---|---|---|---|---|---|---|\n";
  int i = 0;
  for (const OwnedRule& r : kOwnedRules) {
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", ++i,
                       OwnedKeysText(r.keys), r.change == OwnedChange::kRemove ? "remove" : "set",
                       PhasesText(r.old_phase), PhasesText(r.new_phase), WritersText(r.writer),
                       CondText(r.was_absent), OwnedVerdictText(r.verdict), r.what);
  }
  return out;
}

std::string RenderResolveTable() {
  std::string out =
      "| # | outcome ScaledDown | opted in | being deleted | state | bypass | delivery | ready "
      "| past deadline | verdict | what |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n";
  int i = 0;
  for (const ResolveRule& r : kResolveRules) {
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", ++i,
                       CondText(r.scaled_down), CondText(r.opted_in), CondText(r.deleting),
                       PhasesText(r.phase), BypassesText(r.bypass), DeliveriesText(r.delivery),
                       CondText(r.ready), CondText(r.past_deadline), ResolveVerdictText(r.verdict),
                       r.what);
  }
  out += "\n| on-timeout | shutdown-requested | writes |\n|---|---|---|\n";
  for (const TimeoutRule& r : kTimeoutRules) {
    out += fmt::format("| {} | {} | {} |\n", OnTimeoutName(r.on_timeout),
                       CondText(r.shutdown_requested), OnTimeoutName(r.writes));
  }
  out += "\n| on-timeout | bypassed allocation: state | confirmed | outcome |\n|---|---|---|---|\n";
  for (const BypassTimeoutRule& r : kBypassTimeoutRules) {
    out += fmt::format("| {} | Allocated (unchanged) | {} | {} |\n", OnTimeoutName(r.on_timeout),
                       r.confirm ? "the allocation id" : "-", r.outcome);
  }
  return out;
}

}  // namespace aw::policy
