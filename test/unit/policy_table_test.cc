// The gate's decision tables (policy/decision_table.h): rendered from the data, they must equal the
// tables in docs/design.md, and chosen rules match the README's rows.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "policy/decision_table.h"

namespace aw::policy {
namespace {

std::string DesignSection(const std::string& name) {
  std::ifstream f(std::string(AW_SOURCE_DIR) + "/docs/design.md");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  const std::string open = "<!-- gate-table:" + name + " -->\n";
  const std::string close = "<!-- /gate-table:" + name + " -->";
  auto b = doc.find(open);
  auto e = doc.find(close);
  if (b == std::string::npos || e == std::string::npos || e < b) return "<section missing>";
  return doc.substr(b + open.size(), e - b - open.size());
}

TEST(GateTable, DesignDocCarriesTheRenderedTables) {
  EXPECT_EQ(DesignSection("mutate"), RenderGateTable());
  EXPECT_EQ(DesignSection("owned"), RenderOwnedTable());
  EXPECT_EQ(DesignSection("resolve"), RenderResolveTable());
}

TEST(GateTable, RowsOfTheReadme) {
  GateInput in;
  in.opted_in = true;
  in.crd_accepts = true;
  in.old_phase = PhaseOf("Ready");
  in.new_phase = PhaseOf("Allocated");
  EXPECT_EQ(DecideGate(in).cycle, CycleEdit::kEnterOnAllocation);
  in.mode = GateMode::kReject;
  EXPECT_EQ(DecideGate(in).verdict, Verdict::kDeny);
  in.crd_accepts = false;
  EXPECT_EQ(DecideGate(in).verdict, Verdict::kFailOpen);
  in = GateInput{.opted_in = true,
                 .old_phase = Phase::kAllocating,
                 .new_phase = Phase::kAllocated,
                 .writer = Writer::kTrusted,
                 .confirmed = true,
                 .crd_accepts = true};
  EXPECT_EQ(DecideGate(in).state, StateWrite::kAsWritten);
  in.writer = Writer::kOther;  // an untrusted promotion is turned back
  EXPECT_EQ(DecideGate(in).state, StateWrite::kAllocating);
  in = GateInput{.opted_in = true,
                 .old_phase = Phase::kAllocating,
                 .new_phase = Phase::kShutdown,
                 .writer = Writer::kAgonesController,
                 .crd_accepts = true,
                 .has_since = true,
                 .hold_scale_down = true};
  EXPECT_EQ(DecideGate(in).cycle, CycleEdit::kHold);
  in.hold_scale_down = false;  // the default, on-scale-down: Shutdown
  EXPECT_EQ(DecideGate(in).cycle, CycleEdit::kScaledDown);
  EXPECT_EQ(DecideGate(in).state, StateWrite::kAsWritten);
  in.writer = Writer::kOther;  // anyone else's Shutdown: the server leaves the cycle, cleaned
  EXPECT_EQ(DecideGate(in).cycle, CycleEdit::kClear);
  in.writer = Writer::kAgonesController;
  in.deleting = true;
  EXPECT_EQ(DecideGate(in).cycle, CycleEdit::kClear);
  in = GateInput{.opted_in = true,
                 .old_phase = Phase::kAllocated,
                 .new_phase = Phase::kOutside,
                 .crd_accepts = true,
                 .shutdown_requested = true};
  EXPECT_EQ(DecideGate(in).state, StateWrite::kShutdown);
  in.opted_in = false;
  EXPECT_EQ(DecideGate(in).what, "not opted in: allowed unchanged");
}

TEST(GateTable, OwnedAndResolverRules) {
  OwnedInput o{.key = OwnedKeyOf("allocating.agones.dev/confirmed"),
               .change = OwnedChange::kSet,
               .old_phase = Phase::kAllocating,
               .new_phase = Phase::kAllocating};
  EXPECT_EQ(DecideOwned(o).verdict, OwnedVerdict::kDeny);
  o.change = OwnedChange::kRemove;
  o.new_phase = Phase::kOutside;
  EXPECT_EQ(DecideOwned(o).verdict, OwnedVerdict::kAllow);
  EXPECT_EQ(OwnedKeyOf("other"), 0);
  // outcome on the controller's scale-down: only the gate's value.
  OwnedInput sd{.key = OwnedKeyOf("allocating.agones.dev/outcome"),
                .change = OwnedChange::kSet,
                .old_phase = Phase::kAllocating,
                .new_phase = Phase::kShutdown,
                .writer = Writer::kAgonesController};
  EXPECT_EQ(DecideOwned(sd).verdict, OwnedVerdict::kCheckValue);
  sd.writer = Writer::kOther;
  EXPECT_EQ(DecideOwned(sd).verdict, OwnedVerdict::kDeny);
  // The resolver records a scale-down, even of a server that is being deleted.
  ResolveInput gone{.deleting = true, .phase = Phase::kShutdown, .scaled_down = true};
  EXPECT_EQ(DecideResolve(gone).verdict, ResolveVerdict::kRecord);
  gone.phase = Phase::kAllocating;  // outcome left over on an Allocating server: not a record
  gone.opted_in = true;
  gone.deleting = false;
  EXPECT_NE(DecideResolve(gone).verdict, ResolveVerdict::kRecord);
  ResolveInput r{
      .opted_in = true, .phase = Phase::kAllocating, .ready = true, .past_deadline = true};
  EXPECT_EQ(DecideResolve(r).verdict, ResolveVerdict::kPromote);
  r.ready = false;
  EXPECT_EQ(DecideResolve(r).verdict, ResolveVerdict::kTimeOut);
  r.deleting = true;
  EXPECT_EQ(DecideResolve(r).verdict, ResolveVerdict::kIgnore);
  EXPECT_EQ(TimeoutAction(OnTimeout::kUnhealthy, true), OnTimeout::kShutdown);
  EXPECT_EQ(TimeoutAction(OnTimeout::kUnhealthy, false), OnTimeout::kUnhealthy);
  EXPECT_EQ(TimeoutAction(OnTimeout::kAllocated, true), OnTimeout::kAllocated);
}

TEST(GateTable, BypassRules) {
  ResolveInput r{.opted_in = true, .phase = Phase::kAllocated, .bypass = Bypass::kUnseen};
  EXPECT_EQ(DecideResolve(r).verdict, ResolveVerdict::kRecordBypass);
  r.ready = true;  // readiness is checked only once the bypass is recorded
  EXPECT_EQ(DecideResolve(r).verdict, ResolveVerdict::kRecordBypass);
  r.bypass = Bypass::kOpen;
  r.past_deadline = true;  // readiness wins over the deadline, as for Allocating
  EXPECT_EQ(DecideResolve(r).verdict, ResolveVerdict::kConfirmBypass);
  r.ready = false;
  EXPECT_EQ(DecideResolve(r).verdict, ResolveVerdict::kBypassDeadline);
  r.past_deadline = false;
  EXPECT_EQ(DecideResolve(r).verdict, ResolveVerdict::kWait);
  r.bypass = Bypass::kNone;  // Allocated through the gate, or resolved
  EXPECT_EQ(DecideResolve(r).verdict, ResolveVerdict::kIgnore);
  r.bypass = Bypass::kUnseen;
  r.opted_in = false;
  EXPECT_EQ(DecideResolve(r).verdict, ResolveVerdict::kIgnore);
  r.opted_in = true;
  r.deleting = true;
  EXPECT_EQ(DecideResolve(r).verdict, ResolveVerdict::kIgnore);

  // The deadline of a bypassed allocation never changes the state.
  EXPECT_TRUE(BypassTimeoutAction(OnTimeout::kAllocated).confirm);
  EXPECT_EQ(BypassTimeoutAction(OnTimeout::kAllocated).outcome, "TimedOut");
  for (OnTimeout t : {OnTimeout::kUnhealthy, OnTimeout::kShutdown}) {
    EXPECT_FALSE(BypassTimeoutAction(t).confirm);
    EXPECT_EQ(BypassTimeoutAction(t).outcome, "Unconfirmed");
  }

  // Only the resolver writes `bypassed`; the gate drops it when a new cycle starts.
  OwnedInput o{.key = OwnedKeyOf("allocating.agones.dev/bypassed"),
               .change = OwnedChange::kSet,
               .old_phase = Phase::kAllocated,
               .new_phase = Phase::kAllocated};
  EXPECT_NE(o.key, 0);
  EXPECT_EQ(DecideOwned(o).verdict, OwnedVerdict::kDeny);
  EXPECT_EQ(DecideOwned(o).what, "written only by the resolver");
  o.change = OwnedChange::kRemove;
  EXPECT_EQ(DecideOwned(o).verdict, OwnedVerdict::kDeny);
  o.old_phase = Phase::kOutside;
  o.new_phase = Phase::kAllocating;
  EXPECT_EQ(DecideOwned(o).verdict, OwnedVerdict::kAllow);
}

GameServerView ViewOf(const std::string& state, std::map<std::string, std::string> ann) {
  GameServerView v;
  v.present = true;
  v.state = state;
  StringMap::Map m(ann.begin(), ann.end());
  v.annotations = StringMap(m);
  if (auto a = v.annotations.Get("allocating.agones.dev/allocation")) v.allocation = *a;
  return v;
}

TEST(GateTable, BypassOf) {
  const std::string id = "2026-01-02T03:04:05.5Z";
  const std::string since = "allocating.agones.dev/since";
  const std::string alloc = "allocating.agones.dev/allocation";
  const std::string bypassed = "allocating.agones.dev/bypassed";
  const std::string confirmed = "allocating.agones.dev/confirmed";
  const std::string outcome = "allocating.agones.dev/outcome";
  EXPECT_EQ(BypassOf(ViewOf("Allocated", {{"agones.dev/last-allocated", id}})), Bypass::kUnseen);
  EXPECT_EQ(BypassOf(ViewOf("Allocated", {{since, id}})), Bypass::kUnseen);
  EXPECT_EQ(BypassOf(ViewOf("Allocated", {{alloc, id}})), Bypass::kUnseen);
  EXPECT_EQ(BypassOf(ViewOf("Ready", {})), Bypass::kNone);
  EXPECT_EQ(BypassOf(ViewOf("Allocating", {})), Bypass::kNone);
  // Through the gate (promoted), and re-allocated (a newer last-allocated): not a bypass.
  EXPECT_EQ(BypassOf(ViewOf("Allocated", {{since, id},
                                          {alloc, id},
                                          {confirmed, id},
                                          {outcome, "Confirmed"},
                                          {"agones.dev/last-allocated", "2026-01-02T04:00:00Z"}})),
            Bypass::kNone);
  EXPECT_EQ(BypassOf(ViewOf("Allocated", {{since, id}, {alloc, id}, {bypassed, id}})),
            Bypass::kOpen);
  EXPECT_EQ(
      BypassOf(ViewOf(
          "Allocated",
          {{since, id}, {alloc, id}, {bypassed, id}, {confirmed, id}, {outcome, "Confirmed"}})),
      Bypass::kNone);
  EXPECT_EQ(BypassOf(ViewOf("Allocated",
                            {{since, id}, {alloc, id}, {bypassed, id}, {outcome, "Unconfirmed"}})),
            Bypass::kNone);
  EXPECT_EQ(
      BypassOf(ViewOf(
          "Allocated",
          {{since, id}, {alloc, id}, {bypassed, id}, {confirmed, id}, {outcome, "TimedOut"}})),
      Bypass::kNone);
  // A stale `bypassed` of an earlier allocation does not reopen it.
  EXPECT_EQ(BypassOf(ViewOf("Allocated", {{since, id}, {alloc, id}, {bypassed, "earlier"}})),
            Bypass::kNone);
}

}  // namespace
}  // namespace aw::policy
