// The compact GameServer record (policy/gameserver_stream.h) against the document path
// (ParseGameServer, Parse::kLenient): field by field, for every fixture and 1,000 random
// GameServers with every field present, absent, null, mistyped or repeated; and the scans that find
// objects in list pages and watch events without a document (kube/core/raw_scan.h).
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kube/core/raw_scan.h"
#include "policy/gameserver.h"
#include "policy/gameserver_stream.h"

namespace aw::policy {
namespace {

// A new field of the view must be decoded by the streaming path and compared by operator==:
// this size changes with it and stops the build until both are done (and this number follows).
// ObjectMeta: present, 5 strings, deleting, 2 StringMaps (present, vector, string, the borrowed
// buffer's pointer of StringMap::Borrow) = 320 bytes;
// GameServerView adds state, address, ports, allocation, since, node_name, addresses, counters,
// lists = 256 (x86-64, libstdc++).
static_assert(sizeof(ObjectMeta) == 320 && sizeof(GameServerView) == 576,
              "GameServerView changed: decode the new field in gameserver_stream.cc, compare it "
              "in operator==, then update these sizes");

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string Describe(const GameServerView& g) {
  std::string s = "present=" + std::to_string(g.present) + " ns=" + g.namespace_ +
                  " name=" + g.name + " gen=" + g.generate_name + " uid=" + g.uid +
                  " rv=" + g.resource_version + " deleting=" + std::to_string(g.deleting) +
                  " state=" + g.state + " address=" + g.address + " node=" + g.node_name +
                  " alloc=" + g.allocation + " since=" + std::to_string(g.since.has_value()) +
                  " counters=" + g.counters_json + " lists=" + g.lists_json + " labels(" +
                  std::to_string(g.labels.present()) + ")={";
  g.labels.ForEach([&](std::string_view k, std::string_view v) {
    s += std::string(k) + ":" + std::string(v) + ",";
  });
  s += "} annotations(" + std::to_string(g.annotations.present()) + ")={";
  g.annotations.ForEach([&](std::string_view k, std::string_view v) {
    s += std::string(k) + ":" + std::string(v) + ",";
  });
  s += "} ports=[";
  for (const auto& p : g.ports) s += p.name + ":" + std::to_string(p.port) + ",";
  s += "] addresses=[";
  for (const auto& a : g.addresses) s += a.type + ":" + a.address + ",";
  return s + "]";
}

// Both paths over one text; an error of the streaming path only for text that is not JSON.
void ExpectSame(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.data(), text.size());
  GameServerView streamed;
  Status s = DecodeGameServer(text, &streamed);
  if (d.HasParseError()) {
    EXPECT_FALSE(s.ok()) << text;
    return;
  }
  ASSERT_TRUE(s.ok()) << s.message() << "\n" << text;
  GameServerView parsed = ParseGameServer(d);
  EXPECT_TRUE(streamed == parsed) << "text:     " << text << "\nstreamed: " << Describe(streamed)
                                  << "\nparsed:   " << Describe(parsed);
}

TEST(GameServerStream, EveryFixtureMatchesTheDocumentPath) {
  const std::string root = std::string(AW_SOURCE_DIR) + "/test/fixtures";
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(root + "/objects")) {
    ExpectSame(ReadFile(e.path()));
    ++n;
  }
  for (const auto& e : std::filesystem::directory_iterator(root + "/reviews")) {
    rapidjson::Document d;
    std::string text = ReadFile(e.path());
    d.Parse(text.data(), text.size());
    ASSERT_FALSE(d.HasParseError()) << e.path();
    for (const char* which : {"object", "oldObject"}) {
      auto req = d.FindMember("request");
      if (req == d.MemberEnd() || !req->value.IsObject()) continue;
      auto o = req->value.FindMember(which);
      if (o == req->value.MemberEnd()) continue;
      rapidjson::StringBuffer buf;
      rapidjson::Writer<rapidjson::StringBuffer> w(buf);
      o->value.Accept(w);
      ExpectSame(std::string(buf.GetString(), buf.GetSize()));
      ++n;
    }
  }
  EXPECT_GT(n, 20);
  // The fixtures carry what the caches need: a real record, not an empty one.
  GameServerView g;
  ASSERT_TRUE(
      DecodeGameServer(ReadFile(root + "/objects/gameserver-allocating-sdk-ready.json"), &g).ok());
  EXPECT_EQ(g.name, "xonotic-8k2vq-7tq2m");
  EXPECT_EQ(g.state, "Allocating");
  EXPECT_FALSE(g.ports.empty());
  EXPECT_TRUE(g.OptedIn());
  EXPECT_TRUE(g.since.has_value());
  EXPECT_FALSE(g.allocation.empty());
}

// Random JSON values of the shapes a GameServer's fields can take, and of the wrong ones.
class Gen {
 public:
  explicit Gen(uint32_t seed) : rng_(seed) {}
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(int percent) { return Int(1, 100) <= percent; }
  std::string Str() {
    static const std::vector<std::string> pool = {"",
                                                  "a",
                                                  "default",
                                                  "Allocating",
                                                  "Ready",
                                                  "gs-1",
                                                  "agones.dev/fleet",
                                                  "x\\u00e9y",
                                                  "with \\\"quotes\\\"",
                                                  "2026-12-02T14:23:13.123456789Z",
                                                  "true",
                                                  "n1",
                                                  "10.0.0.1",
                                                  "allocating.agones.dev/since",
                                                  "allocating.agones.dev/allocation"};
    return "\"" + pool[Int(0, static_cast<int>(pool.size()) - 1)] + "\"";
  }
  std::string Scalar() {
    switch (Int(0, 9)) {
      case 0:
        return "null";
      case 1:
        return Chance(50) ? "true" : "false";
      case 2:
        return std::to_string(Int(-100000, 100000));
      case 3:
        return "2147483648";
      case 4:
        return "-2147483649";
      case 5:
        return "18446744073709551615";
      case 6:
        return "7000.0";
      case 7:
        return "1e3";
      default:
        return Str();
    }
  }
  std::string Any(int depth) {
    if (depth > 3 || Chance(60)) return Scalar();
    if (Chance(50)) {
      std::string s = "[";
      for (int i = 0, n = Int(0, 3); i < n; ++i) s += (i ? "," : "") + Any(depth + 1);
      return s + "]";
    }
    std::string s = "{";
    for (int i = 0, n = Int(0, 3); i < n; ++i) s += (i ? "," : "") + Str() + ":" + Any(depth + 1);
    return s + "}";
  }
  // A value for a field that expects `good` most of the time, anything else otherwise.
  std::string Field(const std::string& good) {
    switch (Int(0, 9)) {
      case 0:
        return "null";
      case 1:
        return Any(2);
      default:
        return good;
    }
  }
  std::string Map() {
    std::string s = "{";
    for (int i = 0, n = Int(0, 6); i < n; ++i) {
      std::string key = Chance(50) ? "\"allocating.agones.dev/since\"" : Str();
      if (Chance(10)) key = "\"allocating.agones.dev/allocation\"";
      std::string value = Chance(80) ? (Chance(30) ? "\"2026-12-02T14:23:13Z\"" : Str()) : Scalar();
      s += (i ? "," : "") + key + ":" + value;
    }
    return s + "}";
  }
  // An object of these members, some dropped, some repeated, extras among them, in random order.
  std::string Object(std::vector<std::pair<std::string, std::string>> members) {
    std::vector<std::string> parts;
    for (auto& [k, v] : members) {
      if (Chance(15)) continue;
      parts.push_back("\"" + k + "\":" + v);
      if (Chance(10)) parts.push_back("\"" + k + "\":" + Any(2));  // a repeated key
    }
    for (int i = 0, n = Int(0, 2); i < n; ++i) parts.push_back(Str() + ":" + Any(1));
    std::shuffle(parts.begin(), parts.end(), rng_);
    std::string s = "{";
    for (size_t i = 0; i < parts.size(); ++i) s += (i ? "," : "") + parts[i];
    return s + "}";
  }
  std::string Array(const std::function<std::string()>& element) {
    std::string s = "[";
    for (int i = 0, n = Int(0, 3); i < n; ++i) s += (i ? "," : "") + element();
    return s + "]";
  }
  std::string GameServer() {
    std::string meta =
        Object({{"name", Field(Str())},
                {"generateName", Field(Str())},
                {"namespace", Field(Str())},
                {"uid", Field(Str())},
                {"resourceVersion", Field("\"" + std::to_string(Int(1, 99999)) + "\"")},
                {"deletionTimestamp", Chance(50) ? "null" : Field(Str())},
                {"labels", Field(Map())},
                {"annotations", Field(Map())},
                {"managedFields", Array([&] { return Any(0); })}});
    std::string status = Object(
        {{"state", Field(Str())},
         {"address", Field(Str())},
         {"nodeName", Field(Str())},
         {"ports", Field(Array([&] {
            return Chance(85) ? Object({{"name", Field(Str())}, {"port", Field(Scalar())}})
                              : Any(1);
          }))},
         {"addresses", Field(Array([&] {
            return Chance(85) ? Object({{"type", Field(Str())}, {"address", Field(Str())}})
                              : Any(1);
          }))},
         {"counters",
          Field(Object({{"players", Object({{"count", Scalar()}, {"capacity", Scalar()}})}}))},
         {"lists",
          Field(Object({{"rooms", Object({{"capacity", Scalar()}, {"values", Any(1)}})}}))}});
    return Object({{"apiVersion", "\"agones.dev/v1\""},
                   {"metadata", Field(meta)},
                   {"spec", Any(0)},
                   {"status", Field(status)}});
  }

 private:
  std::mt19937 rng_;
};

TEST(GameServerStream, ThousandRandomGameServersMatchTheDocumentPath) {
  Gen gen(20261205);
  for (int i = 0; i < 1000; ++i) {
    std::string text = gen.GameServer();
    ExpectSame(text);
    if (HasFailure()) break;  // one clear case, not a thousand
  }
  // Roots that are not objects, and text that is not JSON.
  for (const char* t : {"[]", "null", "3", "\"x\"", "{}", "{\"metadata\":null}", "", "{",
                        "{\"a\":}", "{} {}", "[1,2"}) {
    ExpectSame(t);
  }
}

TEST(GameServerStream, RefusesTextThatIsNotJsonAndSurvivesDeepNesting) {
  GameServerView g;
  EXPECT_FALSE(DecodeGameServer("{\"metadata\":{\"name\":\"x\"}", &g).ok());
  EXPECT_EQ(g.name, "") << "a failed decode leaves an empty view";
  // Iterative parsing: nesting deeper than any stack would hold is no crash.
  std::string deep = "{\"spec\":" + std::string(200000, '[') + std::string(200000, ']') +
                     ",\"metadata\":{\"name\":\"deep\"}}";
  ASSERT_TRUE(DecodeGameServer(deep, &g).ok());
  EXPECT_EQ(g.name, "deep");
}

TEST(StringMapCompact, StaticKeysFirstValueWinsAndSet) {
  rapidjson::Document d;
  d.Parse(R"({"agones.dev/fleet":"f","zz":"1","zz":"2","agones.dev/fleet":"g","n":3,"a":"x"})");
  StringMap m(&d, "labels", Parse::kLenient);
  EXPECT_TRUE(m.present());
  EXPECT_EQ(m.size(), 3u);
  EXPECT_EQ(m.Get("agones.dev/fleet"), "f");
  EXPECT_EQ(m.Get("zz"), "1");
  EXPECT_EQ(m.Get("a"), "x");
  EXPECT_FALSE(m.Get("n"));
  EXPECT_FALSE(m.Get("agones.dev/gameserverset"));
  // A static key costs no characters: only the value is stored.
  StringMap only_static(StringMap::Map{{"allocating.agones.dev/enabled", "true"}});
  EXPECT_LE(only_static.HeapBytes(), 16u + 4u + 16u);
  m.Set("b", "y");
  m.Set("a", "z");
  EXPECT_EQ(m.Get("a"), "z");
  EXPECT_EQ(m.Get("b"), "y");
  std::vector<std::string> keys;
  m.ForEach([&](std::string_view k, std::string_view) { keys.emplace_back(k); });
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "agones.dev/fleet", "b", "zz"}));
  StringMap absent;
  EXPECT_FALSE(absent.present());
  EXPECT_FALSE(absent == StringMap(StringMap::Map{}));
}

TEST(RawScan, ListPageItemsAndMetadata) {
  std::string body =
      R"({"kind":"GameServerList","metadata":{"resourceVersion":"42","continue":"c1"},"items":[)"
      R"({"metadata":{"name":"a"}},7,{"metadata":{"name":"b","x":[{"y":{}}]}},[1],null]})";
  auto page = kube::ScanListPage(body);
  ASSERT_TRUE(page.ok()) << page.status().message();
  EXPECT_EQ(page->resource_version, "42");
  EXPECT_EQ(page->continue_token, "c1");
  ASSERT_EQ(page->items.size(), 2u);
  EXPECT_EQ(page->items[0], R"({"metadata":{"name":"a"}})");
  EXPECT_EQ(page->items[1], R"({"metadata":{"name":"b","x":[{"y":{}}]}})");
  EXPECT_EQ(page->non_object_items, 3u);
  // An item's own metadata is not the list's.
  auto p2 = kube::ScanListPage(
      R"({"items":[{"metadata":{"resourceVersion":"9","continue":"x"}}],"metadata":{"resourceVersion":"10"}})");
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(p2->resource_version, "10");
  EXPECT_EQ(p2->continue_token, "");
  EXPECT_FALSE(kube::ScanListPage("[]").ok());
  EXPECT_FALSE(kube::ScanListPage(R"({"items":[{"a":1})").ok());
  EXPECT_FALSE(kube::ScanListPage("").ok());
}

TEST(RawScan, WatchEvents) {
  auto ev =
      kube::ScanWatchEvent(R"({"type":"MODIFIED","object":{"metadata":{"name":"a"},"s":"}"}})");
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->type, kube::WatchEvent::Type::kModified);
  EXPECT_EQ(ev->object, R"({"metadata":{"name":"a"},"s":"}"})");
  // The object before the type, as another encoder may write it.
  ev = kube::ScanWatchEvent(R"({"object":{"metadata":{"resourceVersion":"5"}},"type":"BOOKMARK"})");
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->type, kube::WatchEvent::Type::kBookmark);
  EXPECT_EQ(ev->object, R"({"metadata":{"resourceVersion":"5"}})");
  ev = kube::ScanWatchEvent(R"({"type":"ERROR","object":{"kind":"Status","code":410}})");
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->type, kube::WatchEvent::Type::kError);
  EXPECT_FALSE(kube::ScanWatchEvent(R"({"type":"ADDED"})").ok());
  EXPECT_FALSE(kube::ScanWatchEvent(R"({"type":7,"object":{}})").ok());
  EXPECT_FALSE(kube::ScanWatchEvent(R"({"type":"NOPE","object":{}})").ok());
  EXPECT_FALSE(kube::ScanWatchEvent(R"({"type":"ADDED","object":{"metadata":{)").ok());
  EXPECT_FALSE(kube::ScanWatchEvent(R"({"type":"ADDED","object":[]})").ok());
  EXPECT_FALSE(kube::ScanWatchEvent("[]").ok());
}

}  // namespace
}  // namespace aw::policy
