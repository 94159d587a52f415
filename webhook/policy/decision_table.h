// The gate's decision tables as data (docs/design.md, "Decision tables"): what the mutating
// webhook does with an update of an opted-in GameServer, which changes of the project-owned
// annotations the validating webhook lets an untrusted writer make, and what the resolver does
// with a server it watches.
//
// Promise: each table is an ordered list of rules; a decision is the first rule whose every
// column matches (the last rule of each table matches everything, so there is always one).
// The admission webhook and the resolver decide by looking rules up here, and docs/design.md
// carries the tables rendered by Render*Table(): a unit test compares the two, so neither can
// change alone. Pure, no I/O, thread-safe (the tables are constants).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "policy/config.h"
#include "policy/gameserver.h"

namespace aw::policy {

// Where a status.state stands in the allocation cycle. Shutdown is apart from the other states
// outside the cycle because scale-down protection treats it specially.
enum class Phase : uint8_t { kOutside = 1, kShutdown = 2, kAllocating = 4, kAllocated = 8 };
Phase PhaseOf(std::string_view state);

// A set of phases (a bitwise or of Phase values).
using Phases = uint8_t;
constexpr Phases kAnyPhase = 15;
constexpr Phases kOutOfCycle = 1 | 2;  // Ready, Reserved, Shutdown, Unhealthy, Error, ...
constexpr Phases kInCycle = 4 | 8;
constexpr Phases Only(Phase p) { return static_cast<Phases>(p); }
constexpr bool In(Phase p, Phases set) { return (static_cast<Phases>(p) & set) != 0; }

// Who wrote the request, in the gate's terms. kTrusted wins over kAgonesController (an identity
// listed in both is trusted); everyone else, the game server's own SDK included, is kOther.
enum class Writer : uint8_t { kTrusted = 1, kAgonesController = 2, kOther = 4 };
using Writers = uint8_t;
constexpr Writers kAnyWriter = 7;
constexpr Writers kUntrusted = 2 | 4;
constexpr bool In(Writer w, Writers set) { return (static_cast<Writers>(w) & set) != 0; }

// A yes/no column: kAny matches both.
enum class Cond : uint8_t { kAny, kYes, kNo };
constexpr bool Matches(Cond c, bool v) { return c == Cond::kAny || (c == Cond::kYes) == v; }

// ---- The mutating gate (/mutate/gameservers, UPDATE) ----

struct GateInput {
  bool opted_in = false;  // the old or the new object carries the opt-in label
  Phase old_phase = Phase::kOutside;
  Phase new_phase = Phase::kOutside;
  Writer writer = Writer::kOther;
  bool confirmed = false;    // the new object's `confirmed` is non-empty and equals `allocation`
  bool timed_out = false;    // the new object's `outcome` is TimedOut
  bool crd_accepts = false;  // the GameServer CRD is known to accept Allocating
  GateMode mode = GateMode::kRewrite;  // the new object's mode (only rules on Allocated read it)
  bool deleting = false;               // the new object has a deletionTimestamp
  bool has_since = false;              // the new object carries `since`
  bool shutdown_requested = false;     // the old or the new object carries `shutdown-requested`
  bool hold_scale_down = false;        // the new object's on-scale-down is Hold
};

enum class Verdict : uint8_t { kAllow, kFailOpen, kDeny };
// What the rewrite does to status.state.
enum class StateWrite : uint8_t { kAsWritten, kAllocating, kShutdown };
// What the rewrite does to the project's annotations.
enum class CycleEdit : uint8_t {
  kNone,
  kEnterOnAllocation,  // since = now, allocation = the allocation id; confirmed/outcome/
                       // shutdown-requested/bypassed removed
  kEnterDirectly,      // a new RFC 3339 `since` is kept (else now), allocation follows from it,
                       // confirmed/outcome/shutdown-requested/bypassed removed
  kStay,               // since/allocation restored when dropped (from the old object)
  kHold,               // kStay, and shutdown-requested = now unless the old object has it
  kScaledDown,         // outcome = ScaledDown; since/allocation kept (they name the abandoned
                       // allocation); confirmed/shutdown-requested removed
  kClear,              // since, allocation, confirmed, outcome, shutdown-requested removed
};

struct GateRule {
  std::string_view row;  // the README/design row it implements ("1".."6", "-")
  Phases old_phase = kAnyPhase;
  Phases new_phase = kAnyPhase;
  Writers writer = kAnyWriter;
  Cond opted_in = Cond::kAny;
  Cond confirmed = Cond::kAny;
  Cond timed_out = Cond::kAny;
  Cond crd_accepts = Cond::kAny;
  Cond reject_mode = Cond::kAny;
  Cond deleting = Cond::kAny;
  Cond has_since = Cond::kAny;
  Cond shutdown_requested = Cond::kAny;
  Cond hold_scale_down = Cond::kAny;
  Verdict verdict = Verdict::kAllow;
  StateWrite state = StateWrite::kAsWritten;
  CycleEdit cycle = CycleEdit::kNone;
  // An untrusted writer's changes of the project-owned annotations (and, unless it is the
  // server's own SDK, of the readiness annotation) are reverted to the old object's values.
  bool neutralise = false;
  // The opt-in label is set back to "true" when missing.
  bool keep_opted_in = false;
  std::string_view what;  // one line for the rendered table
};

std::span<const GateRule> GateRules();
const GateRule& DecideGate(const GateInput& in);

// ---- Owned annotations (/validate/gameservers, an untrusted writer's UPDATE) ----

// The project-owned annotations as a set (bits), for the rules below.
enum class OwnedKey : uint8_t {
  kSince = 1,
  kAllocation = 2,
  kConfirmed = 4,
  kOutcome = 8,
  kShutdownRequested = 16,
  kBypassed = 32
};
using OwnedKeys = uint8_t;
constexpr OwnedKeys kAnyOwnedKey = 63;
// std::nullopt-like: 0 for a key that is not owned.
OwnedKeys OwnedKeyOf(std::string_view key);

enum class OwnedChange : uint8_t { kRemove, kSet };
// Allowed outright, allowed when the value is the one the gate writes (since: an RFC 3339 time
// close to the webhook's clock; allocation: the fresh agones.dev/last-allocated, else since;
// outcome: ScaledDown), or denied.
enum class OwnedVerdict : uint8_t { kAllow, kCheckValue, kDeny };

struct OwnedInput {
  OwnedKeys key = 0;
  OwnedChange change = OwnedChange::kSet;
  Phase old_phase = Phase::kOutside;
  Phase new_phase = Phase::kOutside;
  Writer writer = Writer::kOther;  // never kTrusted: trusted writers are not checked
  bool was_absent = false;         // the old object did not carry the key
};

struct OwnedRule {
  OwnedKeys keys = kAnyOwnedKey;
  OwnedChange change = OwnedChange::kSet;
  Phases old_phase = kAnyPhase;
  Phases new_phase = kAnyPhase;
  Writers writer = kAnyWriter;
  Cond was_absent = Cond::kAny;
  OwnedVerdict verdict = OwnedVerdict::kDeny;
  std::string_view what;
};

std::span<const OwnedRule> OwnedRules();
const OwnedRule& DecideOwned(const OwnedInput& in);

// ---- The resolver (one opted-in GameServer it watches) ----

// Where an Allocated server stands towards the gate. A server allocated while admission was
// unreachable (failurePolicy Ignore) reaches Allocated as the allocator wrote it: without the
// gate's `since`/`allocation`. The resolver records such a bypass (`bypassed` = the allocation id,
// with `since` and `allocation`) and then checks its readiness after the fact.
enum class Bypass : uint8_t {
  kNone = 1,    // not Allocated, or Allocated through the gate, or a bypass already resolved
  kUnseen = 2,  // Allocated without the gate's `since` or `allocation`: not recorded yet
  kOpen = 4,    // recorded (`bypassed` == `allocation`), neither confirmed nor resolved yet
};
using Bypasses = uint8_t;
constexpr Bypasses kAnyBypass = 7;
constexpr bool In(Bypass b, Bypasses set) { return (static_cast<Bypasses>(b) & set) != 0; }

// The bypass state of a GameServer from its state and annotations (opt-in not considered):
// kUnseen when status.state is Allocated and `since` or `allocation` is missing; kOpen when it is
// Allocated, `bypassed` is non-empty and equals `allocation`, `confirmed` differs from it and
// `outcome` is neither TimedOut nor Unconfirmed; else kNone.
Bypass BypassOf(const GameServerView& gs);

// Where a gated server stands towards the allocation gateway's answer (docs/gateway.md, "No
// server lost"); computed by the resolver from `answer-by`, `delivered`, `outcome` and its grace.
enum class Delivery : uint8_t {
  kNone = 1,     // not allocated through the gateway (no answer-by), delivered, or released
  kPending = 2,  // answer-by + grace still ahead, not delivered yet
  kOverdue = 4,  // answer-by + grace passed and not delivered: nobody was told its address
};
using Deliveries = uint8_t;
constexpr Deliveries kAnyDelivery = 7;
constexpr bool In(Delivery d, Deliveries set) { return (static_cast<Deliveries>(d) & set) != 0; }

struct ResolveInput {
  bool opted_in = false;
  bool deleting = false;
  Phase phase = Phase::kOutside;
  Bypass bypass = Bypass::kNone;
  bool ready = false;          // every configured check passes
  bool past_deadline = false;  // now >= since (or first seen) + timeout
  bool scaled_down = false;    // outcome ScaledDown (the webhook let a scale-down through)
  Delivery delivery = Delivery::kNone;
};

// kRecord: the allocation ended without the resolver (a scale-down the webhook let through):
// record its outcome (Event, metric, log) once.
enum class ResolveVerdict : uint8_t {
  kIgnore,
  kWait,
  kPromote,
  kTimeOut,
  kRecord,          // a scale-down let through (outcome ScaledDown): record it once
  kRecordBypass,    // write bypassed/since/allocation (and drop confirmed/outcome)
  kConfirmBypass,   // confirmed = allocation, outcome Confirmed; the state stays Allocated
  kBypassDeadline,  // BypassTimeoutAction(on-timeout); the state stays Allocated
  kRelease,         // never delivered by the gateway: on-undelivered, outcome Undelivered
};

struct ResolveRule {
  Cond scaled_down = Cond::kAny;
  Cond opted_in = Cond::kAny;
  Cond deleting = Cond::kAny;
  Phases phase = kAnyPhase;
  Bypasses bypass = kAnyBypass;
  Deliveries delivery = kAnyDelivery;
  Cond ready = Cond::kAny;
  Cond past_deadline = Cond::kAny;
  ResolveVerdict verdict = ResolveVerdict::kWait;
  std::string_view what;
};

std::span<const ResolveRule> ResolveRules();
const ResolveRule& DecideResolve(const ResolveInput& in);

// The state a timeout writes: on-timeout, except that a server whose Shutdown the gate held
// (shutdown-requested) and that would become Unhealthy is shut down instead (the Agones
// controller already counts it as deleted and would never replace it).
struct TimeoutRule {
  OnTimeout on_timeout;
  Cond shutdown_requested;
  OnTimeout writes;
};
std::span<const TimeoutRule> TimeoutRules();
OnTimeout TimeoutAction(OnTimeout on_timeout, bool shutdown_requested);

// What the deadline of a bypassed allocation writes. Players may already be on the server (a
// matchmaker that took the allocator's answer did not wait), so the state is never changed:
// on-timeout Allocated (the user's explicit choice) confirms it with outcome TimedOut, like an
// Allocating server; any other on-timeout records outcome Unconfirmed and leaves it Allocated.
struct BypassTimeoutRule {
  OnTimeout on_timeout;
  bool confirm;              // write `confirmed` = allocation
  std::string_view outcome;  // the `outcome` written
};
std::span<const BypassTimeoutRule> BypassTimeoutRules();
const BypassTimeoutRule& BypassTimeoutAction(OnTimeout on_timeout);

// The tables as Markdown, exactly as docs/design.md carries them.
std::string RenderGateTable();
std::string RenderOwnedTable();
std::string RenderResolveTable();

}  // namespace aw::policy
