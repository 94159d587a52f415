// /validate/gameservers, /validate/fleets, /validate/gameserversets,
// /validate/gameserverallocations.
#include <gtest/gtest.h>

#include "admission_test_util.h"
#include "contract/keys.h"

namespace aw::testing {
namespace {

using admission::Route;
namespace keys = aw::keys;

const std::string kNowStr = "2026-12-02T14:30:00.123456789Z";
const std::string kLastAllocatedNew = "2026-12-02T14:23:13.123456789Z";

Obj Ready() { return Obj("gameserver-ready"); }
Obj Allocating() { return Obj("gameserver-allocating"); }

Response Validate(std::string_view op, std::string_view user, const std::optional<Obj>& n,
                  const std::optional<Obj>& o, const CallOptions& opts = {}) {
  return Call(Route::kValidateGameServers,
              Review(kV1, op, user, n ? std::optional(n->Json()) : std::nullopt,
                     o ? std::optional(o->Json()) : std::nullopt),
              opts);
}

Obj Creating() { return Obj("gameserver-creating"); }

// --- configuration annotations ---

TEST(ValidateGameServer, CreateWithValidConfigIsAllowed) {
  Response r = Validate("CREATE", kController, Creating(), std::nullopt);
  EXPECT_TRUE(r.allowed) << r.message;
  EXPECT_TRUE(r.warnings.empty());
}

TEST(ValidateGameServer, CreateWithBadValuesIsDeniedNamingKeyAndValue) {
  struct Case {
    std::string_view key, value, expect;
  } cases[] = {
      {keys::kTimeout, "90x",
       "allocating.agones.dev/timeout: \"90x\" is not a duration (e.g. 30s, 1m30s)"},
      {keys::kTimeout, "20m", "allocating.agones.dev/timeout: \"20m\" is out of bounds"},
      {keys::kTimeout, "500ms", "allocating.agones.dev/timeout: \"500ms\" is out of bounds"},
      {keys::kTimeout, "-5s", "allocating.agones.dev/timeout: \"-5s\" is not a duration"},
      {keys::kOnTimeout, "Delete", "allocating.agones.dev/on-timeout: \"Delete\" is not one of"},
      {keys::kMode, "strict", "allocating.agones.dev/mode: \"strict\" is not one of"},
      {keys::kRequireAnnotation, "yes", "allocating.agones.dev/require-annotation: \"yes\""},
      {keys::kProbePort, "70000", "allocating.agones.dev/probe-port: \"70000\""},
      {keys::kProbePort, "0", "allocating.agones.dev/probe-port: \"0\""},
      {keys::kProbePort, "bad name", "allocating.agones.dev/probe-port: \"bad name\""},
      {keys::kProbeType, "icmp", "allocating.agones.dev/probe-type: \"icmp\""},
      {keys::kProbePath, "healthz", "allocating.agones.dev/probe-path: \"healthz\""},
      {keys::kProbePeriod, "1ms", "allocating.agones.dev/probe-period: \"1ms\" is out of bounds"},
      {keys::kProbePeriod, "", "allocating.agones.dev/probe-period: \"\" is not a duration"},
  };
  for (const auto& c : cases) {
    Obj n = Creating().Ann(c.key, c.value);
    Response r = Validate("CREATE", kController, n, std::nullopt);
    EXPECT_FALSE(r.allowed) << c.key << "=" << c.value;
    EXPECT_EQ(r.code, 422);
    EXPECT_EQ(r.status_reason, "Invalid");
    EXPECT_NE(r.message.find(c.expect), std::string::npos) << r.message;
  }
}

TEST(ValidateGameServer, CreateThatCanNeverConfirmIsDenied) {
  Obj n = Creating()
              .Ann(keys::kRequireAnnotation, "false")
              .NoAnn(keys::kProbePort)
              .NoAnn(keys::kProbeType)
              .NoAnn(keys::kProbePeriod);
  Response r = Validate("CREATE", kController, n, std::nullopt);
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find("allocating.agones.dev/require-annotation"), std::string::npos);
  EXPECT_NE(r.message.find("allocating.agones.dev/probe-port"), std::string::npos);
  // With a probe it can confirm.
  Obj ok = Creating().Ann(keys::kRequireAnnotation, "false");
  EXPECT_TRUE(Validate("CREATE", kController, ok, std::nullopt).allowed);
}

TEST(ValidateGameServer, ProbePortMustNameAPort) {
  Obj n = Creating().Ann(keys::kProbePort, "gmae");
  Response r = Validate("CREATE", kController, n, std::nullopt);
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find("allocating.agones.dev/probe-port: \"gmae\" names no port of the "
                           "GameServer (spec.ports: default, admin)"),
            std::string::npos)
      << r.message;
  EXPECT_TRUE(
      Validate("CREATE", kController, Creating().Ann(keys::kProbePort, "admin"), std::nullopt)
          .allowed);
  EXPECT_TRUE(
      Validate("CREATE", kController, Creating().Ann(keys::kProbePort, "8080"), std::nullopt)
          .allowed);
  // Unchanged on UPDATE: a warning only.
  Obj old = Ready().Ann(keys::kProbePort, "gmae");
  Obj upd = old;
  upd.State("Allocated");
  Response w = Validate("UPDATE", kAllocator, upd, old);
  EXPECT_TRUE(w.allowed);
  EXPECT_FALSE(w.warnings.empty());
  // Wrong types in spec.ports are malformed input.
  Obj bad = Creating();
  bad.SetRaw("/spec/ports", "{}");
  EXPECT_EQ(Validate("CREATE", kController, bad, std::nullopt).raw.http_status, 400);
  Obj bad2 = Creating();
  bad2.SetRaw("/spec/ports/0/name", "5");
  EXPECT_EQ(Validate("CREATE", kController, bad2, std::nullopt).raw.http_status, 400);
}

TEST(ValidateGameServer, IneffectiveSettingsWarn) {
  Obj n = Creating().NoAnn(keys::kProbePort);
  Response r = Validate("CREATE", kController, n, std::nullopt);
  EXPECT_TRUE(r.allowed);
  ASSERT_FALSE(r.warnings.empty());
  EXPECT_NE(r.warnings[0].find("has no effect without allocating.agones.dev/probe-port"),
            std::string::npos);
}

TEST(ValidateGameServer, UpdateEnforcesOnlyChangedKeys) {
  Obj old = Ready().Ann(keys::kTimeout, "90x");
  Obj n = old;
  n.State("Allocated");
  Response r = Validate("UPDATE", kAllocator, n, old);
  EXPECT_TRUE(r.allowed) << r.message;
  ASSERT_FALSE(r.warnings.empty());
  EXPECT_NE(r.warnings[0].find("90x"), std::string::npos);
  Obj changed = Ready().Ann(keys::kTimeout, "91x");
  Response d = Validate("UPDATE", kStranger, changed, old);
  EXPECT_FALSE(d.allowed);
  EXPECT_NE(d.message.find("\"91x\""), std::string::npos);
  Obj newly = Ready().Ann(keys::kTimeout, "2h");
  EXPECT_FALSE(Validate("UPDATE", kStranger, newly, Ready()).allowed);
}

TEST(ValidateGameServer, OptingInOnUpdateChecksEverything) {
  Obj old = Ready().NoLabel(keys::kEnabledLabel).Ann(keys::kMode, "nope");
  Obj n = old;
  n.Label(keys::kEnabledLabel, "true");
  EXPECT_FALSE(Validate("UPDATE", kStranger, n, old).allowed);
}

TEST(ValidateGameServer, NotOptedInIsNotChecked) {
  Obj n =
      Creating().NoLabel(keys::kEnabledLabel).Ann(keys::kTimeout, "90x").Ann(keys::kConfirmed, "x");
  EXPECT_TRUE(Validate("CREATE", kStranger, n, std::nullopt).allowed);
}

TEST(ValidateGameServer, NonTrueLabelWarns) {
  Obj n = Creating().Label(keys::kEnabledLabel, "yes");
  Response r = Validate("CREATE", kStranger, n, std::nullopt);
  EXPECT_TRUE(r.allowed);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("only \"true\""), std::string::npos);
}

// --- owned annotations ---

TEST(ValidateOwned, CreateWithOwnedKeyIsDeniedUnlessTrusted) {
  for (auto k : {keys::kSince, keys::kAllocation, keys::kConfirmed, keys::kOutcome}) {
    Obj n = Creating().Ann(k, "x");
    Response r = Validate("CREATE", kController, n, std::nullopt);
    EXPECT_FALSE(r.allowed) << k;
    EXPECT_EQ(r.code, 403);
    EXPECT_NE(r.message.find(std::string(k)), std::string::npos) << r.message;
    EXPECT_TRUE(Validate("CREATE", kResolver, n, std::nullopt).allowed);
  }
}

TEST(ValidateOwned, TheMutatingRewriteOfAnAllocationPasses) {
  // Exactly what /mutate/gameservers produced for the allocator's update.
  Obj old = Ready();
  Obj n = Ready()
              .State("Allocating")
              .Ann(keys::kLastAllocated, kLastAllocatedNew)
              .Ann(keys::kSince, kNowStr)
              .Ann(keys::kAllocation, kLastAllocatedNew);
  EXPECT_TRUE(Validate("UPDATE", kAllocator, n, old).allowed);
  // Stale confirmed/outcome dropped on entry.
  Obj old2 = Ready().Ann(keys::kConfirmed, "a").Ann(keys::kOutcome, "Confirmed");
  EXPECT_TRUE(Validate("UPDATE", kAllocator, n, old2).allowed);
}

TEST(ValidateOwned, ForgedSinceOrAllocationIsDenied) {
  Obj old = Ready();
  Obj n = Ready()
              .State("Allocating")
              .Ann(keys::kLastAllocated, kLastAllocatedNew)
              .Ann(keys::kSince, "2026-12-02T10:00:00Z")
              .Ann(keys::kAllocation, kLastAllocatedNew);
  Response r = Validate("UPDATE", kStranger, n, old);
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find("allocating.agones.dev/since"), std::string::npos) << r.message;
  Obj n2 = Ready()
               .State("Allocating")
               .Ann(keys::kLastAllocated, kLastAllocatedNew)
               .Ann(keys::kSince, kNowStr)
               .Ann(keys::kAllocation, "my-own-id");
  Response r2 = Validate("UPDATE", kStranger, n2, old);
  EXPECT_FALSE(r2.allowed);
  EXPECT_NE(r2.message.find("allocating.agones.dev/allocation"), std::string::npos);
  Obj n3 = Ready().State("Allocating").Ann(keys::kSince, "not a time").Ann(keys::kAllocation, "x");
  EXPECT_FALSE(Validate("UPDATE", kStranger, n3, old).allowed);
  // Setting since outside Allocating.
  Obj n4 = Ready().Ann(keys::kSince, kNowStr);
  EXPECT_FALSE(Validate("UPDATE", kStranger, n4, old).allowed);
  // Changing since while staying Allocating.
  Obj n5 = Allocating().Ann(keys::kSince, kNowStr);
  EXPECT_FALSE(Validate("UPDATE", kSdk, n5, Allocating()).allowed);
}

TEST(ValidateOwned, ConfirmedAndOutcomeOnlyByTrusted) {
  for (auto k : {keys::kConfirmed, keys::kOutcome}) {
    Obj n = Allocating().Ann(k, kLastAllocatedNew);
    Response r = Validate("UPDATE", kSdk, n, Allocating());
    EXPECT_FALSE(r.allowed) << k;
    EXPECT_NE(r.message.find(std::string(k)), std::string::npos);
    EXPECT_NE(r.message.find("agones-sdk"), std::string::npos);
    EXPECT_TRUE(Validate("UPDATE", kResolver, n, Allocating()).allowed);
  }
}

// Issue 27: `bypassed` is the resolver's record of an allocation that reached Allocated while
// admission was unreachable. Nobody else writes it; the resolver's after-the-fact writes (an
// Allocated -> Allocated update by a trusted identity) pass both webhooks once admission is back.
TEST(ValidateOwned, BypassRecordOnlyByTheResolver) {
  Obj bypassed = Ready().State("Allocated").Ann(keys::kLastAllocated, kLastAllocatedNew);
  Obj recorded = Obj(bypassed)
                     .Ann(keys::kBypassed, kLastAllocatedNew)
                     .Ann(keys::kAllocation, kLastAllocatedNew)
                     .Ann(keys::kSince, kLastAllocatedNew);
  Obj forged = Obj(bypassed).Ann(keys::kBypassed, kLastAllocatedNew);
  for (std::string_view user : {kSdk, kStranger, kAllocator, kController}) {
    EXPECT_FALSE(Validate("UPDATE", user, recorded, bypassed).allowed) << user;
    Response r = Validate("UPDATE", user, forged, bypassed);
    EXPECT_FALSE(r.allowed) << user;
    EXPECT_NE(r.message.find("allocating.agones.dev/bypassed"), std::string::npos) << r.message;
  }
  EXPECT_TRUE(Validate("UPDATE", kResolver, recorded, bypassed).allowed);
  Obj confirmed =
      Obj(recorded).Ann(keys::kConfirmed, kLastAllocatedNew).Ann(keys::kOutcome, "Confirmed");
  for (auto [n, o] : {std::pair{recorded, bypassed}, std::pair{confirmed, recorded}}) {
    Obj mutated = MutateAndApply(std::string(kV1), "UPDATE", kResolver, n, o);
    for (auto k :
         {keys::kBypassed, keys::kAllocation, keys::kSince, keys::kConfirmed, keys::kOutcome}) {
      EXPECT_EQ(mutated.GetAnn(k), n.GetAnn(k)) << k << ": the resolver's write is unchanged";
    }
    EXPECT_EQ(mutated.GetState(), "Allocated");
    EXPECT_TRUE(Validate("UPDATE", kResolver, mutated, o).allowed);
  }
  // Nobody but the resolver removes it while the server stays Allocated; a new cycle drops it.
  Obj removed = Obj(confirmed).NoAnn(keys::kBypassed);
  EXPECT_FALSE(Validate("UPDATE", kStranger, removed, confirmed).allowed);
  Obj stale = Ready().Ann(keys::kBypassed, "earlier");
  Obj allocated = Obj(stale).State("Allocated").Ann(keys::kLastAllocated, kLastAllocatedNew);
  Obj mutated = MutateAndApply(std::string(kV1), "UPDATE", kAllocator, allocated, stale);
  EXPECT_EQ(mutated.GetState(), "Allocating");
  EXPECT_EQ(mutated.GetAnn(keys::kBypassed), std::nullopt) << mutated.Json();
  EXPECT_TRUE(Validate("UPDATE", kAllocator, mutated, stale).allowed);
}

TEST(ValidateOwned, RemovalOnlyWhenLeavingTheCycle) {
  Obj n = Allocating().NoAnn(keys::kSince);
  EXPECT_FALSE(Validate("UPDATE", kStranger, n, Allocating()).allowed);
  Obj leaving = Allocating().State("Ready").NoAnn(keys::kSince).NoAnn(keys::kAllocation);
  EXPECT_TRUE(Validate("UPDATE", kSdk, leaving, Allocating()).allowed);
  Obj promoted = Obj("gameserver-promoted");
  Obj unconfirm = promoted;
  unconfirm.NoAnn(keys::kConfirmed);
  EXPECT_FALSE(Validate("UPDATE", kStranger, unconfirm, promoted).allowed);
}

TEST(ValidateOwned, MutateThenValidateChainsPass) {
  // The validating webhook sees the mutated object: every rewrite must pass validation.
  struct Case {
    Obj n, o;
    std::string_view user;
  };
  Obj promo = Allocating().State("Allocated");
  std::vector<Case> cases = {
      {Ready().State("Allocated").Ann(keys::kLastAllocated, kLastAllocatedNew), Ready(),
       kAllocator},
      {Ready().State("Allocated"), Ready(), kSdk},
      {Ready().State("Allocating"), Ready(), kStranger},
      {promo, Allocating(), kStranger},
      {Allocating().State("Unhealthy"), Allocating(), kController},
      {Obj("gameserver-promoted").State("Ready"), Obj("gameserver-promoted"), kSdk},
      {Allocating().NoAnn(keys::kSince).NoAnn(keys::kAllocation), Allocating(), kSdk},
      {Ready().State("Allocated").NoAnnotations(), Ready().NoAnnotations(), kAllocator},
  };
  for (auto& c : cases) {
    Obj mutated = MutateAndApply(std::string(kV1), "UPDATE", c.user, c.n, c.o);
    Response r = Validate("UPDATE", c.user, mutated, c.o);
    EXPECT_TRUE(r.allowed) << c.user << ": " << r.message;
  }
}

TEST(ValidateGameServer, OptInLabelStaysWhileAllocating) {
  Obj n = Allocating().NoLabel(keys::kEnabledLabel);
  Response r = Validate("UPDATE", kStranger, n, Allocating());
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find("allocating.agones.dev/enabled"), std::string::npos);
  Obj changed = Allocating().Label(keys::kEnabledLabel, "false");
  EXPECT_FALSE(Validate("UPDATE", kStranger, changed, Allocating()).allowed);
  EXPECT_TRUE(Validate("UPDATE", kResolver, n, Allocating()).allowed);
  // Leaving Allocating in the same update, or any time outside it: allowed.
  Obj leaving = Allocating()
                    .NoLabel(keys::kEnabledLabel)
                    .State("Ready")
                    .NoAnn(keys::kSince)
                    .NoAnn(keys::kAllocation);
  EXPECT_TRUE(Validate("UPDATE", kSdk, leaving, Allocating()).allowed);
  EXPECT_TRUE(Validate("UPDATE", kStranger, Ready().NoLabel(keys::kEnabledLabel), Ready()).allowed);
}

// --- scale-down protection ---

TEST(ValidateScaleDown, TheControllerIsNotDenied) {
  // Scale-down protection is the mutating webhook's (it keeps the state Allocating): a denial
  // here would abort the GameServerSet controller's pass (issue 9, see admission_agones_test).
  Obj n = Allocating().State("Shutdown");
  Response r = Validate("UPDATE", kController, n, Allocating());
  EXPECT_TRUE(r.allowed) << r.message;
}

TEST(ValidateScaleDown, OthersMay) {
  Obj n = Allocating().State("Shutdown");
  EXPECT_TRUE(Validate("UPDATE", kSdk, n, Allocating()).allowed);
  EXPECT_TRUE(Validate("UPDATE", kResolver, n, Allocating()).allowed);
  // The controller may move it to Unhealthy (health checks) and shut down Ready servers.
  EXPECT_TRUE(
      Validate("UPDATE", kController, Allocating().State("Unhealthy"), Allocating()).allowed);
  EXPECT_TRUE(Validate("UPDATE", kController, Ready().State("Shutdown"), Ready()).allowed);
  // A server already being deleted is not held back.
  Obj deleting = n;
  deleting.SetRaw("/metadata/deletionTimestamp", "\"2026-12-02T14:29:00Z\"");
  EXPECT_TRUE(Validate("UPDATE", kController, deleting, Allocating()).allowed);
}

TEST(ValidateGameServer, OtherOperationsAreAllowed) {
  EXPECT_TRUE(Validate("DELETE", kController, std::nullopt, Allocating()).allowed);
  EXPECT_TRUE(Validate("CONNECT", kController, std::nullopt, std::nullopt).allowed);
}

// --- fleets and gameserversets ---

Response ValidateTemplate(Route route, std::string_view kind, std::string_view op, const Obj& n,
                          const std::optional<Obj>& o = std::nullopt) {
  return Call(route, Review(kV1, op, kStranger, n.Json(),
                            o ? std::optional(o->Json()) : std::nullopt, kind));
}

Obj Fleet() { return Obj("fleet"); }
Obj TemplateAnn(Obj o, std::string_view k, std::optional<std::string_view> v) {
  // JSON Pointer for a key containing '/': escape it.
  std::string ptr = "/spec/template/metadata/annotations/";
  for (char c : k) {
    if (c == '/') {
      ptr += "~1";
    } else {
      ptr += c;
    }
  }
  if (v) {
    // Appended piece by piece: gcc 12 at -O3 reports a false -Wrestrict for
    // `"literal" + std::string&&` (it inlines basic_string::insert).
    std::string quoted;
    quoted.reserve(v->size() + 2);
    quoted += '"';
    quoted += *v;
    quoted += '"';
    o.SetRaw(ptr, quoted);
  } else {
    o.doc()["spec"]["template"]["metadata"]["annotations"].RemoveMember(std::string(k).c_str());
  }
  return o;
}

TEST(ValidateTemplates, ValidFleetAndGameServerSet) {
  EXPECT_TRUE(ValidateTemplate(Route::kValidateFleets, "Fleet", "CREATE", Fleet()).allowed);
  Obj gss("gameserverset");
  EXPECT_TRUE(ValidateTemplate(Route::kValidateGameServerSets, "GameServerSet", "UPDATE", gss, gss)
                  .allowed);
}

TEST(ValidateTemplates, BadValueAndNeverConfirmAreDenied) {
  for (Route route : {Route::kValidateFleets, Route::kValidateGameServerSets}) {
    std::string_view kind = route == Route::kValidateFleets ? "Fleet" : "GameServerSet";
    Obj bad = TemplateAnn(Fleet(), keys::kTimeout, "90x");
    Response r = ValidateTemplate(route, kind, "CREATE", bad);
    EXPECT_FALSE(r.allowed);
    EXPECT_NE(r.message.find(
                  "allocating.agones.dev/timeout: \"90x\" is not a duration (e.g. 30s, 1m30s)"),
              std::string::npos)
        << r.message;
    EXPECT_NE(r.message.find(std::string(kind)), std::string::npos);
    Obj never = TemplateAnn(TemplateAnn(Fleet(), keys::kRequireAnnotation, "false"),
                            keys::kProbePort, std::nullopt);
    Response n = ValidateTemplate(route, kind, "UPDATE", never, Fleet());
    EXPECT_FALSE(n.allowed);
    EXPECT_NE(n.message.find("allocating.agones.dev/require-annotation"), std::string::npos);
  }
}

TEST(ValidateTemplates, ProbePortMustNameATemplatePort) {
  Obj f = TemplateAnn(Fleet(), keys::kProbePort, "admin");
  Response r = ValidateTemplate(Route::kValidateFleets, "Fleet", "CREATE", f);
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find("names no port of the GameServer (spec.ports: default)"),
            std::string::npos)
      << r.message;
}

TEST(ValidateTemplates, OwnedKeyInTemplateIsDenied) {
  Obj f = TemplateAnn(Fleet(), keys::kOutcome, "Confirmed");
  Response r = ValidateTemplate(Route::kValidateFleets, "Fleet", "CREATE", f);
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find("allocating.agones.dev/outcome"), std::string::npos);
}

TEST(ValidateTemplates, UnchangedBadTemplateDoesNotBlockScaling) {
  Obj old = TemplateAnn(Fleet(), keys::kTimeout, "90x");
  Obj n = old;
  n.doc()["spec"]["replicas"] = 20;
  Response r = ValidateTemplate(Route::kValidateFleets, "Fleet", "UPDATE", n, old);
  EXPECT_TRUE(r.allowed);
  EXPECT_FALSE(r.warnings.empty());
}

TEST(ValidateTemplates, NotOptedInTemplateIsNotChecked) {
  Obj f = TemplateAnn(Fleet(), keys::kTimeout, "90x");
  f.doc()["spec"]["template"]["metadata"]["labels"].RemoveMember("allocating.agones.dev/enabled");
  EXPECT_TRUE(ValidateTemplate(Route::kValidateFleets, "Fleet", "CREATE", f).allowed);
}

TEST(ValidateTemplates, MissingTemplateIsAllowed) {
  Obj f = Obj::FromJson("{\"apiVersion\":\"agones.dev/v1\",\"kind\":\"Fleet\",\"metadata\":{}}");
  EXPECT_TRUE(ValidateTemplate(Route::kValidateFleets, "Fleet", "CREATE", f).allowed);
}

// --- gameserverallocations ---

Response ValidateGsa(const Obj& gsa, std::string_view op = "CREATE") {
  return Call(Route::kValidateGameServerAllocations,
              Review(kV1, op, kStranger, gsa.Json(), std::nullopt, "GameServerAllocation"));
}

TEST(ValidateAllocation, OrdinaryMetadataIsAllowed) {
  EXPECT_TRUE(ValidateGsa(Obj("gameserverallocation")).allowed);
}

TEST(ValidateAllocation, OwnedKeysLabelAndReadinessAreDenied) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {"/spec/metadata/annotations/allocating.agones.dev~1since", "allocating.agones.dev/since"},
      {"/spec/metadata/annotations/allocating.agones.dev~1allocation",
       "allocating.agones.dev/allocation"},
      {"/spec/metadata/annotations/allocating.agones.dev~1confirmed",
       "allocating.agones.dev/confirmed"},
      {"/spec/metadata/annotations/allocating.agones.dev~1outcome",
       "allocating.agones.dev/outcome"},
      {"/spec/metadata/annotations/agones.dev~1sdk-allocating-ready",
       "agones.dev/sdk-allocating-ready"},
      {"/spec/metadata/labels/allocating.agones.dev~1enabled", "allocating.agones.dev/enabled"},
      {"/spec/metaPatch/annotations/allocating.agones.dev~1confirmed",
       "allocating.agones.dev/confirmed"},
  };
  for (const auto& [ptr, key] : cases) {
    Obj g("gameserverallocation");
    g.SetRaw(ptr, "\"x\"");
    Response r = ValidateGsa(g);
    EXPECT_FALSE(r.allowed) << ptr;
    EXPECT_NE(r.message.find(key), std::string::npos) << r.message;
  }
}

TEST(ValidateAllocation, ConfigAnnotationsMustParse) {
  Obj g("gameserverallocation");
  g.SetRaw("/spec/metadata/annotations/allocating.agones.dev~1timeout", "\"soon\"");
  Response r = ValidateGsa(g);
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find("allocating.agones.dev/timeout: \"soon\""), std::string::npos);
  Obj ok("gameserverallocation");
  ok.SetRaw("/spec/metadata/annotations/allocating.agones.dev~1timeout", "\"1m\"");
  EXPECT_TRUE(ValidateGsa(ok).allowed);
}

TEST(ValidateAllocation, WrongTypesAre400) {
  Obj g("gameserverallocation");
  g.SetRaw("/spec/metadata/labels", "[\"a\"]");
  EXPECT_EQ(ValidateGsa(g).raw.http_status, 400);
  Obj g2("gameserverallocation");
  g2.SetRaw("/spec/metadata", "7");
  EXPECT_EQ(ValidateGsa(g2).raw.http_status, 400);
}

}  // namespace
}  // namespace aw::testing
