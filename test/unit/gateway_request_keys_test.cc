// RequestKeyIndex: the index follows every upsert and delete, and Find gives what the linear scan
// (FindByRequestKey over the whole cache) gives.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "gateway/io/request_keys.h"
#include "policy/gameserver_stream.h"

namespace aw::gateway {
namespace {

struct Spec {
  std::string ns = "ns";
  std::string name;
  std::string key;  // "" = no request-key annotation
  std::string state = "Allocated";
  std::string last = "2026-01-02T03:04:05Z";
  std::string outcome;  // e.g. "Undelivered" (released)
  bool opted_in = true;
};

kube::ObjectPtr Object(const Spec& s) {
  std::string ann = R"({"agones.dev/last-allocated":")" + s.last + R"(")";
  if (!s.key.empty()) ann += R"(,"allocating.agones.dev/request-key":")" + s.key + R"(")";
  if (!s.outcome.empty()) ann += R"(,"allocating.agones.dev/outcome":")" + s.outcome + R"(")";
  ann += "}";
  const std::string labels =
      s.opted_in ? R"({"allocating.agones.dev/enabled":"true"})" : std::string("{}");
  const std::string json = R"({"metadata":{"name":")" + s.name + R"(","namespace":")" + s.ns +
                           R"(","labels":)" + labels + R"(,"annotations":)" + ann +
                           R"(},"status":{"state":")" + s.state + R"("}})";
  // The cache's form: the compact record decoded from the object's text.
  auto o = std::make_shared<kube::CachedObject>();
  EXPECT_TRUE(policy::DecodeGameServer(json, o.get()).ok()) << json;
  return o;
}

std::string NameOf(const kube::ObjectPtr& o) { return o ? o->name : "<none>"; }

TEST(RequestKeyIndex, FollowsUpsertsAndDeletes) {
  RequestKeyIndex index;
  index.OnAdd(Object({.name = "plain"}));
  EXPECT_EQ(index.Size(), 0u) << "an object without a request key is not stored";

  index.OnAdd(Object({.name = "gs-a", .key = "k1"}));
  EXPECT_EQ(NameOf(index.Find("ns", "k1")), "gs-a");
  EXPECT_EQ(index.Find("other", "k1"), nullptr) << "keys are per namespace";
  EXPECT_EQ(index.Find("ns", "k2"), nullptr);

  // The key changes: found under the new one only.
  index.OnAdd(Object({.name = "gs-a", .key = "k2"}));
  EXPECT_EQ(index.Find("ns", "k1"), nullptr);
  EXPECT_EQ(NameOf(index.Find("ns", "k2")), "gs-a");
  EXPECT_EQ(index.Size(), 1u);

  // The key goes (the server was re-used by an allocation without one).
  index.OnAdd(Object({.name = "gs-a"}));
  EXPECT_EQ(index.Find("ns", "k2"), nullptr);
  EXPECT_EQ(index.Size(), 0u);

  index.OnAdd(Object({.name = "gs-b", .key = "k3"}));
  index.OnDelete(Object({.name = "gs-b", .key = "k3"}));
  EXPECT_EQ(index.Find("ns", "k3"), nullptr);
  EXPECT_EQ(index.Size(), 0u);
  index.OnDelete(Object({.name = "never-seen", .key = "k3"}));  // harmless
  index.OnAdd(nullptr);
  index.OnDelete(nullptr);
}

TEST(RequestKeyIndex, FindsTheServerThatStillHoldsTheRequest) {
  RequestKeyIndex index;
  // A re-allocation left two servers with the key: the released one is skipped, and of those
  // that hold it the earliest allocation wins on every replica.
  index.OnAdd(Object(
      {.name = "released", .key = "k", .last = "2026-01-02T03:04:01Z", .outcome = "Undelivered"}));
  index.OnAdd(Object({.name = "later", .key = "k", .last = "2026-01-02T03:04:09Z"}));
  index.OnAdd(Object(
      {.name = "earlier", .key = "k", .state = "Allocating", .last = "2026-01-02T03:04:05Z"}));
  EXPECT_EQ(NameOf(index.Find("ns", "k")), "earlier");
  index.OnAdd(
      Object({.name = "earlier", .key = "k", .state = "Shutdown", .last = "2026-01-02T03:04:05Z"}));
  EXPECT_EQ(NameOf(index.Find("ns", "k")), "later") << "a server that left the allocation";
  index.OnAdd(
      Object({.name = "later", .key = "k", .last = "2026-01-02T03:04:09Z", .opted_in = false}));
  EXPECT_EQ(index.Find("ns", "k"), nullptr) << "a server no longer opted in holds nothing";
}

// Random histories of upserts and deletes: after each step, Find equals the linear scan over the
// cache the informer would hold.
TEST(RequestKeyIndex, SameAnswerAsTheLinearScan) {
  std::mt19937 rng(7);
  const std::vector<std::string> keys = {"", "a", "b", "c"};
  const std::vector<std::string> states = {"Allocated", "Allocating", "Ready", "Shutdown"};
  const std::vector<std::string> namespaces = {"ns", "other"};
  for (int run = 0; run < 20; ++run) {
    RequestKeyIndex index;
    std::map<std::string, kube::ObjectPtr> cache;
    for (int step = 0; step < 300; ++step) {
      Spec s;
      s.ns = namespaces[rng() % namespaces.size()];
      s.name = "gs-" + std::to_string(rng() % 12);
      const std::string id = s.ns + "/" + s.name;
      if (rng() % 5 == 0) {
        if (auto it = cache.find(id); it != cache.end()) {
          index.OnDelete(it->second);
          cache.erase(it);
        }
      } else {
        s.key = keys[rng() % keys.size()];
        s.state = states[rng() % states.size()];
        s.last = "2026-01-02T03:04:" + std::to_string(10 + rng() % 50) + "Z";
        s.outcome = rng() % 4 == 0 ? "Undelivered" : "";
        auto obj = Object(s);
        cache[id] = obj;
        index.OnAdd(obj);
      }
      std::vector<kube::ObjectPtr> all;
      for (const auto& [id2, o] : cache) all.push_back(o);
      for (const std::string& ns : namespaces) {
        for (const std::string& k : keys) {
          if (k.empty()) continue;
          ASSERT_EQ(index.Find(ns, k), FindByRequestKey(all, ns, k))
              << "run " << run << " step " << step << " " << ns << "/" << k;
        }
      }
    }
  }
}

}  // namespace
}  // namespace aw::gateway
