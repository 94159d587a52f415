// JsonPatch / MapEdit (policy/json_patch.h): minimal ops for a string map.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "policy/json_patch.h"

namespace aw::policy {
namespace {

rapidjson::Document Parse(const char* json) {
  rapidjson::Document d;
  d.Parse(json);
  return d;
}

TEST(MapEdit, MinimalOpsOnAnExistingMap) {
  rapidjson::Document d = Parse(R"({"a/b":"1","c~d":"2","keep":"3"})");
  StringMap m(&d, "m");
  MapEdit e(m, "/metadata/annotations");
  e.Set("a/b", "1");        // same value: nothing
  e.Set("c~d", "changed");  // replace
  e.Set("new", "x");        // add
  e.Remove("keep");         // remove
  e.Remove("absent");       // nothing
  e.Set("tmp", "y");
  e.Remove("tmp");  // set then removed, absent before: nothing
  JsonPatch p;
  e.AppendTo(&p);
  EXPECT_EQ(p.ToJson(),
            R"([{"op":"replace","path":"/metadata/annotations/c~0d","value":"changed"},)"
            R"({"op":"add","path":"/metadata/annotations/new","value":"x"},)"
            R"({"op":"remove","path":"/metadata/annotations/keep"}])");
  EXPECT_EQ(e.Get("c~d"), "changed");
  EXPECT_EQ(e.Get("keep"), std::nullopt);
  EXPECT_EQ(e.Get("a/b"), "1");
}

TEST(MapEdit, AbsentMapIsAddedWhole) {
  StringMap none;
  MapEdit e(none, "/metadata/annotations");
  e.Remove("x");  // cannot remove from an absent map: nothing
  JsonPatch empty;
  e.AppendTo(&empty);
  EXPECT_TRUE(empty.empty());
  e.Set("k/1", "v\"1");
  e.Set("k2", "v2");
  JsonPatch p;
  e.AppendTo(&p);
  EXPECT_EQ(p.ToJson(),
            R"([{"op":"add","path":"/metadata/annotations","value":{"k/1":"v\"1","k2":"v2"}}])");
}

TEST(JsonPatch, SerializesInOrder) {
  JsonPatch p;
  p.ReplaceString("/status/state", "Allocating");
  p.Remove("/a~1b");
  p.AddString("/c", "");
  EXPECT_EQ(p.ToJson(), R"([{"op":"replace","path":"/status/state","value":"Allocating"},)"
                        R"({"op":"remove","path":"/a~1b"},{"op":"add","path":"/c","value":""}])");
  EXPECT_EQ(JsonPatch().ToJson(), "[]");
}

}  // namespace
}  // namespace aw::policy
