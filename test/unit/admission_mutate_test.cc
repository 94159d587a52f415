// /mutate/gameservers: every row of the decision table (docs/design.md, "Admission decisions"),
// both modes, fail-open, trusted vs untrusted, patch shape and idempotence under reinvocation.
#include <gtest/gtest.h>

#include "admission_test_util.h"
#include "contract/keys.h"
#include "policy/json_patch.h"
#include "util/time_format.h"

namespace aw::testing {
namespace {

using admission::Route;
namespace keys = aw::keys;

const std::string kNowStr = "2026-12-02T14:30:00.123456789Z";
const std::string kLastAllocatedOld = "2026-12-02T13:02:44.918273645Z";
const std::string kLastAllocatedNew = "2026-12-02T14:23:13.123456789Z";
const std::string kV1s(kV1);

Obj Ready() { return Obj("gameserver-ready"); }
// What the allocator writes: Allocated, a new last-allocated.
Obj AllocatorWrite() {
  return Ready().State("Allocated").Ann(keys::kLastAllocated, kLastAllocatedNew).Ann("map", "x");
}
Obj Allocating() { return Obj("gameserver-allocating"); }

Response Mutate(const Obj& n, const Obj& o, std::string_view user = kAllocator,
                const CallOptions& opts = {}, std::string_view api = kV1) {
  return Call(Route::kMutateGameServers, Review(api, "UPDATE", user, n.Json(), o.Json()), opts);
}

TEST(MutateRow1, NotOptedInIsAllowedUnchanged) {
  Obj old = Ready().NoLabel(keys::kEnabledLabel);
  Obj n = AllocatorWrite().NoLabel(keys::kEnabledLabel);
  Response r = Mutate(n, old);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.patch, "");
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(r.raw.outcome, admission::Outcome::kAllowed);
}

TEST(MutateRow1, LabelOtherThanTrueDoesNotOptIn) {
  Obj old = Ready().Label(keys::kEnabledLabel, "True");
  Obj n = AllocatorWrite().Label(keys::kEnabledLabel, "True");
  EXPECT_EQ(Mutate(n, old).patch, "");
}

TEST(MutateRow1, RemovingTheLabelInTheAllocatingUpdateDoesNotBypass) {
  Obj n = AllocatorWrite().NoLabel(keys::kEnabledLabel);
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, n, Ready());
  EXPECT_EQ(patched.GetState(), "Allocating");
}

TEST(MutateRow1, FailOpenWhenCrdLacksAllocating) {
  CallOptions opts;
  opts.crd = false;
  Response r = Mutate(AllocatorWrite(), Ready(), kAllocator, opts);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.patch, "");
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("fail open"), std::string::npos);
  EXPECT_TRUE(r.raw.fail_open);
  EXPECT_EQ(r.raw.outcome, admission::Outcome::kAllowed);
}

TEST(MutateRow1, FailOpenAlsoInRejectMode) {
  CallOptions opts;
  opts.crd = false;
  Response r = Mutate(AllocatorWrite().Ann(keys::kMode, "reject"),
                      Ready().Ann(keys::kMode, "reject"), kAllocator, opts);
  EXPECT_TRUE(r.allowed);
  EXPECT_TRUE(r.raw.fail_open);
}

TEST(MutateRow1, FailOpenOnUntrustedPromotion) {
  CallOptions opts;
  opts.crd = false;
  Response r = Mutate(Allocating().State("Allocated"), Allocating(), kStranger, opts);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.patch, "");
  EXPECT_TRUE(r.raw.fail_open);
}

TEST(MutateRow1, NoFailOpenWarningForUngatedUpdates) {
  CallOptions opts;
  opts.crd = false;
  Response r = Mutate(Ready().Label("x", "y"), Ready(), kSdk, opts);
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_FALSE(r.raw.fail_open);
}

TEST(MutateRow2, AllocatorUpdateIsRewrittenToAllocating) {
  Response first;
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, AllocatorWrite(), Ready(), {}, &first);
  EXPECT_TRUE(first.allowed);
  EXPECT_EQ(first.raw.outcome, admission::Outcome::kRewritten);
  EXPECT_EQ(
      first.patch,
      "[{\"op\":\"replace\",\"path\":\"/status/state\",\"value\":\"Allocating\"},"
      "{\"op\":\"add\",\"path\":\"/metadata/annotations/allocating.agones.dev~1since\","
      "\"value\":\"" +
          kNowStr +
          "\"},"
          "{\"op\":\"add\",\"path\":\"/metadata/annotations/allocating.agones.dev~1allocation\","
          "\"value\":\"" +
          kLastAllocatedNew + "\"}]");
  EXPECT_EQ(patched.GetState(), "Allocating");
  EXPECT_EQ(patched.GetAnn(keys::kSince), kNowStr);
  EXPECT_EQ(patched.GetAnn(keys::kAllocation), kLastAllocatedNew);
  EXPECT_EQ(first.raw.uid, "uid-1");
  EXPECT_EQ(first.raw.namespace_, "default");
  EXPECT_EQ(first.raw.name, "xonotic-8k2vq-7tq2m");
}

TEST(MutateRow2, V1beta1IsAnsweredInKind) {
  Response r = Mutate(AllocatorWrite(), Ready(), kAllocator, {}, kV1beta1);
  EXPECT_EQ(r.api_version, "admission.k8s.io/v1beta1");
  EXPECT_EQ(r.uid, "uid-1");
  EXPECT_NE(r.patch, "");
  Obj patched =
      MutateAndApply(std::string(kV1beta1), "UPDATE", kAllocator, AllocatorWrite(), Ready());
  EXPECT_EQ(patched.GetState(), "Allocating");
}

TEST(MutateRow2, StaleConfirmedAndOutcomeAreDropped) {
  Obj old = Ready().Ann(keys::kConfirmed, kLastAllocatedOld).Ann(keys::kOutcome, "Confirmed");
  Obj n =
      AllocatorWrite().Ann(keys::kConfirmed, kLastAllocatedOld).Ann(keys::kOutcome, "Confirmed");
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, n, old);
  EXPECT_EQ(patched.GetState(), "Allocating");
  EXPECT_FALSE(patched.GetAnn(keys::kConfirmed));
  EXPECT_FALSE(patched.GetAnn(keys::kOutcome));
}

// The gateway's marks belong to one allocation (docs/gateway.md, "No server lost"): an earlier
// allocation's (unchanged by this write) go, this allocation's own metadata stays, and
// `delivered` never survives into a new allocation.
TEST(MutateRow2, EarlierDeliveryMarksAreDropped) {
  const std::string old_by = "2026-12-02T13:03:00Z";
  Obj old = Ready()
                .Ann(keys::kAnswerBy, old_by)
                .Ann(keys::kRequestKey, "match-1")
                .Ann(keys::kDelivered, "2026-12-02T13:02:50Z");
  Obj n = AllocatorWrite()
              .Ann(keys::kAnswerBy, old_by)
              .Ann(keys::kRequestKey, "match-1")
              .Ann(keys::kDelivered, "2026-12-02T13:02:50Z");
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, n, old);
  EXPECT_EQ(patched.GetState(), "Allocating");
  EXPECT_FALSE(patched.GetAnn(keys::kAnswerBy));
  EXPECT_FALSE(patched.GetAnn(keys::kRequestKey));
  EXPECT_FALSE(patched.GetAnn(keys::kDelivered));
}

TEST(MutateRow2, TheAllocationsOwnDeliveryMarksAreKept) {
  Obj old = Ready()
                .Ann(keys::kAnswerBy, "2026-12-02T13:03:00Z")
                .Ann(keys::kRequestKey, "match-1")
                .Ann(keys::kDelivered, "2026-12-02T13:02:50Z");
  Obj n = AllocatorWrite()
              .Ann(keys::kAnswerBy, "2026-12-02T14:23:43Z")
              .Ann(keys::kRequestKey, "match-2")
              .Ann(keys::kDelivered, "2026-12-02T13:02:50Z");
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, n, old);
  EXPECT_EQ(patched.GetAnn(keys::kAnswerBy), "2026-12-02T14:23:43Z");
  EXPECT_EQ(patched.GetAnn(keys::kRequestKey), "match-2");
  EXPECT_FALSE(patched.GetAnn(keys::kDelivered));
}

TEST(MutateRow2, StaleSinceCopiedFromOldIsReplaced) {
  Obj old = Ready().Ann(keys::kSince, "2026-12-01T00:00:00Z").Ann(keys::kAllocation, "old-id");
  Obj n =
      AllocatorWrite().Ann(keys::kSince, "2026-12-01T00:00:00Z").Ann(keys::kAllocation, "old-id");
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, n, old);
  EXPECT_EQ(patched.GetAnn(keys::kSince), kNowStr);
  EXPECT_EQ(patched.GetAnn(keys::kAllocation), kLastAllocatedNew);
}

TEST(MutateRow2, SdkAllocateWithoutNewLastAllocatedUsesSince) {
  // SDK Allocate(): Allocated, last-allocated left from an earlier match.
  Obj n = Ready().State("Allocated");
  Obj patched = MutateAndApply(kV1s, "UPDATE", kSdk, n, Ready());
  EXPECT_EQ(patched.GetState(), "Allocating");
  EXPECT_EQ(patched.GetAnn(keys::kAllocation), kNowStr);
}

TEST(MutateRow2, NoAnnotationsMapAddsTheWholeMap) {
  Obj old = Ready().NoAnnotations();
  Obj n = Ready().NoAnnotations().State("Allocated");
  Response first;
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, n, old, {}, &first);
  EXPECT_EQ(first.patch,
            "[{\"op\":\"replace\",\"path\":\"/status/state\",\"value\":\"Allocating\"},"
            "{\"op\":\"add\",\"path\":\"/metadata/annotations\",\"value\":{"
            "\"allocating.agones.dev/since\":\"" +
                kNowStr +
                "\","
                "\"allocating.agones.dev/allocation\":\"" +
                kNowStr + "\"}}]");
  EXPECT_EQ(patched.GetAnn(keys::kSince), kNowStr);
}

TEST(MutateRow2, NullAnnotationsMapIsTreatedAsAbsent) {
  Obj n = Ready().State("Allocated").SetRaw("/metadata/annotations", "null");
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, n, Ready());
  EXPECT_EQ(patched.GetAnn(keys::kSince), kNowStr);
}

TEST(MutateRow2, FromEveryStateOutsideTheCycle) {
  for (std::string_view st : {"Ready", "Reserved", "Scheduled", "RequestReady", "Unhealthy", ""}) {
    Obj old = Ready().State(st);
    Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, AllocatorWrite(), old);
    EXPECT_EQ(patched.GetState(), "Allocating") << st;
  }
}

TEST(MutateRow2, RejectModeDenies) {
  Obj old = Ready().Ann(keys::kMode, "reject");
  Obj n = AllocatorWrite().Ann(keys::kMode, "reject");
  Response r = Mutate(n, old);
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.code, 403);
  EXPECT_EQ(r.status_reason, "Forbidden");
  EXPECT_NE(r.message.find("allocating.agones.dev/mode"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("default/xonotic-8k2vq-7tq2m"), std::string::npos) << r.message;
  EXPECT_EQ(r.patch, "");
  EXPECT_EQ(r.raw.outcome, admission::Outcome::kDenied);
}

TEST(MutateRow2, InvalidModeFallsBackToRewrite) {
  Obj n = AllocatorWrite().Ann(keys::kMode, "bogus");
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, n, Ready().Ann(keys::kMode, "bogus"));
  EXPECT_EQ(patched.GetState(), "Allocating");
}

TEST(MutateRow2, TrustedUserIsGatedToo) {
  Obj patched = MutateAndApply(kV1s, "UPDATE", kResolver, AllocatorWrite(), Ready());
  EXPECT_EQ(patched.GetState(), "Allocating");
}

TEST(MutateRow3, TrustedPromotionWithConfirmedIsAllowed) {
  Obj old = Allocating();
  Obj n = Allocating()
              .State("Allocated")
              .Ann(keys::kConfirmed, kLastAllocatedNew)
              .Ann(keys::kOutcome, "Confirmed");
  Response r = Mutate(n, old, kResolver);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.patch, "");
}

TEST(MutateRow3, TrustedTimeoutToAllocatedIsAllowed) {
  Obj n = Allocating().State("Allocated").Ann(keys::kOutcome, "TimedOut");
  Response r = Mutate(n, Allocating(), kResolver);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.patch, "");
}

TEST(MutateRow3, TrustedWithoutMatchingConfirmedGoesBack) {
  Obj n = Allocating().State("Allocated").Ann(keys::kConfirmed, "some-other-id");
  Obj patched = MutateAndApply(kV1s, "UPDATE", kResolver, n, Allocating());
  EXPECT_EQ(patched.GetState(), "Allocating");
  Obj n2 = Allocating().State("Allocated");
  EXPECT_EQ(MutateAndApply(kV1s, "UPDATE", kResolver, n2, Allocating()).GetState(), "Allocating");
}

TEST(MutateRow3, UntrustedPromotionGoesBackEvenWithConfirmed) {
  for (std::string_view user : {kStranger, kSdk, kAllocator, kController, std::string_view("")}) {
    Obj n = Allocating().State("Allocated").Ann(keys::kConfirmed, kLastAllocatedNew);
    Response first;
    Obj patched = MutateAndApply(kV1s, "UPDATE", user, n, Allocating(), {}, &first);
    EXPECT_EQ(patched.GetState(), "Allocating") << user;
    // Back to Allocating, and the forged confirmation is neutralised (issue 9).
    EXPECT_EQ(first.patch,
              "[{\"op\":\"replace\",\"path\":\"/status/state\",\"value\":\"Allocating\"},"
              "{\"op\":\"remove\",\"path\":\"/metadata/annotations/"
              "allocating.agones.dev~1confirmed\"}]");
    EXPECT_EQ(patched.GetAnn(keys::kConfirmed), std::nullopt) << user;
    // The cycle's identity is kept.
    EXPECT_EQ(patched.GetAnn(keys::kSince), Allocating().GetAnn(keys::kSince));
  }
}

TEST(MutateRow3, DroppedSinceIsRestoredFromOld) {
  Obj n = Allocating().State("Allocated").NoAnn(keys::kSince).NoAnn(keys::kAllocation);
  Obj patched = MutateAndApply(kV1s, "UPDATE", kStranger, n, Allocating());
  EXPECT_EQ(patched.GetAnn(keys::kSince), Allocating().GetAnn(keys::kSince));
  EXPECT_EQ(patched.GetAnn(keys::kAllocation), Allocating().GetAnn(keys::kAllocation));
}

TEST(MutateRow3, RejectModeDeniesUntrustedPromotion) {
  Obj old = Allocating().Ann(keys::kMode, "reject");
  Obj n = Allocating().Ann(keys::kMode, "reject").State("Allocated");
  Response r = Mutate(n, old, kStranger);
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find("allocating.agones.dev/mode"), std::string::npos);
  EXPECT_NE(r.message.find("Allocating"), std::string::npos);
  // The resolver's promotion still passes in reject mode.
  Obj ok = n;
  ok.Ann(keys::kConfirmed, kLastAllocatedNew);
  EXPECT_TRUE(Mutate(ok, old, kResolver).allowed);
}

TEST(MutateRow4, DirectAllocatingGetsSinceAndAllocation) {
  Obj n = Ready().State("Allocating");
  Response first;
  Obj patched = MutateAndApply(kV1s, "UPDATE", kStranger, n, Ready(), {}, &first);
  EXPECT_EQ(patched.GetState(), "Allocating");
  EXPECT_EQ(patched.GetAnn(keys::kSince), kNowStr);
  EXPECT_EQ(patched.GetAnn(keys::kAllocation), kNowStr);  // last-allocated is stale
  EXPECT_EQ(first.raw.outcome, admission::Outcome::kRewritten);
}

TEST(MutateRow4, DirectAllocatingWithNewLastAllocated) {
  Obj n = Ready().State("Allocating").Ann(keys::kLastAllocated, kLastAllocatedNew);
  Obj patched = MutateAndApply(kV1s, "UPDATE", kStranger, n, Ready());
  EXPECT_EQ(patched.GetAnn(keys::kAllocation), kLastAllocatedNew);
}

TEST(MutateRow4, WriterSuppliedFreshSinceIsKept) {
  Obj n = Ready().State("Allocating").Ann(keys::kSince, "2026-12-02T14:29:59Z");
  Obj patched = MutateAndApply(kV1s, "UPDATE", kStranger, n, Ready());
  EXPECT_EQ(patched.GetAnn(keys::kSince), "2026-12-02T14:29:59Z");
  EXPECT_EQ(patched.GetAnn(keys::kAllocation), "2026-12-02T14:29:59Z");
}

TEST(MutateRow4, StayingAllocatingWithoutSinceIsRestored) {
  Obj n = Allocating().NoAnn(keys::kSince);
  Obj patched = MutateAndApply(kV1s, "UPDATE", kSdk, n, Allocating());
  EXPECT_EQ(patched.GetAnn(keys::kSince), Allocating().GetAnn(keys::kSince));
  // Neither old nor new had it: now.
  Obj old = Allocating().NoAnn(keys::kSince).NoAnn(keys::kAllocation);
  Obj patched2 = MutateAndApply(kV1s, "UPDATE", kSdk, old, old);
  EXPECT_EQ(patched2.GetAnn(keys::kSince), kNowStr);
  EXPECT_EQ(patched2.GetAnn(keys::kAllocation), kNowStr);
}

TEST(MutateRow4, SdkAnnotationWhileAllocatingIsUnchanged) {
  Obj n = Allocating().Ann(keys::kSdkReady, kLastAllocatedNew);
  Response r = Mutate(n, Allocating(), kSdk);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.patch, "");
}

TEST(MutateRow4, NewLastAllocatedWhileAllocatingKeepsTheCycle) {
  Obj n = Allocating().Ann(keys::kLastAllocated, "2026-12-02T14:29:00Z");
  Response r = Mutate(n, Allocating());
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.patch, "");
}

TEST(MutateRow5, LeavingTheCycleRemovesOwnedAnnotations) {
  Obj old = Allocating()
                .State("Allocated")
                .Ann(keys::kConfirmed, kLastAllocatedNew)
                .Ann(keys::kOutcome, "Confirmed");
  for (std::string_view st : {"Ready", "Reserved", "Shutdown", "Error", "Unhealthy", "Scheduled"}) {
    Obj n = old;
    n.State(st);
    Response first;
    Obj patched = MutateAndApply(kV1s, "UPDATE", kSdk, n, old, {}, &first);
    EXPECT_EQ(patched.GetState(), std::string(st));
    for (auto k : {keys::kSince, keys::kAllocation, keys::kConfirmed, keys::kOutcome}) {
      EXPECT_FALSE(patched.GetAnn(k)) << st << " " << k;
    }
    EXPECT_EQ(
        first.patch,
        "[{\"op\":\"remove\",\"path\":\"/metadata/annotations/allocating.agones.dev~1since\"},"
        "{\"op\":\"remove\",\"path\":\"/metadata/annotations/allocating.agones.dev~1allocation\"},"
        "{\"op\":\"remove\",\"path\":\"/metadata/annotations/allocating.agones.dev~1confirmed\"},"
        "{\"op\":\"remove\",\"path\":\"/metadata/annotations/allocating.agones.dev~1outcome\"}]");
  }
}

TEST(MutateRow5, RemovesOnlyKeysThatExist) {
  Obj n = Allocating().State("Unhealthy");
  Response first;
  MutateAndApply(kV1s, "UPDATE", kController, n, Allocating(), {}, &first);
  EXPECT_EQ(
      first.patch,
      "[{\"op\":\"remove\",\"path\":\"/metadata/annotations/allocating.agones.dev~1since\"},"
      "{\"op\":\"remove\",\"path\":\"/metadata/annotations/allocating.agones.dev~1allocation\"}]");
}

TEST(MutateRow5, CleanObjectIsUnchanged) {
  Response r = Mutate(Ready().Label("game", "other"), Ready(), kSdk);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.patch, "");
  EXPECT_EQ(r.raw.outcome, admission::Outcome::kAllowed);
}

TEST(MutateRow5, OnlyTheTransitionCleansUp) {
  // After the resolver's timeout write, later updates of the Unhealthy server keep the outcome.
  Obj timed_out = Allocating().State("Unhealthy").Ann(keys::kOutcome, "TimedOut");
  Obj later = timed_out;
  later.Label("x", "y");
  Response r = Mutate(later, timed_out, kController);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.patch, "");
  // Leftovers on a Ready server are replaced when the next cycle starts.
  Obj leftover = Ready().Ann(keys::kSince, "2026-12-01T00:00:00Z").Ann(keys::kOutcome, "TimedOut");
  EXPECT_EQ(Mutate(leftover, leftover, kSdk).patch, "");
  Obj next = leftover;
  next.State("Allocated").Ann(keys::kLastAllocated, kLastAllocatedNew);
  Obj patched = MutateAndApply(kV1s, "UPDATE", kAllocator, next, leftover);
  EXPECT_EQ(patched.GetAnn(keys::kSince), kNowStr);
  EXPECT_FALSE(patched.GetAnn(keys::kOutcome));
}

TEST(MutateRow5, TrustedIdentityKeepsItsOutcome) {
  Obj n = Allocating().State("Unhealthy").Ann(keys::kOutcome, "TimedOut");
  Response r = Mutate(n, Allocating(), kResolver);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.patch, "");
}

TEST(MutateAllocated, ReallocationOfAllocatedServerIsUnchanged) {
  Obj old = Obj("gameserver-promoted");
  Obj n = old;
  n.Ann(keys::kLastAllocated, "2026-12-02T14:29:00Z").Ann("players", "5");
  Response r = Mutate(n, old, kAllocator);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.patch, "");
}

TEST(MutateOperations, CreateAndDeleteAreAllowedUnchanged) {
  Obj c = Obj("gameserver-creating");
  Response r =
      Call(Route::kMutateGameServers, Review(kV1, "CREATE", kController, c.Json(), std::nullopt));
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.patch, "");
  Response d = Call(Route::kMutateGameServers,
                    Review(kV1, "DELETE", kController, std::nullopt, Allocating().Json()));
  EXPECT_TRUE(d.allowed);
  Response x = Call(Route::kMutateGameServers,
                    Review(kV1, "CONNECT", kController, std::nullopt, std::nullopt));
  EXPECT_TRUE(x.allowed);
}

TEST(MutatePatch, PointerEscaping) {
  EXPECT_EQ(policy::EscapePointerToken("a~b/c"), "a~0b~1c");
  EXPECT_EQ(policy::EscapePointerToken("~/~/"), "~0~1~0~1");
  EXPECT_EQ(policy::EscapePointerToken("plain"), "plain");
  EXPECT_EQ(policy::EscapePointerToken(""), "");
}

TEST(MutatePatch, EveryPatchAppliesAndIsIdempotentAcrossScenarios) {
  // A sweep over (old state, new state, user, annotation variants): every produced patch must
  // apply to the object as sent and be a fixpoint under reinvocation (checked in MutateAndApply).
  std::vector<std::string> states = {"Ready", "Allocated", "Allocating", "Shutdown", "Reserved"};
  std::vector<std::string_view> users = {kAllocator, kResolver, kSdk};
  int variants = 0;
  for (const auto& os : states) {
    for (const auto& ns : states) {
      for (auto user : users) {
        for (int v = 0; v < 4; ++v) {
          Obj old = Ready().State(os);
          Obj n = Ready().State(ns);
          if (v & 1) {
            old.Ann(keys::kSince, "2026-12-02T14:00:00Z").Ann(keys::kAllocation, "a1");
            n.Ann(keys::kSince, "2026-12-02T14:00:00Z").Ann(keys::kAllocation, "a1");
          }
          if (v & 2) {
            n.Ann(keys::kLastAllocated, kLastAllocatedNew)
                .Ann(keys::kConfirmed, "a1")
                .Ann(keys::kOutcome, "Confirmed");
          }
          MutateAndApply(kV1s, "UPDATE", user, n, old);
          ++variants;
        }
      }
    }
  }
  EXPECT_EQ(variants, 5 * 5 * 3 * 4);
}

}  // namespace
}  // namespace aw::testing
