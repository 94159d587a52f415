// The decision rows added for what the real Agones does (issue 9): the gate keeps a server opted
// in while it is Allocating; forged keys in an allocation's metadata are neutralised, never
// denied; the Agones controller's Shutdown of an Allocating server is held without failing its
// update; only the game server's own SDK identity (or a trusted one) sets the readiness
// annotation.
#include <gtest/gtest.h>

#include <algorithm>

#include "admission_test_util.h"
#include "contract/keys.h"

namespace aw::testing {
namespace {

using admission::Route;
namespace keys = aw::keys;

const std::string kNowStr = "2026-12-02T14:30:00.123456789Z";  // TestNow()
const std::string kLastAllocatedNew = "2026-12-02T14:23:13.123456789Z";
const std::string kV1s(kV1);

Obj Ready() { return Obj("gameserver-ready"); }
Obj Allocating() { return Obj("gameserver-allocating"); }
Obj Promoted() { return Obj("gameserver-promoted"); }
// An Allocating server of a Fleet whose template chose on-scale-down: Hold.
Obj AllocatingHold() { return Allocating().Ann(keys::kOnScaleDown, "Hold"); }
Obj AllocatorWrite() {
  return Ready().State("Allocated").Ann(keys::kLastAllocated, kLastAllocatedNew);
}

Response Mutate(const Obj& n, const Obj& o, std::string_view user, const CallOptions& opts = {}) {
  return Call(Route::kMutateGameServers, Review(kV1, "UPDATE", user, n.Json(), o.Json()), opts);
}
Response Validate(std::string_view op, std::string_view user, const Obj& n,
                  const std::optional<Obj>& o, const CallOptions& opts = {}) {
  return Call(Route::kValidateGameServers,
              Review(kV1, op, user, n.Json(), o ? std::optional(o->Json()) : std::nullopt), opts);
}
bool Has(const std::vector<std::string>& v, std::string_view k) {
  return std::find(v.begin(), v.end(), k) != v.end();
}
bool AnyContains(const std::vector<std::string>& v, std::string_view s) {
  return std::any_of(v.begin(), v.end(),
                     [&](const std::string& w) { return w.find(s) != std::string::npos; });
}
std::optional<std::string> GetLabel(Obj& o, std::string_view k) {
  auto& d = o.doc();
  if (!d.HasMember("metadata") || !d["metadata"].HasMember("labels")) return std::nullopt;
  auto& l = d["metadata"]["labels"];
  auto it = l.FindMember(rapidjson::Value(k.data(), static_cast<rapidjson::SizeType>(k.size())));
  if (it == l.MemberEnd()) return std::nullopt;
  return std::string(it->value.GetString());
}

// --- defect 1: the opt-in label stays while Allocating ---

TEST(AgonesOptIn, AllocationThatOptsOutIsGatedAndKeepsTheLabel) {
  Obj n = AllocatorWrite().Label(keys::kEnabledLabel, "false");
  Response first;
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, n, Ready(), {}, &first);
  EXPECT_EQ(patched.GetState(), "Allocating");
  EXPECT_EQ(GetLabel(patched, keys::kEnabledLabel), "true");
  EXPECT_TRUE(first.allowed);
  EXPECT_TRUE(Has(first.raw.neutralised, keys::kEnabledLabel));
  EXPECT_TRUE(AnyContains(first.warnings, "stays \"true\""));
  EXPECT_TRUE(Validate("UPDATE", kAllocator, patched, Ready()).allowed);
}

TEST(AgonesOptIn, AllocationThatDropsTheLabelKeepsIt) {
  Obj n = AllocatorWrite().NoLabel(keys::kEnabledLabel);
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, n, Ready());
  EXPECT_EQ(patched.GetState(), "Allocating");
  EXPECT_EQ(GetLabel(patched, keys::kEnabledLabel), "true");
}

TEST(AgonesOptIn, LaterWritesWhileAllocatingCannotOptOut) {
  for (auto user : {kStranger, kController, kSdk}) {
    Obj off = Allocating().Label(keys::kEnabledLabel, "false");
    Obj patched = MutateAndApply(kV1s, "UPDATE", user, off, Allocating());
    EXPECT_EQ(GetLabel(patched, keys::kEnabledLabel), "true") << user;
    EXPECT_TRUE(Validate("UPDATE", user, patched, Allocating()).allowed) << user;
    Obj gone = Allocating().NoLabel(keys::kEnabledLabel);
    Obj patched2 = MutateAndApply(kV1s, "UPDATE", user, gone, Allocating());
    EXPECT_EQ(GetLabel(patched2, keys::kEnabledLabel), "true") << user;
  }
  // The untrusted promotion attempt goes back to Allocating with the label.
  Obj promo = Allocating().State("Allocated").Label(keys::kEnabledLabel, "false");
  Obj patched = MutateAndApply(kV1s, "UPDATE", kStranger, promo, Allocating());
  EXPECT_EQ(patched.GetState(), "Allocating");
  EXPECT_EQ(GetLabel(patched, keys::kEnabledLabel), "true");
}

TEST(AgonesOptIn, LeavingTheCycleMayDropTheLabel) {
  Obj n = Allocating().State("Ready").NoLabel(keys::kEnabledLabel);
  Response r = Mutate(n, Allocating(), kSdk);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.patch.find("/metadata/labels"), std::string::npos) << r.patch;
  // Opting out outside the cycle is the user's business.
  Response r2 = Mutate(Ready().Label(keys::kEnabledLabel, "false"), Ready(), kStranger);
  EXPECT_EQ(r2.patch, "");
}

// --- defect 2: forged owned keys are neutralised, never denied ---

TEST(AgonesForged, OwnedKeysInAnAllocationAreNeutralised) {
  Obj n = AllocatorWrite()
              .Ann(keys::kConfirmed, kLastAllocatedNew)
              .Ann(keys::kOutcome, "Confirmed")
              .Ann(keys::kSince, "2020-01-01T00:00:00Z")
              .Ann(keys::kAllocation, kLastAllocatedNew + "-forged");
  Response first;
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, n, Ready(), {}, &first);
  EXPECT_TRUE(first.allowed);
  EXPECT_EQ(patched.GetState(), "Allocating");
  EXPECT_EQ(patched.GetAnn(keys::kSince), kNowStr);
  EXPECT_EQ(patched.GetAnn(keys::kAllocation), kLastAllocatedNew);
  EXPECT_EQ(patched.GetAnn(keys::kConfirmed), std::nullopt);
  EXPECT_EQ(patched.GetAnn(keys::kOutcome), std::nullopt);
  for (auto k : {keys::kSince, keys::kAllocation, keys::kConfirmed, keys::kOutcome}) {
    EXPECT_TRUE(Has(first.raw.neutralised, k)) << k;
  }
  EXPECT_TRUE(AnyContains(first.warnings, "ignored"));
  EXPECT_TRUE(AnyContains(first.warnings, std::string(keys::kConfirmed)));
  // What the validating webhook then sees passes: the allocator's update is never denied.
  EXPECT_TRUE(Validate("UPDATE", kAllocator, patched, Ready()).allowed);
}

TEST(AgonesForged, PlausibleForgedSinceIsStillReplacedOnAllocation) {
  Obj n = AllocatorWrite().Ann(keys::kSince, "2026-12-02T14:31:00Z");  // 1 minute ahead
  Response first;
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, n, Ready(), {}, &first);
  EXPECT_EQ(patched.GetAnn(keys::kSince), kNowStr);
  EXPECT_TRUE(Has(first.raw.neutralised, keys::kSince));
}

TEST(AgonesForged, OrdinaryAllocationReportsNothing) {
  Response first;
  MutateAndApply(kV1s, "UPDATE", kAllocator, AllocatorWrite().Ann("match", "m1"), Ready(), {},
                 &first);
  EXPECT_TRUE(first.raw.neutralised.empty());
  EXPECT_TRUE(first.warnings.empty());
  // Stale confirmed/outcome left by an earlier cycle are dropped silently (not forged).
  Obj old = Ready().Ann(keys::kConfirmed, "a").Ann(keys::kOutcome, "Confirmed");
  Obj n = AllocatorWrite().Ann(keys::kConfirmed, "a").Ann(keys::kOutcome, "Confirmed");
  Response r;
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, n, old, {}, &r);
  EXPECT_EQ(patched.GetAnn(keys::kConfirmed), std::nullopt);
  EXPECT_TRUE(r.raw.neutralised.empty());
}

TEST(AgonesForged, ReadinessInAnAllocationIsNeutralisedUnlessTheSdkWritesIt) {
  Obj n = AllocatorWrite().Ann(keys::kSdkReady, kLastAllocatedNew);
  Response first;
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, n, Ready(), {}, &first);
  EXPECT_EQ(patched.GetAnn(keys::kSdkReady), std::nullopt);
  EXPECT_TRUE(Has(first.raw.neutralised, keys::kSdkReady));
  EXPECT_TRUE(Validate("UPDATE", kAllocator, patched, Ready()).allowed);
  // The old value is kept, not removed.
  Obj old = Ready().Ann(keys::kSdkReady, "old-id");
  Obj n2 = AllocatorWrite().Ann(keys::kSdkReady, kLastAllocatedNew);
  Obj patched2 = MutateAndApply(kV1s, "UPDATE", kAllocator, n2, old);
  EXPECT_EQ(patched2.GetAnn(keys::kSdkReady), "old-id");
  // The SDK's own Allocate() may carry it.
  Obj patched3 = MutateAndApply(kV1s, "UPDATE", kSdk, n, Ready());
  EXPECT_EQ(patched3.GetAnn(keys::kSdkReady), kLastAllocatedNew);
}

TEST(AgonesForged, ReallocationOfAnAllocatedServerRevertsForgedKeys) {
  Obj old = Promoted();
  Obj n = Promoted()
              .Ann(keys::kConfirmed, "forged")
              .Ann(keys::kLastAllocated, kLastAllocatedNew)
              .Ann(keys::kOutcome, "TimedOut");
  Response first;
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, n, old, {}, &first);
  EXPECT_EQ(patched.GetState(), "Allocated");
  EXPECT_EQ(patched.GetAnn(keys::kConfirmed), old.GetAnn(keys::kConfirmed));
  EXPECT_EQ(patched.GetAnn(keys::kOutcome), old.GetAnn(keys::kOutcome));
  EXPECT_TRUE(Has(first.raw.neutralised, keys::kConfirmed));
  EXPECT_TRUE(Validate("UPDATE", kAllocator, patched, old).allowed);
}

TEST(AgonesForged, FailOpenStillNeutralises) {
  CallOptions opts;
  opts.crd = false;
  Obj n = AllocatorWrite().Ann(keys::kConfirmed, kLastAllocatedNew);
  Response first;
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, n, Ready(), opts, &first);
  EXPECT_EQ(patched.GetState(), "Allocated");
  EXPECT_TRUE(first.raw.fail_open);
  EXPECT_EQ(patched.GetAnn(keys::kConfirmed), std::nullopt);
  EXPECT_TRUE(Validate("UPDATE", kAllocator, patched, Ready(), opts).allowed);
}

TEST(AgonesForged, AForgedConfirmationNeverPromotes) {
  // The untrusted writer's "promotion" carrying confirmed == allocation goes back to Allocating
  // and loses the forged keys.
  Obj promo = Allocating().State("Allocated");
  promo.Ann(keys::kConfirmed, *Allocating().GetAnn(keys::kAllocation))
      .Ann(keys::kOutcome, "Confirmed");
  Response first;
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, promo, Allocating(), {}, &first);
  EXPECT_EQ(patched.GetState(), "Allocating");
  EXPECT_EQ(patched.GetAnn(keys::kConfirmed), std::nullopt);
  EXPECT_EQ(patched.GetAnn(keys::kOutcome), std::nullopt);
  EXPECT_TRUE(Has(first.raw.neutralised, keys::kConfirmed));
}

TEST(AgonesForged, RejectModeStillDeniesTheAllocation) {
  Obj old = Ready().Ann(keys::kMode, "reject");
  Obj n = AllocatorWrite().Ann(keys::kMode, "reject").Ann(keys::kConfirmed, "x");
  Response r = Mutate(n, old, kAllocator);
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.code, 403);
}

// --- defect 3 and issue 24: the controller's Shutdown of an Allocating server never fails ---

// The default (on-scale-down: Shutdown): applied, as for a Ready server, so a rolling update is not
// held up by the server (Agones counts it in shutdownReplicas until it is deleted); the abandoned
// allocation is recorded as outcome ScaledDown, with since/allocation naming it.
TEST(AgonesScaleDown, ControllerShutdownOfAllocatingIsAppliedByDefault) {
  Obj n = Allocating().State("Shutdown");
  Response first;
  Obj patched = MutateAndApply(kV1s, "UPDATE", kController, n, Allocating(), {}, &first);
  EXPECT_TRUE(first.allowed);
  EXPECT_FALSE(first.raw.shutdown_held);
  EXPECT_TRUE(first.raw.scaled_down);
  EXPECT_EQ(patched.GetState(), "Shutdown");
  EXPECT_EQ(patched.GetAnn(keys::kOutcome), "ScaledDown");
  EXPECT_EQ(patched.GetAnn(keys::kSince), Allocating().GetAnn(keys::kSince));
  EXPECT_EQ(patched.GetAnn(keys::kAllocation), Allocating().GetAnn(keys::kAllocation));
  EXPECT_EQ(patched.GetAnn(keys::kShutdownRequested), std::nullopt);
  EXPECT_TRUE(Validate("UPDATE", kController, patched, Allocating()).allowed);
  // Reinvoked on its own patch: nothing more to do.
  EXPECT_EQ(Mutate(patched, Allocating(), kController).patch, "");
  // "shutdown" is matched case-insensitively, like every enumerated value.
  Obj lower = Allocating().Ann(keys::kOnScaleDown, "shutdown");
  EXPECT_TRUE(Mutate(Obj(lower).State("Shutdown"), lower, kController).raw.scaled_down);
  // Nobody else may write the outcome: it is the resolver's, or the webhook's on this path.
  Obj forged = Allocating().State("Shutdown").Ann(keys::kOutcome, "ScaledDown");
  for (auto user : {kStranger, kSdk, kAllocator}) {
    Response r = Validate("UPDATE", user, forged, Allocating());
    EXPECT_FALSE(r.allowed) << user;
    EXPECT_NE(r.message.find(std::string(keys::kOutcome)), std::string::npos) << r.message;
  }
  // Nor another value, not even by the controller.
  Response other =
      Validate("UPDATE", kController,
               Allocating().State("Shutdown").Ann(keys::kOutcome, "Confirmed"), Allocating());
  EXPECT_FALSE(other.allowed);
  EXPECT_NE(other.message.find("ScaledDown"), std::string::npos) << other.message;
}

// on-scale-down is read from the old object: the Shutdown write itself cannot choose.
TEST(AgonesScaleDown, TheSettingIsTheServersNotTheWritersAndIsValidated) {
  Obj n = Allocating().State("Shutdown").Ann(keys::kOnScaleDown, "Hold");
  EXPECT_TRUE(Mutate(n, Allocating(), kController).raw.scaled_down);
  Obj bad = Ready().Ann(keys::kOnScaleDown, "Later");
  Response r = Validate("CREATE", kStranger, bad, std::nullopt);
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find(std::string(keys::kOnScaleDown)), std::string::npos) << r.message;
}

TEST(AgonesScaleDown, ControllerShutdownOfAllocatingIsHeldWithHold) {
  Obj n = AllocatingHold().State("Shutdown");
  Response first;
  Obj patched = MutateAndApply(kV1s, "UPDATE", kController, n, AllocatingHold(), {}, &first);
  EXPECT_TRUE(first.allowed);
  EXPECT_TRUE(first.raw.shutdown_held);
  EXPECT_EQ(patched.GetState(), "Allocating");
  EXPECT_EQ(patched.GetAnn(keys::kSince), Allocating().GetAnn(keys::kSince));
  EXPECT_EQ(patched.GetAnn(keys::kAllocation), Allocating().GetAnn(keys::kAllocation));
  EXPECT_TRUE(AnyContains(first.warnings, "scale-down protection"));
  EXPECT_TRUE(Validate("UPDATE", kController, patched, AllocatingHold()).allowed);
  // The controller's full update may also carry a dropped label: it is kept.
  Obj n2 = AllocatingHold().State("Shutdown").NoLabel(keys::kEnabledLabel);
  Obj patched2 = MutateAndApply(kV1s, "UPDATE", kController, n2, AllocatingHold());
  EXPECT_EQ(GetLabel(patched2, keys::kEnabledLabel), "true");
}

TEST(AgonesScaleDown, TheHeldShutdownIsRecordedAndAppliedWhenTheServerLeavesTheCycle) {
  Obj held = MutateAndApply(kV1s, "UPDATE", kController, AllocatingHold().State("Shutdown"),
                            AllocatingHold());
  EXPECT_EQ(held.GetAnn(keys::kShutdownRequested), kNowStr);
  // Held again (the controller's cache is in memory: a restarted one may ask again): unchanged.
  Obj again = MutateAndApply(kV1s, "UPDATE", kController, Obj(held).State("Shutdown"), held);
  EXPECT_EQ(again.GetAnn(keys::kShutdownRequested), kNowStr);
  // Promoted by the resolver: the request stays while the server hosts its match.
  Obj promoted = held;
  promoted.State("Allocated")
      .Ann(keys::kConfirmed, *held.GetAnn(keys::kAllocation))
      .Ann(keys::kOutcome, "Confirmed");
  Response p = Mutate(promoted, held, kResolver);
  EXPECT_TRUE(p.allowed);
  EXPECT_EQ(p.patch, "");
  // The game server's Ready() after the match: shut down instead (the controller counts the
  // server as deleted and would neither scale it down nor replace it).
  for (auto state : {"RequestReady", "Ready", "Unhealthy", "Reserved", "Error"}) {
    Response r;
    Obj after = MutateAndApply(kV1s, "UPDATE", kSdk, Obj(promoted).State(state), promoted, {}, &r);
    EXPECT_EQ(after.GetState(), "Shutdown") << state;
    EXPECT_TRUE(r.raw.shutdown_deferred) << state;
    EXPECT_TRUE(AnyContains(r.warnings, "applied now")) << state;
    EXPECT_EQ(after.GetAnn(keys::kShutdownRequested), std::nullopt);
    EXPECT_TRUE(Validate("UPDATE", kSdk, after, promoted).allowed) << state;
  }
  // The health controller's Unhealthy of the still-Allocating server: the same.
  Obj unhealthy = MutateAndApply(kV1s, "UPDATE", kController, Obj(held).State("Unhealthy"), held);
  EXPECT_EQ(unhealthy.GetState(), "Shutdown");
  // Without a held request nothing changes.
  EXPECT_EQ(
      MutateAndApply(kV1s, "UPDATE", kSdk, Promoted().State("RequestReady"), Promoted()).GetState(),
      "RequestReady");
}

TEST(AgonesScaleDown, OnlyTheHoldWritesTheShutdownRequest) {
  Obj forged = Allocating().Ann(keys::kShutdownRequested, kNowStr);
  // (The controller's identity may: that is what the hold produces on its behalf.)
  for (auto user : {kStranger, kSdk}) {
    Response r = Validate("UPDATE", user, forged, Allocating());
    EXPECT_FALSE(r.allowed) << user;
    EXPECT_NE(r.message.find(std::string(keys::kShutdownRequested)), std::string::npos);
  }
  EXPECT_TRUE(Validate("UPDATE", kResolver, forged, Allocating()).allowed);
  // An allocation carrying it is neutralised, and a new cycle drops a stale one.
  Obj n = AllocatorWrite().Ann(keys::kShutdownRequested, kNowStr);
  Response first;
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, n, Ready(), {}, &first);
  EXPECT_EQ(patched.GetAnn(keys::kShutdownRequested), std::nullopt);
  EXPECT_TRUE(Has(first.raw.neutralised, keys::kShutdownRequested));
  Obj stale = Ready().Ann(keys::kShutdownRequested, "2026-12-01T00:00:00Z");
  Obj n2 = AllocatorWrite().Ann(keys::kShutdownRequested, "2026-12-01T00:00:00Z");
  EXPECT_EQ(MutateAndApply(kV1s, "UPDATE", kAllocator, n2, stale).GetAnn(keys::kShutdownRequested),
            std::nullopt);
}

TEST(AgonesScaleDown, OthersShutDownAtOnce) {
  Obj n = Allocating().State("Shutdown");
  for (auto user : {kSdk, kResolver, kStranger}) {
    Response r;
    Obj patched = MutateAndApply(kV1s, "UPDATE", user, n, Allocating(), {}, &r);
    EXPECT_EQ(patched.GetState(), "Shutdown") << user;
    EXPECT_FALSE(r.raw.shutdown_held);
    EXPECT_TRUE(Validate("UPDATE", user, patched, Allocating()).allowed) << user;
  }
  // A server being deleted is not held back.
  Obj deleting = n;
  deleting.SetRaw("/metadata/deletionTimestamp", "\"2026-12-02T14:29:00Z\"");
  EXPECT_EQ(MutateAndApply(kV1s, "UPDATE", kController, deleting, Allocating()).GetState(),
            "Shutdown");
  // Nor when the CRD no longer accepts Allocating (writing it back would fail).
  CallOptions no_crd;
  no_crd.crd = false;
  EXPECT_FALSE(Mutate(n, Allocating(), kController, no_crd).raw.shutdown_held);
  // Ready and Allocated servers are the controller's to shut down.
  EXPECT_EQ(Mutate(Ready().State("Shutdown"), Ready(), kController).patch, "");
  EXPECT_FALSE(Mutate(Promoted().State("Shutdown"), Promoted(), kController).raw.shutdown_held);
  // Health: Unhealthy goes through.
  EXPECT_EQ(
      MutateAndApply(kV1s, "UPDATE", kController, Allocating().State("Unhealthy"), Allocating())
          .GetState(),
      "Unhealthy");
}

TEST(AgonesScaleDown, ControllerIdentityComesFromPolicy) {
  CallOptions opts;
  opts.policy.agones_controller_users = {"system:serviceaccount:agones:custom"};
  Obj n = AllocatingHold().State("Shutdown");
  EXPECT_FALSE(Mutate(n, AllocatingHold(), kController, opts).raw.shutdown_held);
  EXPECT_TRUE(
      Mutate(n, AllocatingHold(), "system:serviceaccount:agones:custom", opts).raw.shutdown_held);
  Obj d = Allocating().State("Shutdown");
  EXPECT_FALSE(Mutate(d, Allocating(), kController, opts).raw.scaled_down);
  EXPECT_TRUE(Mutate(d, Allocating(), "system:serviceaccount:agones:custom", opts).raw.scaled_down);
}

TEST(AgonesScaleDown, ValidationDoesNotDenyTheController) {
  // If the validating webhook sees the controller's Shutdown unchanged (e.g. the mutating one
  // ignored), it must still not fail the controller's update.
  EXPECT_TRUE(
      Validate("UPDATE", kController, Allocating().State("Shutdown"), Allocating()).allowed);
}

// --- defect 4: only the game server's SDK (or a trusted identity) confirms ---

TEST(AgonesReadiness, OnlyTheSdkIdentitySetsTheReadinessAnnotation) {
  const std::string id = *Allocating().GetAnn(keys::kAllocation);
  Obj n = Allocating().Ann(keys::kSdkReady, id);
  for (auto user : {kStranger, kController, kAllocator, std::string_view("admin")}) {
    Response r = Validate("UPDATE", user, n, Allocating());
    EXPECT_FALSE(r.allowed) << user;
    EXPECT_EQ(r.code, 403);
    EXPECT_NE(r.message.find(std::string(keys::kSdkReady)), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(std::string(user)), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("system:serviceaccount:default:agones-sdk"), std::string::npos);
  }
  EXPECT_TRUE(Validate("UPDATE", kSdk, n, Allocating()).allowed);
  EXPECT_TRUE(Validate("UPDATE", kResolver, n, Allocating()).allowed);
  // Changing an existing value: the same rule; removing it: anyone (it only withdraws readiness).
  Obj ready = Allocating().Ann(keys::kSdkReady, id);
  EXPECT_FALSE(
      Validate("UPDATE", kStranger, Allocating().Ann(keys::kSdkReady, "x"), ready).allowed);
  EXPECT_TRUE(Validate("UPDATE", kStranger, Allocating(), ready).allowed);
  // Outside the cycle too, while opted in (a value set early would count later).
  EXPECT_FALSE(
      Validate("UPDATE", kStranger, Ready().Ann(keys::kSdkReady, "true"), Ready()).allowed);
  // Not opted in: not the gate's business.
  Obj plain = Ready().NoLabel(keys::kEnabledLabel);
  EXPECT_TRUE(
      Validate("UPDATE", kStranger, Obj(plain).Ann(keys::kSdkReady, "true"), plain).allowed);
}

TEST(AgonesReadiness, TheSdkIdentityIsPerNamespaceAndPodServiceAccount) {
  const std::string id = *Allocating().GetAnn(keys::kAllocation);
  Obj n = Allocating().Ann(keys::kSdkReady, id);
  // Another namespace's SDK is not this GameServer's.
  EXPECT_FALSE(
      Validate("UPDATE", "system:serviceaccount:other:agones-sdk", n, Allocating()).allowed);
  // The pod template names its own service account: the sidecar runs as that one.
  Obj own = Allocating();
  own.SetRaw("/spec/template/spec/serviceAccountName", "\"game-sa\"");
  Obj own_n = own;
  own_n.Ann(keys::kSdkReady, id);
  EXPECT_FALSE(Validate("UPDATE", kSdk, own_n, own).allowed);
  EXPECT_TRUE(Validate("UPDATE", "system:serviceaccount:default:game-sa", own_n, own).allowed);
  // The default SDK service account comes from the policy (--sdk-service-account).
  CallOptions opts;
  opts.policy.sdk_service_account = "custom-sdk";
  EXPECT_FALSE(Validate("UPDATE", kSdk, n, Allocating(), opts).allowed);
  EXPECT_TRUE(Validate("UPDATE", "system:serviceaccount:default:custom-sdk", n, Allocating(), opts)
                  .allowed);
  // A wrong type is a 400, not a crash.
  Obj bad = n;
  bad.SetRaw("/spec/template/spec/serviceAccountName", "7");
  Response r = Validate("UPDATE", kSdk, bad, Allocating());
  EXPECT_EQ(r.raw.http_status, 400);
}

TEST(AgonesReadiness, CreateWithTheReadinessAnnotationIsDenied) {
  Obj n = Obj("gameserver-creating").Ann(keys::kSdkReady, "true");
  Response r = Validate("CREATE", kController, n, std::nullopt);
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find(std::string(keys::kSdkReady)), std::string::npos);
  EXPECT_TRUE(Validate("CREATE", kResolver, n, std::nullopt).allowed);
}

TEST(AgonesReadiness, TemplatesMayNotCarryTheReadinessAnnotation) {
  for (auto [route, fixture] : {std::pair{Route::kValidateFleets, "fleet"},
                                std::pair{Route::kValidateGameServerSets, "gameserverset"}}) {
    Obj t(fixture);
    t.SetRaw("/spec/template/metadata/annotations/agones.dev~1sdk-allocating-ready", "\"true\"");
    Response r = Call(route, Review(kV1, "CREATE", kStranger, t.Json(), std::nullopt,
                                    route == Route::kValidateFleets ? "Fleet" : "GameServerSet"));
    EXPECT_FALSE(r.allowed) << fixture;
    EXPECT_NE(r.message.find(std::string(keys::kSdkReady)), std::string::npos) << r.message;
  }
}

}  // namespace
}  // namespace aw::testing
