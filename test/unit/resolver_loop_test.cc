// The resolver loop with fake ports: promotion, timeout actions, probes, conflicts, deletions,
// servers moved away by someone else, no double promotion, and resumption after a restart.
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "resolver/resolver.h"
#include "resolver_test_util.h"
#include "runtime/manager.h"

namespace aw::resolver {
namespace {

using namespace std::chrono_literals;
using testing::AllocatingAnnotations;
using testing::FakeClock;
using testing::FakeEvents;
using testing::FakePatcher;
using testing::FakeProber;
using testing::FakeSource;
using testing::GsSpec;
using testing::ManualExecutor;
using testing::T0;
using testing::View;

const std::string kReady(keys::kSdkReady);
const std::string kAlloc(keys::kAllocation);

class LoopTest : public ::testing::Test {
 protected:
  LoopTest() : metrics_(registry_) { Make(); }

  void Make() {
    resolver_.reset();
    ResolverOptions o;
    o.resync_period = 1h;
    resolver_ = std::make_unique<Resolver>(o, source_, patcher_, events_, prober_, clock_, exec_,
                                           &metrics_);
    resolver_->EnableStepMode();
  }

  // Steps and runs posted patches until nothing more happens.
  void Settle() {
    for (int i = 0; i < 20; ++i) {
      resolver_->Step();
      if (exec_.RunAll() == 0) break;
    }
  }

  GsSpec Spec(std::map<std::string, std::string> extra = {}) {
    GsSpec s;
    s.annotations = AllocatingAnnotations(T0());
    for (auto& [k, v] : extra) s.annotations[k] = v;
    return s;
  }

  void Put(const GsSpec& s) {
    source_.Put(View(s));
    resolver_->Notify(s.ns, s.name);
  }

  std::shared_ptr<const GameServerView> Current(const std::string& key = "default/gs-1") {
    return source_.At(key);
  }

  std::string Metrics() {
    prometheus::TextSerializer ser;
    return ser.Serialize(registry_.Collect());
  }

  prometheus::Registry registry_;
  resolver::Metrics metrics_;
  FakeClock clock_;
  FakeSource source_;
  FakePatcher patcher_{source_};
  FakeEvents events_;
  FakeProber prober_;
  ManualExecutor exec_;
  std::unique_ptr<Resolver> resolver_;
};

TEST_F(LoopTest, PromotesWhenReady) {
  Put(Spec({{kReady, util::FormatRfc3339Nano(T0())}}));
  clock_.now = T0() + 1500ms;
  Settle();
  auto gs = Current();
  EXPECT_EQ(gs->state, "Allocated");
  EXPECT_EQ(*gs->Annotation(keys::kConfirmed), gs->allocation);
  EXPECT_EQ(*gs->Annotation(keys::kOutcome), "Confirmed");
  ASSERT_EQ(events_.events.size(), 1u);
  EXPECT_EQ(events_.events[0].type, EventType::kNormal);
  EXPECT_EQ(events_.events[0].reason, "AllocatingConfirmed");
  EXPECT_NE(events_.events[0].message.find("1.5s"), std::string::npos) << events_.events[0].message;
  EXPECT_EQ(resolver_->Tracked(), 0u);
  EXPECT_NE(Metrics().find("allocating_webhook_resolver_promotions_total 1"), std::string::npos);
  EXPECT_NE(Metrics().find("allocating_webhook_allocating_servers 0"), std::string::npos);
}

TEST_F(LoopTest, WaitsForTheAnnotationThenPromotes) {
  Put(Spec());
  Settle();
  EXPECT_TRUE(patcher_.patches.empty());
  EXPECT_EQ(resolver_->Tracked(), 1u);
  EXPECT_NE(Metrics().find("allocating_webhook_allocating_servers 1"), std::string::npos);
  GsSpec s = Spec({{kReady, util::FormatRfc3339Nano(T0())}});
  s.rv = "101";
  Put(s);
  Settle();
  EXPECT_EQ(Current()->state, "Allocated");
  ASSERT_EQ(patcher_.patches.size(), 1u);
  EXPECT_NE(patcher_.patches[0].find("\"value\":\"101\""), std::string::npos);
}

TEST_F(LoopTest, TimesOutToUnhealthyByDefault) {
  Put(Spec());
  Settle();
  clock_.now = T0() + 29s;
  Settle();
  EXPECT_EQ(Current()->state, "Allocating");
  clock_.now = T0() + 30s;
  Settle();
  auto gs = Current();
  EXPECT_EQ(gs->state, "Unhealthy");
  EXPECT_EQ(*gs->Annotation(keys::kOutcome), "TimedOut");
  EXPECT_EQ(gs->Annotation(keys::kConfirmed), std::nullopt);
  ASSERT_EQ(events_.events.size(), 1u);
  EXPECT_EQ(events_.events[0].type, EventType::kWarning);
  EXPECT_EQ(events_.events[0].reason, "AllocatingTimedOut");
  EXPECT_NE(events_.events[0].message.find("agones.dev/sdk-allocating-ready not set"),
            std::string::npos)
      << events_.events[0].message;
  EXPECT_NE(Metrics().find("allocating_webhook_resolver_timeouts_total{action=\"Unhealthy\"} 1"),
            std::string::npos);
}

TEST_F(LoopTest, TimeoutActionsAllocatedAndShutdown) {
  GsSpec a = Spec(
      {{"allocating.agones.dev/on-timeout", "Allocated"}, {"allocating.agones.dev/timeout", "5s"}});
  a.name = "fail-open";
  GsSpec b = Spec(
      {{"allocating.agones.dev/on-timeout", "Shutdown"}, {"allocating.agones.dev/timeout", "5s"}});
  b.name = "shut";
  Put(a);
  Put(b);
  clock_.now = T0() + 5s;
  Settle();
  auto ga = Current("default/fail-open");
  EXPECT_EQ(ga->state, "Allocated");
  EXPECT_EQ(*ga->Annotation(keys::kConfirmed), ga->allocation);
  EXPECT_EQ(*ga->Annotation(keys::kOutcome), "TimedOut");
  auto gb = Current("default/shut");
  EXPECT_EQ(gb->state, "Shutdown");
  EXPECT_EQ(*gb->Annotation(keys::kOutcome), "TimedOut");
  EXPECT_EQ(events_.events.size(), 2u);
}

TEST_F(LoopTest, ProbesOnItsPeriodAndPromotesWhenItPasses) {
  Put(Spec({{kReady, util::FormatRfc3339Nano(T0())},
            {"allocating.agones.dev/probe-port", "game"},
            {"allocating.agones.dev/probe-type", "tcp"},
            {"allocating.agones.dev/probe-period", "500ms"}}));
  Settle();
  ASSERT_EQ(prober_.pending.size(), 1u);
  EXPECT_EQ(prober_.pending[0].first.type, probe::Type::kTcp);
  EXPECT_EQ(prober_.pending[0].first.port, 7777);
  prober_.CompleteAll({probe::Status::kFailure, "connection refused"});
  Settle();
  EXPECT_TRUE(patcher_.patches.empty());
  EXPECT_TRUE(prober_.pending.empty());  // the next probe waits for the period
  clock_.now = T0() + 499ms;
  Settle();
  EXPECT_TRUE(prober_.pending.empty());
  clock_.now = T0() + 500ms;
  Settle();
  ASSERT_EQ(prober_.pending.size(), 1u);
  prober_.CompleteAll({probe::Status::kSuccess, "connected"});
  Settle();
  EXPECT_EQ(Current()->state, "Allocated");
  EXPECT_NE(Metrics().find("allocating_webhook_probes_total{result=\"failure\",type=\"tcp\"} 1"),
            std::string::npos);
}

TEST_F(LoopTest, ProbeOutlastingItsPeriodDoesNotSpin) {
  // A long prober queue can keep a probe in flight past the server's next probe time: the loop
  // must neither spin nor start a second probe; it waits for the result (or the deadline).
  Put(Spec({{kReady, util::FormatRfc3339Nano(T0())},
            {"allocating.agones.dev/probe-port", "http"},
            {"allocating.agones.dev/timeout", "10s"}}));
  Settle();
  ASSERT_EQ(prober_.pending.size(), 1u);
  clock_.now = T0() + 2s;  // eight periods later, still in flight
  TimePoint next = resolver_->Step();
  EXPECT_EQ(next, T0() + 10s);  // only the deadline is left to wake for
  EXPECT_EQ(prober_.pending.size(), 1u);
  prober_.CompleteAll({probe::Status::kSuccess, "http 200"});
  Settle();
  EXPECT_EQ(Current()->state, "Allocated");
}

TEST_F(LoopTest, ConfirmationAfterAFailedProbeIsProbedAtOnce) {
  GsSpec s = Spec(
      {{"allocating.agones.dev/probe-port", "http"}, {"allocating.agones.dev/probe-period", "1s"}});
  Put(s);
  Settle();
  ASSERT_EQ(prober_.CompleteAll({probe::Status::kFailure, "http 503"}), 1u);
  Settle();
  clock_.now = T0() + 100ms;
  // The game server loads and confirms well before the next period: probe right away.
  s.annotations[kReady] = util::FormatRfc3339Nano(T0());
  s.rv = "101";
  Put(s);
  Settle();
  ASSERT_EQ(prober_.pending.size(), 1u);
  prober_.CompleteAll({probe::Status::kSuccess, "http 200"});
  Settle();
  EXPECT_EQ(Current()->state, "Allocated");
  // An unrelated change while the annotation is still missing does not probe early.
  GsSpec other = Spec(
      {{"allocating.agones.dev/probe-port", "http"}, {"allocating.agones.dev/probe-period", "1s"}});
  other.name = "other";
  Put(other);
  Settle();
  prober_.CompleteAll({probe::Status::kFailure, "http 503"});
  Settle();
  other.rv = "200";
  other.annotations["unrelated"] = "x";
  Put(other);
  Settle();
  EXPECT_TRUE(prober_.pending.empty());
}

TEST_F(LoopTest, ProbeFailingAtTheDeadlineIsNamedInTheEvent) {
  Put(Spec({{kReady, util::FormatRfc3339Nano(T0())},
            {"allocating.agones.dev/probe-port", "http"},
            {"allocating.agones.dev/timeout", "1s"}}));
  Settle();
  prober_.CompleteAll({probe::Status::kFailure, "http 503"});
  clock_.now = T0() + 1s;
  Settle();
  prober_.CompleteAll({probe::Status::kFailure, "http 503"});
  Settle();
  EXPECT_EQ(Current()->state, "Unhealthy");
  ASSERT_EQ(events_.events.size(), 1u);
  EXPECT_NE(events_.events[0].message.find("http 503"), std::string::npos);
}

TEST_F(LoopTest, ConflictIsReDecidedOnTheNewerView) {
  Put(Spec({{kReady, util::FormatRfc3339Nano(T0())}}));
  patcher_.scripted.push_back(Status::Conflict("the object has been modified"));
  resolver_->Step();
  ASSERT_EQ(exec_.RunAll(), 1u);
  // Meanwhile someone else changed the object (e.g. a label): the cache delivers rv 101.
  GsSpec s = Spec({{kReady, util::FormatRfc3339Nano(T0())}, {"other", "x"}});
  s.rv = "101";
  Put(s);
  Settle();
  EXPECT_EQ(Current()->state, "Allocated");
  ASSERT_EQ(patcher_.patches.size(), 2u);
  EXPECT_NE(patcher_.patches[1].find("\"value\":\"101\""), std::string::npos);
  EXPECT_NE(Metrics().find("allocating_webhook_resolver_conflicts_total 1"), std::string::npos);
}

TEST_F(LoopTest, ConflictWithoutNewerViewRetriesAfterBackoff) {
  Put(Spec({{kReady, util::FormatRfc3339Nano(T0())}}));
  patcher_.scripted.push_back(Status::Conflict("conflict"));
  Settle();
  EXPECT_EQ(patcher_.patches.size(), 1u);
  EXPECT_EQ(Current()->state, "Allocating");
  clock_.now = T0() + 100ms;
  Settle();
  EXPECT_EQ(patcher_.patches.size(), 2u);
  EXPECT_EQ(Current()->state, "Allocated");
}

TEST_F(LoopTest, AllocationChangedBeforeThePatchIsNeverPromoted) {
  Put(Spec({{kReady, util::FormatRfc3339Nano(T0())}}));
  resolver_->Step();  // decides to promote on rv 100
  // Before the patch runs, the server is re-allocated: new allocation id, rv 102 (the readiness
  // value now belongs to the previous allocation).
  GsSpec s = Spec({{kReady, util::FormatRfc3339Nano(T0())}});
  s.rv = "102";
  s.annotations[kAlloc] = "2026-01-02T03:09:00Z";
  s.annotations[std::string(keys::kLastAllocated)] = "2026-01-02T03:09:00Z";
  source_.Put(View(s));
  Settle();
  resolver_->Notify("default", "gs-1");
  Settle();
  EXPECT_EQ(Current()->state, "Allocating");
  EXPECT_EQ(Current()->Annotation(keys::kConfirmed), std::nullopt);
  EXPECT_EQ(patcher_.applied.size(), 0u);
  EXPECT_TRUE(events_.events.empty());
}

TEST_F(LoopTest, DeletedServerIsDropped) {
  Put(Spec());
  Settle();
  EXPECT_EQ(resolver_->Tracked(), 1u);
  source_.Remove("default/gs-1");
  resolver_->Notify("default", "gs-1");
  clock_.now = T0() + 1h;
  Settle();
  EXPECT_EQ(resolver_->Tracked(), 0u);
  EXPECT_TRUE(patcher_.patches.empty());
}

TEST_F(LoopTest, PatchNotFoundDrops) {
  Put(Spec({{kReady, util::FormatRfc3339Nano(T0())}}));
  patcher_.scripted.push_back(Status::NotFound("gone"));
  resolver_->Step();
  exec_.RunAll();
  source_.Remove("default/gs-1");
  Settle();
  EXPECT_EQ(resolver_->Tracked(), 0u);
  EXPECT_EQ(patcher_.patches.size(), 1u);
}

TEST_F(LoopTest, MovedOutByOthersIsDropped) {
  Put(Spec());
  Settle();
  GsSpec s = Spec();
  s.state = "Shutdown";  // e.g. the game server called Shutdown()
  s.rv = "101";
  Put(s);
  clock_.now = T0() + 1h;
  Settle();
  EXPECT_EQ(resolver_->Tracked(), 0u);
  EXPECT_TRUE(patcher_.patches.empty());
  EXPECT_EQ(Current()->state, "Shutdown");
}

// Issue 24: the webhook let the Agones controller's scale-down of a held server through
// (outcome ScaledDown): nothing is patched, the outcome is recorded once per allocation (Event,
// metric, duration), whether the resolver sees the Shutdown or only the deletion.
TEST_F(LoopTest, ScaleDownLetThroughIsRecordedOnce) {
  Put(Spec());
  Settle();
  EXPECT_EQ(resolver_->Tracked(), 1u);
  GsSpec s = Spec({{std::string(keys::kOutcome), "ScaledDown"}});
  s.state = "Shutdown";
  s.rv = "101";
  clock_.now = T0() + 2500ms;
  Put(s);
  Settle();
  EXPECT_EQ(resolver_->Tracked(), 0u);
  EXPECT_TRUE(patcher_.patches.empty());
  ASSERT_EQ(events_.events.size(), 1u);
  EXPECT_EQ(events_.events[0].type, EventType::kNormal);
  EXPECT_EQ(events_.events[0].reason, "AllocatingScaledDown");
  EXPECT_NE(events_.events[0].message.find("2.5s"), std::string::npos) << events_.events[0].message;
  EXPECT_NE(events_.events[0].message.find(Current()->allocation), std::string::npos);
  // Seen again (being deleted now, a resync, the deletion itself): not recorded again.
  s.rv = "102";
  s.deleting = true;
  Put(s);
  resolver_->NotifyAll();
  Settle();
  resolver_->NotifyDeleted("default", "gs-1", std::make_shared<const GameServerView>(View(s)));
  source_.Remove("default/gs-1");
  Settle();
  EXPECT_EQ(events_.events.size(), 1u);
  EXPECT_NE(Metrics().find("allocating_webhook_resolver_scaled_down_total 1"), std::string::npos);
  EXPECT_NE(Metrics().find(
                "allocating_webhook_allocating_duration_seconds_count{outcome=\"ScaledDown\"} 1"),
            std::string::npos);
}

TEST_F(LoopTest, ScaleDownSeenOnlyAsADeletionIsRecordedFromTheLastKnownObject) {
  GsSpec s = Spec({{std::string(keys::kOutcome), "ScaledDown"}});
  s.state = "Shutdown";
  clock_.now = T0() + 1s;
  // The object went before the resolver ever looked at it.
  resolver_->NotifyDeleted("default", "gs-1", std::make_shared<const GameServerView>(View(s)));
  Settle();
  ASSERT_EQ(events_.events.size(), 1u);
  EXPECT_EQ(events_.events[0].reason, "AllocatingScaledDown");
  // A deletion of a server that was not scaled down records nothing; nor does a plain Shutdown.
  GsSpec other = Spec();
  other.name = "gs-2";
  other.state = "Shutdown";
  resolver_->NotifyDeleted("default", "gs-2", std::make_shared<const GameServerView>(View(other)));
  resolver_->NotifyDeleted("default", "gs-3", nullptr);
  Settle();
  EXPECT_EQ(events_.events.size(), 1u);
  EXPECT_TRUE(patcher_.patches.empty());
}

TEST_F(LoopTest, NeverPromotesTwiceWhileTheCacheLags) {
  patcher_.auto_apply = false;  // the cache keeps showing the pre-patch object
  Put(Spec({{kReady, util::FormatRfc3339Nano(T0())}}));
  Settle();
  ASSERT_EQ(patcher_.applied.size(), 1u);
  for (int i = 0; i < 5; ++i) {
    clock_.now += 10s;
    resolver_->NotifyAll();
    resolver_->Notify("default", "gs-1");
    Settle();
  }
  EXPECT_EQ(patcher_.patches.size(), 1u);
  EXPECT_EQ(events_.events.size(), 1u);
  // When the cache catches up, nothing more happens either.
  source_.Put(patcher_.applied[0]);
  resolver_->Notify("default", "gs-1");
  Settle();
  EXPECT_EQ(patcher_.patches.size(), 1u);
  EXPECT_EQ(resolver_->Tracked(), 0u);
}

TEST_F(LoopTest, RejectedPatchIsRetriedWithBackoff) {
  Put(Spec({{kReady, util::FormatRfc3339Nano(T0())}}));
  patcher_.scripted.push_back(Status::InvalidArgument("admission webhook denied the request"));
  Settle();
  EXPECT_EQ(Current()->state, "Allocating");
  clock_.now = T0() + 500ms;
  Settle();
  EXPECT_EQ(patcher_.patches.size(), 1u);
  clock_.now = T0() + 1s;
  Settle();
  EXPECT_EQ(patcher_.patches.size(), 2u);
  EXPECT_EQ(Current()->state, "Allocated");
}

TEST_F(LoopTest, NewLeaderResolvesOverdueServersAtOnce) {
  GsSpec late = Spec();
  late.name = "late";
  GsSpec ready = Spec({{kReady, util::FormatRfc3339Nano(T0())}});
  ready.name = "ready";
  GsSpec early = Spec();
  early.name = "early";
  early.annotations = AllocatingAnnotations(T0() + 1h);
  source_.Put(View(late));
  source_.Put(View(ready));
  source_.Put(View(early));
  clock_.now = T0() + 1h + 1s;  // the previous leader died long ago
  Make();                       // a fresh resolver, nothing but the source
  Settle();
  EXPECT_EQ(Current("default/late")->state, "Unhealthy");
  EXPECT_EQ(Current("default/ready")->state, "Allocated");
  EXPECT_EQ(Current("default/early")->state, "Allocating");
  EXPECT_EQ(resolver_->Tracked(), 1u);
}

TEST_F(LoopTest, IgnoresServersThatAreNotOptedInOrNotAllocating) {
  GsSpec a = Spec({{kReady, "true"}});
  a.opted_in = false;
  a.name = "a";
  GsSpec b = Spec({{kReady, "true"}});
  b.state = "Allocated";
  b.name = "b";
  Put(a);
  Put(b);
  clock_.now = T0() + 1h;
  Settle();
  EXPECT_TRUE(patcher_.patches.empty());
  EXPECT_EQ(resolver_->Tracked(), 0u);
}

// Admission was unreachable (failurePolicy Ignore): the allocator's write reached Allocated with
// only agones.dev/last-allocated (and whatever the allocation's metadata carried).
GsSpec Bypassed(std::map<std::string, std::string> extra = {}) {
  GsSpec s;
  s.state = "Allocated";
  s.annotations = {{std::string(keys::kLastAllocated), util::FormatRfc3339Nano(T0())}};
  for (auto& [k, v] : extra) s.annotations[k] = v;
  return s;
}

TEST_F(LoopTest, BypassIsRecordedThenConfirmedAfterTheFact) {
  const std::string id = util::FormatRfc3339Nano(T0());
  // A forged confirmation in the allocation's metadata is dropped when the bypass is recorded.
  GsSpec s =
      Bypassed({{std::string(keys::kConfirmed), id}, {std::string(keys::kOutcome), "Confirmed"}});
  s.labels_fleet = "arena";
  Put(s);
  clock_.now = T0() + 2s;
  Settle();
  auto gs = Current();
  EXPECT_EQ(gs->state, "Allocated");
  EXPECT_EQ(gs->Annotation(keys::kBypassed), id);
  EXPECT_EQ(gs->allocation, id);
  EXPECT_EQ(gs->Annotation(keys::kSince), id);  // counts from the allocation, not the detection
  EXPECT_EQ(gs->Annotation(keys::kConfirmed), std::nullopt);
  EXPECT_EQ(gs->Annotation(keys::kOutcome), std::nullopt);
  ASSERT_EQ(events_.events.size(), 1u);
  EXPECT_EQ(events_.events[0].type, EventType::kWarning);
  EXPECT_EQ(events_.events[0].reason, "AllocatingBypassed");
  EXPECT_NE(Metrics().find("allocating_webhook_bypassed_allocations_total{fleet=\"arena\","
                           "namespace=\"default\"} 1"),
            std::string::npos)
      << Metrics();
  EXPECT_EQ(resolver_->Tracked(), 0u);  // not counted as Allocating
  EXPECT_NE(Metrics().find("allocating_webhook_bypassed_servers 1"), std::string::npos);
  ASSERT_EQ(patcher_.patches.size(), 1u);
  EXPECT_EQ(patcher_.patches[0].find("/status/state"), std::string::npos);

  // The game server's readiness write (the SDK) confirms it after the fact.
  GsSpec ready = s;
  ready.rv = std::to_string(std::stoll(gs->resource_version) + 1);
  ready.annotations.clear();
  for (const auto& [k, v] : gs->annotations.entries()) ready.annotations[k] = v;
  ready.annotations[kReady] = id;
  Put(ready);
  Settle();
  gs = Current();
  EXPECT_EQ(gs->state, "Allocated");
  EXPECT_EQ(gs->Annotation(keys::kConfirmed), id);
  EXPECT_EQ(gs->Annotation(keys::kOutcome), "Confirmed");
  ASSERT_EQ(events_.events.size(), 2u);
  EXPECT_EQ(events_.events[1].reason, "AllocatingBypassConfirmed");
  EXPECT_NE(Metrics().find("allocating_webhook_bypass_resolutions_total{outcome=\"Confirmed\"} 1"),
            std::string::npos);
  EXPECT_NE(Metrics().find("allocating_webhook_bypassed_servers 0"), std::string::npos);
  // Resolved: nothing more is written, whatever the clock says.
  clock_.now = T0() + 1h;
  resolver_->NotifyAll();
  Settle();
  EXPECT_EQ(patcher_.patches.size(), 2u);
}

TEST_F(LoopTest, BypassNotConfirmedByItsDeadlineIsLeftAllocated) {
  Put(Bypassed({{"allocating.agones.dev/timeout", "10s"}}));
  clock_.now = T0() + 1s;
  Settle();
  EXPECT_EQ(Current()->Annotation(keys::kBypassed), util::FormatRfc3339Nano(T0()));
  clock_.now = T0() + 9s;
  Settle();
  EXPECT_EQ(patcher_.patches.size(), 1u);
  clock_.now = T0() + 10s;
  Settle();
  auto gs = Current();
  EXPECT_EQ(gs->state, "Allocated");  // never shut down: players may be on it
  EXPECT_EQ(gs->Annotation(keys::kOutcome), "Unconfirmed");
  EXPECT_EQ(gs->Annotation(keys::kConfirmed), std::nullopt);
  ASSERT_EQ(events_.events.size(), 2u);
  EXPECT_EQ(events_.events[1].reason, "AllocatingBypassUnconfirmed");
  EXPECT_NE(events_.events[1].message.find("sdk-allocating-ready not set"), std::string::npos);
  EXPECT_NE(
      Metrics().find("allocating_webhook_bypass_resolutions_total{outcome=\"Unconfirmed\"} 1"),
      std::string::npos);
}

TEST_F(LoopTest, BypassDeadlineWithOnTimeoutAllocatedConfirms) {
  Put(Bypassed({{"allocating.agones.dev/timeout", "5s"},
                {"allocating.agones.dev/on-timeout", "Allocated"}}));
  clock_.now = T0() + 1min;  // detected late (e.g. a new leader): recorded, then resolved at once
  Settle();
  auto gs = Current();
  EXPECT_EQ(gs->state, "Allocated");
  EXPECT_EQ(gs->Annotation(keys::kOutcome), "TimedOut");
  EXPECT_EQ(gs->Annotation(keys::kConfirmed), gs->allocation);
}

TEST_F(LoopTest, BypassWithoutLastAllocatedCountsFromDetection) {
  GsSpec s;
  s.state = "Allocated";  // Allocated written directly, without the allocator
  clock_.now = T0() + 3s;
  Put(s);
  Settle();
  auto gs = Current();
  const std::string id = util::FormatRfc3339Nano(T0() + 3s);
  EXPECT_EQ(gs->Annotation(keys::kBypassed), id);
  EXPECT_EQ(gs->allocation, id);
}

// The resolver as the process runs it: a leader-only runnable of runtime::Manager, on the
// manager's thread while the lease is held, stopped when it is lost, run again on re-election.
TEST(ResolverThreaded, StartStopAndPromote) {
  FakeClock clock;
  FakeSource source;
  FakePatcher patcher(source);
  FakeEvents events;
  FakeProber prober;
  GsSpec s;
  s.annotations = AllocatingAnnotations(T0());
  s.annotations[kReady] = util::FormatRfc3339Nano(T0());
  source.Put(View(s));
  {
    InlineExecutor exec;  // as the process runs it: starting a patch never blocks
    Resolver r(ResolverOptions{}, source, patcher, events, prober, clock, exec);
    std::atomic<bool> running{false};
    std::atomic<int> runs{0};
    runtime::Manager m({"controllers"}, 5s);
    ASSERT_TRUE(m.Add(runtime::MakeRunnable("resolver",
                                            [&](runtime::RunContext& ctx) {
                                              running = true;
                                              ++runs;
                                              Status st = r.Run(ctx);
                                              running = false;
                                              return st;
                                            }),
                      {"controllers", true})
                    .ok());
    Status result;
    std::jthread runner([&](std::stop_token st) { result = m.Run(st); });
    m.SetLeader(true);
    for (int i = 0; i < 500 && !running; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_TRUE(running);
    for (int i = 0; i < 500 && source.At("default/gs-1")->state != "Allocated"; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    m.SetLeader(false);  // returns at once; Run's thread waits until the loop has returned
    for (int i = 0; i < 500 && running; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_FALSE(running);
    m.SetLeader(true);  // restartable (a re-elected leader)
    for (int i = 0; i < 500 && runs < 2; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(runs.load(), 2);
    m.SetLeader(false);
    runner.request_stop();
    runner.join();
    EXPECT_TRUE(result.ok()) << result.ToString();
  }
  EXPECT_EQ(source.At("default/gs-1")->state, "Allocated");
}

}  // namespace
}  // namespace aw::resolver

namespace aw::resolver {
namespace {

TEST_F(LoopTest, QueueAndReconcileMetricsAreNamedAsControllerRuntimeNamesThem) {
  Put(Spec());  // Allocating, not confirmed: the reconcile looks again later
  resolver_->Step();
  const std::string m = Metrics();
  EXPECT_NE(m.find("workqueue_adds_total{name=\"resolver\"} 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("workqueue_depth{name=\"resolver\"} 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("workqueue_queue_duration_seconds_count{name=\"resolver\"} 1\n"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("workqueue_work_duration_seconds_count{name=\"resolver\"} 1\n"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("controller_runtime_reconcile_time_seconds_count{controller=\"resolver\"} 1\n"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("controller_runtime_reconcile_total{controller=\"resolver\",result="
                   "\"requeue_after\"} 1\n"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("workqueue_retries_total{name=\"resolver\"} 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("controller_runtime_reconcile_errors_total{controller=\"resolver\"} 0\n"),
            std::string::npos)
      << m;
}

TEST_F(LoopTest, AFailedWriteCountsAsAReconcileError) {
  Put(Spec({{kReady, util::FormatRfc3339Nano(T0())}}));
  patcher_.scripted.push_back(Status::InvalidArgument("admission webhook denied the request"));
  Settle();
  const std::string m = Metrics();
  EXPECT_NE(m.find("controller_runtime_reconcile_errors_total{controller=\"resolver\"} 1\n"),
            std::string::npos)
      << m;
  EXPECT_NE(
      m.find("controller_runtime_reconcile_total{controller=\"resolver\",result=\"error\"} 1\n"),
      std::string::npos)
      << m;
}

// A source whose List blocks until released: a resolver pass that never ends.
class BlockingSource final : public GameServerSource {
 public:
  std::shared_ptr<const GameServerView> Get(const std::string&, const std::string&) override {
    return nullptr;
  }
  std::vector<std::shared_ptr<const GameServerView>> List() override {
    std::unique_lock<std::mutex> lock(mu_);
    entered_ = true;
    cv_.notify_all();
    cv_.wait(lock, [this] { return released_; });
    return {};
  }
  bool WaitEntered(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return entered_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false;
  bool released_ = false;
};

// Polls `f` until it is true or `timeout` passes (the liveness signal is read, not awaited).
template <typename F>
bool Eventually(F f, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return f();
}

TEST(ResolverLiveness, AWedgedLoopIsReportedAndAHealthyOneIsNot) {
  BlockingSource source;
  FakeSource unused;
  FakePatcher patcher{unused};  // never called: no server is listed
  FakeEvents events;
  FakeProber prober;
  FakeClock clock;
  ManualExecutor exec;
  ResolverOptions o;
  o.stall_timeout = 50ms;
  Resolver r(o, source, patcher, events, prober, clock, exec);
  EXPECT_EQ(r.Stalled(), std::nullopt);  // not running: not expected to make progress
  // As the process runs it: a leader-only runnable of runtime::Manager.
  runtime::Manager m({"controllers"}, 5s);
  ASSERT_TRUE(
      m.Add(runtime::MakeRunnable("resolver", [&](runtime::RunContext& ctx) { return r.Run(ctx); }),
            {"controllers", true})
          .ok());
  Status result;
  std::jthread runner([&](std::stop_token st) { result = m.Run(st); });
  m.SetLeader(true);
  ASSERT_TRUE(source.WaitEntered(5s));  // the first pass is stuck in List()
  ASSERT_TRUE(Eventually([&] { return r.Stalled().has_value(); }, 5s));
  EXPECT_NE(r.Stalled().value_or("").find("has not begun a pass"), std::string::npos);
  source.Release();  // the pass ends; the loop begins passes again
  EXPECT_TRUE(Eventually([&] { return !r.Stalled().has_value(); }, 5s));
  m.SetLeader(false);  // waits until the resolver's loop has returned
  EXPECT_EQ(r.Stalled(), std::nullopt);
  runner.request_stop();
  runner.join();
  EXPECT_TRUE(result.ok()) << result.ToString();
}

}  // namespace
}  // namespace aw::resolver
