// Duplicate JSON keys: any object of the review that repeats a key is a 400 naming the object's
// JSON path and the key (RapidJSON would read the first value, kube-apiserver holds the last).
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/pointer.h>

#include <string>

#include "admission_test_util.h"
#include "contract/keys.h"
#include "json/duplicate_keys.h"

namespace aw::testing {
namespace {

using admission::Route;

// Appends `"key": raw` to the object at `pointer`, even when the key is already there.
Obj& AddDuplicate(Obj& o, const char* pointer, std::string_view key, std::string_view raw) {
  rapidjson::Document& d = o.doc();
  rapidjson::Value* target = rapidjson::Pointer(pointer).Get(d);
  EXPECT_TRUE(target && target->IsObject()) << pointer;
  rapidjson::Document v(&d.GetAllocator());
  v.Parse(raw.data(), raw.size());
  EXPECT_FALSE(v.HasParseError()) << raw;
  rapidjson::Value name(key.data(), static_cast<rapidjson::SizeType>(key.size()), d.GetAllocator());
  target->AddMember(name, v.Move(), d.GetAllocator());
  return o;
}

std::string Upd(const Obj& n, const Obj& o, std::string_view user = kAllocator) {
  return Review(kV1, "UPDATE", user, n.Json(), o.Json());
}

// Expects a 400 on every route whose message contains `expect`.
void Expect400(const std::string& body, const std::string& expect) {
  for (Route route : admission::AllRoutes()) {
    Response r = Call(route, body);
    EXPECT_EQ(r.raw.http_status, 400) << expect;
    EXPECT_EQ(r.raw.outcome, admission::Outcome::kError);
    EXPECT_NE(r.raw.body.find(expect), std::string::npos) << expect << " -> " << r.raw.body;
  }
}

std::optional<std::string> Find(std::string_view json) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
  EXPECT_FALSE(d.HasParseError()) << json.substr(0, 100);
  auto dup = json::FindDuplicateKey(d);
  if (!dup) return std::nullopt;
  return dup->Message();
}

TEST(DuplicateKeys, StateInStatusIsRejectedNotGuessed) {
  // "Ready" first: read by RapidJSON as Ready (no gate) while kube-apiserver stores Allocated.
  Obj n("gameserver-ready");
  AddDuplicate(n, "/status", "state", "\"Allocated\"");
  Obj o("gameserver-ready");
  Expect400(Upd(n, o), "request.object.status: duplicate key \"state\"");
  Expect400(Upd(o, n), "request.oldObject.status: duplicate key \"state\"");
}

TEST(DuplicateKeys, AnnotationAndLabel) {
  Obj n("gameserver-ready");
  n.State("Allocated");
  AddDuplicate(n, "/metadata/annotations", keys::kTimeout, "\"5s\"");
  Expect400(Upd(n, Obj("gameserver-ready")),
            "request.object.metadata.annotations: duplicate key \"allocating.agones.dev/timeout\"");
  Obj l("gameserver-ready");
  AddDuplicate(l, "/metadata/labels", keys::kEnabledLabel, "\"false\"");
  Expect400(Upd(l, Obj("gameserver-ready")),
            "request.object.metadata.labels: duplicate key \"allocating.agones.dev/enabled\"");
}

TEST(DuplicateKeys, MetadataFieldsAndSpec) {
  for (const char* key : {"name", "namespace", "deletionTimestamp", "labels", "annotations"}) {
    Obj n("gameserver-ready");
    n.SetRaw(std::string("/metadata/") + key, "null");
    AddDuplicate(n, "/metadata", key, "null");
    Expect400(Upd(n, Obj("gameserver-ready")),
              std::string("request.object.metadata: duplicate key \"") + key + "\"");
  }
  Obj a("gameserver-ready");
  AddDuplicate(a, "/status", "address", "\"10.0.0.9\"");
  Expect400(Upd(a, Obj("gameserver-ready")), "request.object.status: duplicate key \"address\"");
  Obj p("gameserver-ready");
  AddDuplicate(p, "/spec/ports/0", "name", "\"admin\"");
  Expect400(Upd(p, Obj("gameserver-ready")),
            "request.object.spec.ports[0]: duplicate key \"name\"");
  Obj fleet("fleet");
  AddDuplicate(fleet, "/spec/template/metadata", "annotations", "{}");
  Expect400(Review(kV1, "CREATE", kSdk, fleet.Json(), std::nullopt, "Fleet"),
            "request.object.spec.template.metadata: duplicate key \"annotations\"");
}

TEST(DuplicateKeys, EnvelopeAndRequestFields) {
  const std::string ok = Upd(Obj("gameserver-ready"), Obj("gameserver-ready"));
  ASSERT_EQ(ok.rfind("{\"apiVersion\"", 0), 0u) << ok.substr(0, 40);
  auto with = [&ok](std::string_view after, std::string_view insert) {
    std::string b = ok;
    size_t at = b.find(after);
    EXPECT_NE(at, std::string::npos) << after;
    b.insert(at + after.size(), insert);
    return b;
  };
  Expect400(with("{\"apiVersion\":\"admission.k8s.io/v1\",",
                 "\"apiVersion\":\"admission.k8s.io/v1beta1\","),
            "body: duplicate key \"apiVersion\"");
  Expect400(with("\"request\":{", "\"uid\":\"other\","), "request: duplicate key \"uid\"");
  Expect400(with("\"request\":{", "\"operation\":\"DELETE\","),
            "request: duplicate key \"operation\"");
  Expect400(with("\"userInfo\":{", "\"username\":\"" + std::string(kResolver) + "\","),
            "request.userInfo: duplicate key \"username\"");
  Expect400(with("\"request\":{", "\"object\":null,"), "request: duplicate key \"object\"");
}

TEST(DuplicateKeys, ComparedAfterUnescaping) {
  Obj o("gameserver-ready");
  std::string body = Upd(o, o);
  size_t at = body.find("\"state\":\"Ready\"");
  ASSERT_NE(at, std::string::npos);
  body.insert(at, "\"st\\u0061te\":\"Allocated\",");
  Expect400(body, "request.object.status: duplicate key \"state\"");
}

TEST(DuplicateKeys, SameKeyInDifferentObjectsIsFine) {
  Response r = Call(Route::kMutateGameServers,
                    Upd(Obj("gameserver-allocated-by-allocator"), Obj("gameserver-ready")));
  EXPECT_EQ(r.raw.http_status, 200);
  EXPECT_EQ(Find(R"({"a":{"k":1},"b":{"k":1},"k":[{"k":1},{"k":2}]})"), std::nullopt);
  EXPECT_EQ(Find(R"({"k":1,"K":1,"k ":1,"":1})"), std::nullopt);
}

TEST(DuplicateKeys, NestedArraysOfObjects) {
  EXPECT_EQ(Find(R"({"a":[[{"x":1}],[{"y":1},{"z":[{},{"q":1,"q":2}]}]]})"),
            "body.a[1][1].z[1]: duplicate key \"q\"");
  EXPECT_EQ(Find(R"([[{"x":1,"x":1}]])"), "body[0][0]: duplicate key \"x\"");
  Obj n("gameserver-ready");
  n.SetRaw("/spec/extra", R"([[{"a":1}],[{"b":1},{"c":[{"d":1,"d":2}]}]])");
  Expect400(Upd(n, Obj("gameserver-ready")),
            "request.object.spec.extra[1][1].c[0]: duplicate key \"d\"");
  EXPECT_EQ(Find(R"({"a.b":{"c/d":{"\"":1,"\"":2}}})"),
            "body[\"a.b\"][\"c/d\"]: duplicate key \"\\\"\"");
}

TEST(DuplicateKeys, EveryObjectSizeAroundThePairwiseLimit) {
  for (int n = 2; n <= 40; ++n) {
    for (int dup_at = 1; dup_at < n; ++dup_at) {
      std::string json = "{";
      for (int i = 0; i < n; ++i) {
        if (i) json += ',';
        json += "\"k" + std::to_string(i == dup_at ? 0 : i) + "\":" + std::to_string(i);
      }
      json += '}';
      EXPECT_EQ(Find(json), "body: duplicate key \"k0\"") << json;
    }
  }
}

TEST(DuplicateKeys, HundredThousandDistinctKeys) {
  // Correctness only (no timing assertion): a large object is checked by sorting its names.
  Obj n("gameserver-ready");
  std::string big = "{";
  for (int i = 0; i < 100000; ++i) {
    if (i) big += ',';
    big += "\"key-" + std::to_string(i) + "\":\"v\"";
  }
  n.SetRaw("/spec/big", big + "}");
  Response r = Call(Route::kMutateGameServers, Upd(n, Obj("gameserver-ready")));
  EXPECT_EQ(r.raw.http_status, 200) << r.raw.body.substr(0, 200);
  n.SetRaw("/spec/big", big + ",\"key-54321\":\"w\"}");
  Expect400(Upd(n, Obj("gameserver-ready")),
            "request.object.spec.big: duplicate key \"key-54321\"");
  // The same in annotations, which the handlers read.
  Obj a("gameserver-ready");
  a.SetRaw("/metadata/annotations", big + "}");
  r = Call(Route::kValidateGameServers, Upd(a, Obj("gameserver-ready")));
  EXPECT_EQ(r.raw.http_status, 200) << r.raw.body.substr(0, 200);
  a.SetRaw("/metadata/annotations", big + ",\"key-0\":\"w\"}");
  Expect400(Upd(a, Obj("gameserver-ready")),
            "request.object.metadata.annotations: duplicate key \"key-0\"");
}

TEST(DuplicateKeys, DeepNestingWithoutRecursion) {
  const int depth = 200000;
  std::string deep = std::string(depth, '[') + "{\"a\":1,\"a\":2}" + std::string(depth, ']');
  auto msg = Find(deep);
  ASSERT_TRUE(msg.has_value());
  EXPECT_EQ(msg->substr(0, 7), "body[0]");
  EXPECT_NE(msg->find("[0]: duplicate key \"a\""), std::string::npos);
  std::string objs;
  for (int i = 0; i < depth; ++i) objs += "{\"a\":";
  objs += "1";
  objs += std::string(depth, '}');
  EXPECT_EQ(Find(objs), std::nullopt);
}

TEST(DuplicateKeys, KeysAreEscapedAndClippedInMessages) {
  EXPECT_EQ(Find("{\"a\\nb\\u0001\":1,\"a\\nb\\u0001\":2}"),
            "body: duplicate key \"a\\u000ab\\u0001\"");
  const std::string long_key(300, 'x');
  auto msg = Find("{\"" + long_key + "\":1,\"" + long_key + "\":2}");
  ASSERT_TRUE(msg.has_value());
  EXPECT_EQ(*msg, "body: duplicate key \"" + std::string(100, 'x') + "...\"");
  EXPECT_EQ(Find("{\"\":1,\"\":2}"), "body: duplicate key \"\"");
  EXPECT_EQ(Find("{\"\":{\"x\":1,\"x\":2}}"), "body[\"\"]: duplicate key \"x\"");
}

TEST(DuplicateKeys, ScalarsAndEmptyContainers) {
  EXPECT_EQ(Find("1"), std::nullopt);
  EXPECT_EQ(Find("\"s\""), std::nullopt);
  EXPECT_EQ(Find("{}"), std::nullopt);
  EXPECT_EQ(Find("[]"), std::nullopt);
  EXPECT_EQ(Find("[{},[],{}]"), std::nullopt);
}

}  // namespace
}  // namespace aw::testing
