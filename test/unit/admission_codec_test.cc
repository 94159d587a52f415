// AdmissionReview codec and malformed input: every bad body gets a 400 with a clear message.
#include <gtest/gtest.h>

#include <string>

#include "admission_test_util.h"
#include "contract/keys.h"

namespace aw::testing {
namespace {

using admission::Route;
namespace keys = aw::keys;

int Status(Route route, const std::string& body, std::string* msg = nullptr) {
  Response r = Call(route, body);
  if (msg) *msg = r.raw.body;
  return r.raw.http_status;
}

std::string Upd(const Obj& n, const Obj& o) {
  return Review(kV1, "UPDATE", kAllocator, n.Json(), o.Json());
}

TEST(Codec, RoutesAndNames) {
  EXPECT_EQ(admission::RouteFromPath("/mutate/gameservers"), Route::kMutateGameServers);
  EXPECT_EQ(admission::RouteFromPath("/validate/gameservers"), Route::kValidateGameServers);
  EXPECT_EQ(admission::RouteFromPath("/validate/fleets"), Route::kValidateFleets);
  EXPECT_EQ(admission::RouteFromPath("/validate/gameserversets"), Route::kValidateGameServerSets);
  EXPECT_EQ(admission::RouteFromPath("/validate/gameserverallocations"),
            Route::kValidateGameServerAllocations);
  EXPECT_FALSE(admission::RouteFromPath("/mutate/gameservers/"));
  EXPECT_FALSE(admission::RouteFromPath("/"));
  EXPECT_EQ(admission::AllRoutes().size(), 5u);
  EXPECT_EQ(admission::RouteName(Route::kMutateGameServers), "mutate_gameservers");
  EXPECT_EQ(admission::OutcomeName(admission::Outcome::kRewritten), "rewritten");
}

TEST(Codec, EchoesUidAndApiVersion) {
  Obj gs("gameserver-ready");
  for (std::string_view api : {kV1, kV1beta1}) {
    Response r = Call(Route::kValidateGameServers,
                      Review(api, "UPDATE", kSdk, gs.Json(), gs.Json(), "GameServer",
                             "705ab4f5-6393-11e8-b7cc-42010a800002"));
    EXPECT_EQ(r.raw.http_status, 200);
    EXPECT_EQ(r.raw.content_type, "application/json");
    EXPECT_EQ(r.api_version, api);
    EXPECT_EQ(r.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
    EXPECT_EQ(r.raw.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
    EXPECT_TRUE(r.allowed);
  }
}

TEST(Codec, DenialCarriesStatus) {
  // An untrusted write of the resolver's confirmation.
  Obj n = Obj("gameserver-allocating").Ann("allocating.agones.dev/confirmed", "x");
  Response r = Call(Route::kValidateGameServers,
                    Review(kV1, "UPDATE", kSdk, n.Json(), Obj("gameserver-allocating").Json()));
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.code, 403);
  EXPECT_EQ(r.status_reason, "Forbidden");
  EXPECT_FALSE(r.message.empty());
  EXPECT_NE(r.raw.body.find("\"status\":\"Failure\""), std::string::npos);
}

TEST(Codec, MalformedEnvelopes) {
  struct Case {
    std::string body, expect;
  } cases[] = {
      {"", "not valid JSON"},
      {"{", "not valid JSON"},
      {"{} trailing", "not valid JSON"},
      {"[1,2]", "expected an AdmissionReview object"},
      {"\"AdmissionReview\"", "expected an AdmissionReview object"},
      {"null", "expected an AdmissionReview object"},
      {"{\"apiVersion\":\"admission.k8s.io/v1\",\"request\":{\"uid\":\"u\"}}", "body.kind"},
      {"{\"kind\":\"Pod\",\"apiVersion\":\"admission.k8s.io/v1\",\"request\":{\"uid\":\"u\"}}",
       "body.kind"},
      {"{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v2\",\"request\":{}}",
       "body.apiVersion"},
      {"{\"kind\":\"AdmissionReview\",\"apiVersion\":7,\"request\":{}}",
       "body.apiVersion is a number"},
      {"{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\"}", "body.request"},
      {"{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\",\"request\":[]}",
       "body.request is an array"},
      {"{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\",\"request\":{}}",
       "request.uid"},
      {"{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/"
       "v1\",\"request\":{\"uid\":\"\"}}",
       "request.uid"},
      {"{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/"
       "v1\",\"request\":{\"uid\":5}}",
       "request.uid is a number"},
      {"{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/"
       "v1\",\"request\":{\"uid\":\"u\","
       "\"userInfo\":\"me\"}}",
       "request.userInfo is a string"},
      {"{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/"
       "v1\",\"request\":{\"uid\":\"u\","
       "\"operation\":1}}",
       "request.operation is a number"},
  };
  for (const auto& c : cases) {
    for (Route route : admission::AllRoutes()) {
      Response r = Call(route, c.body);
      EXPECT_EQ(r.raw.http_status, 400) << c.body;
      EXPECT_EQ(r.raw.content_type, "text/plain; charset=utf-8");
      EXPECT_NE(r.raw.body.find(c.expect), std::string::npos) << c.body << " -> " << r.raw.body;
      EXPECT_EQ(r.raw.outcome, admission::Outcome::kError);
    }
  }
}

TEST(Codec, MissingObjectsWhereNeeded) {
  Obj gs("gameserver-ready");
  std::string msg;
  EXPECT_EQ(
      Status(Route::kMutateGameServers, Review(kV1, "UPDATE", kSdk, std::nullopt, gs.Json()), &msg),
      400);
  EXPECT_NE(msg.find("request.object is missing"), std::string::npos);
  EXPECT_EQ(
      Status(Route::kMutateGameServers, Review(kV1, "UPDATE", kSdk, gs.Json(), std::nullopt), &msg),
      400);
  EXPECT_NE(msg.find("request.oldObject is missing"), std::string::npos);
  EXPECT_EQ(Status(Route::kValidateGameServers,
                   Review(kV1, "CREATE", kSdk, std::nullopt, std::nullopt), &msg),
            400);
  EXPECT_EQ(Status(Route::kValidateFleets,
                   Review(kV1, "CREATE", kSdk, std::nullopt, std::nullopt, "Fleet"), &msg),
            400);
  EXPECT_EQ(
      Status(Route::kValidateGameServerAllocations,
             Review(kV1, "CREATE", kSdk, std::nullopt, std::nullopt, "GameServerAllocation"), &msg),
      400);
  Obj nometa = Obj::FromJson("{\"kind\":\"GameServer\",\"status\":{\"state\":\"Ready\"}}");
  EXPECT_EQ(Status(Route::kMutateGameServers, Upd(nometa, gs), &msg), 400);
  EXPECT_NE(msg.find("request.object.metadata is missing"), std::string::npos);
}

TEST(Codec, WrongTypesAnywhereWeRead) {
  Obj ok("gameserver-ready");
  struct Case {
    std::string pointer, raw, expect;
  } cases[] = {
      {"/metadata/labels", "[\"allocating.agones.dev/enabled\"]",
       "request.object.metadata.labels is an array, expected an object"},
      {"/metadata/labels/game", "1", "request.object.metadata.labels[\"game\"] is a number"},
      {"/metadata/annotations", "\"x\"", "request.object.metadata.annotations is a string"},
      {"/metadata/annotations/allocating.agones.dev~1timeout", "30",
       "request.object.metadata.annotations[\"allocating.agones.dev/timeout\"] is a number"},
      {"/metadata/annotations/x", "{}", "is an object, expected a string"},
      {"/metadata/annotations/x", "true", "is a boolean, expected a string"},
      {"/metadata", "[]", "request.object.metadata is an array"},
      {"/metadata/name", "5", "request.object.metadata.name is a number"},
      {"/metadata/namespace", "[]", "request.object.metadata.namespace is an array"},
      {"/status", "\"Ready\"", "request.object.status is a string"},
      {"/status/state", "3", "request.object.status.state is a number, expected a string"},
      {"/status/state", "{}", "request.object.status.state is an object"},
  };
  for (const auto& c : cases) {
    Obj bad = ok;
    bad.SetRaw(c.pointer, c.raw);
    for (Route route : {Route::kMutateGameServers, Route::kValidateGameServers}) {
      std::string msg;
      EXPECT_EQ(Status(route, Upd(bad, ok), &msg), 400) << c.pointer;
      EXPECT_NE(msg.find(c.expect), std::string::npos) << c.pointer << " -> " << msg;
      // In the old object too.
      EXPECT_EQ(Status(route, Upd(ok, bad), &msg), 400) << c.pointer;
      EXPECT_NE(msg.find("request.oldObject"), std::string::npos) << msg;
    }
  }
  // Objects that are not objects.
  std::string msg;
  EXPECT_EQ(Status(Route::kMutateGameServers,
                   Review(kV1, "UPDATE", kSdk, std::string("[]"), ok.Json()), &msg),
            400);
  EXPECT_EQ(Status(Route::kValidateFleets,
                   Review(kV1, "CREATE", kSdk, std::string("7"), std::nullopt, "Fleet"), &msg),
            400);
  Obj fleet("fleet");
  fleet.SetRaw("/spec/template", "[]");
  EXPECT_EQ(Status(Route::kValidateFleets,
                   Review(kV1, "CREATE", kSdk, fleet.Json(), std::nullopt, "Fleet"), &msg),
            400);
  EXPECT_NE(msg.find("request.object.spec.template is an array"), std::string::npos) << msg;
  Obj fleet2("fleet");
  fleet2.SetRaw("/spec/template/metadata/annotations", "{\"a\":null}");
  EXPECT_EQ(Status(Route::kValidateFleets,
                   Review(kV1, "CREATE", kSdk, fleet2.Json(), std::nullopt, "Fleet"), &msg),
            400);
}

TEST(Codec, NullsAreAbsent) {
  Obj gs("gameserver-ready");
  gs.SetRaw("/metadata/labels", "null");
  Response r = Call(Route::kMutateGameServers, Upd(gs, gs));
  EXPECT_EQ(r.raw.http_status, 200);
  EXPECT_TRUE(r.allowed);
}

TEST(Codec, WrongKindForRouteIsAllowedWithWarning) {
  Obj fleet("fleet");
  Response r = Call(Route::kValidateGameServers,
                    Review(kV1, "CREATE", kSdk, fleet.Json(), std::nullopt, "Fleet"));
  EXPECT_EQ(r.raw.http_status, 200);
  EXPECT_TRUE(r.allowed);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("check the webhook configuration"), std::string::npos);
}

TEST(Codec, NestingDeeperThan512IsRefusedBeforeParsing) {
  auto body = [](size_t depth) {
    return "{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\","
           "\"request\":{\"uid\":\"u\",\"operation\":\"UPDATE\",\"x\":" +
           std::string(depth, '[') + std::string(depth, ']') + "}}";
  };
  // The envelope and request objects are two levels.
  Response ok = Call(Route::kMutateGameServers, body(510));
  EXPECT_EQ(ok.raw.http_status, 400);
  EXPECT_EQ(ok.raw.reason.find("nests"), std::string::npos) << ok.raw.reason;
  Response deep = Call(Route::kMutateGameServers, body(511));
  EXPECT_EQ(deep.raw.http_status, 400);
  EXPECT_NE(deep.raw.reason.find("deeper than 512 levels"), std::string::npos) << deep.raw.reason;
  // Brackets inside strings (escaped quotes included) do not count.
  std::string in_string =
      "{\"kind\":\"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"}";
  EXPECT_EQ(Call(Route::kMutateGameServers, in_string).raw.reason.find("nests"), std::string::npos);
}

TEST(Codec, HostileInputNeverCrashes) {
  // Deep nesting (iterative parser: no stack exhaustion).
  std::string deep(200000, '[');
  EXPECT_EQ(Status(Route::kMutateGameServers, deep), 400);
  std::string deep_ok =
      "{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\","
      "\"request\":{\"uid\":\"u\",\"operation\":\"UPDATE\",\"x\":" +
      std::string(100000, '[') + std::string(100000, ']') + "}}";
  EXPECT_EQ(Status(Route::kMutateGameServers, deep_ok), 400);  // object/oldObject missing
  // Embedded NULs, invalid UTF-8, huge strings.
  EXPECT_EQ(Status(Route::kMutateGameServers, std::string("{\"a\":\"\0\"}", 10)), 400);
  Obj gs("gameserver-ready");
  gs.Ann("big", std::string(1 << 20, 'x'));
  Response r = Call(Route::kMutateGameServers, Upd(gs.State("Allocated"), Obj("gameserver-ready")));
  EXPECT_EQ(r.raw.http_status, 200);
  EXPECT_NE(r.patch, "");
  // Every prefix of a valid review is handled.
  std::string body = Upd(Obj("gameserver-allocated-by-allocator"), Obj("gameserver-ready"));
  for (size_t n = 0; n < body.size(); n += 97) {
    Response p = Call(Route::kMutateGameServers, body.substr(0, n));
    EXPECT_EQ(p.raw.http_status, 400) << n;
  }
}

TEST(Codec, FixtureIndexAnswersAsDocumented) {
  std::string text = ReadFixture("index.json");
  rapidjson::Document idx;
  idx.Parse(text.c_str());
  ASSERT_FALSE(idx.HasParseError());
  CallOptions opts;
  opts.now = std::chrono::system_clock::now();
  int n = 0;
  for (const auto& e : idx["reviews"].GetArray()) {
    std::string file = e["file"].GetString();
    auto route = admission::RouteFromPath(e["route"].GetString());
    ASSERT_TRUE(route) << file;
    std::string body = ReadFixture(file);
    Response r = Call(*route, body, opts);
    EXPECT_EQ(r.raw.http_status, e["http_status"].GetInt()) << file;
    rapidjson::Document req;
    req.Parse(body.c_str());
    EXPECT_EQ(r.api_version, req["apiVersion"].GetString()) << file;
    EXPECT_EQ(r.uid, req["request"]["uid"].GetString()) << file;
    EXPECT_EQ(r.allowed, e["allowed"].GetBool()) << file << ": " << r.message;
    EXPECT_EQ(!r.patch.empty(), e["patched"].GetBool()) << file;
    ++n;
  }
  EXPECT_GE(n, 20);
}

}  // namespace
}  // namespace aw::testing
