// JsonPatch / MapEdit (policy/json_patch.h): minimal ops for a string map.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <string>
#include <vector>

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

TEST(MapEdit, SetAValueItHoldsAlready) {
  // Get's view points into the edit's own buffer; setting it under another key (the resolver's
  // allocation id following `since`) must not read it while the buffer grows.
  rapidjson::Document d = Parse(R"({"other":"v"})");
  StringMap m(&d, "m");
  MapEdit e(m, "/metadata/annotations");
  e.Set("since", std::string(40, 's'));
  std::vector<std::string> keys;  // keys are not copied: they outlive the edit
  keys.reserve(80);
  for (int i = 0; i < 40; ++i) {
    // Each round adds 40 more characters, past the inline buffer into the heap.
    const std::string_view since = *e.Get("since");
    e.Set(keys.emplace_back("k" + std::to_string(i)), since);
    e.Set(keys.emplace_back("pad" + std::to_string(i)), std::string(40, 'p'));
  }
  EXPECT_EQ(e.Get("k39"), std::string(40, 's'));
  EXPECT_EQ(e.Get("pad39"), std::string(40, 'p'));
}

TEST(MapEdit, ManyEditsAndLongValuesSpillToTheHeap) {
  // More edits and characters than the inline buffers hold: the same ops as a std::map would say.
  rapidjson::Document d = Parse(R"({"a":"1"})");
  StringMap m(&d, "m");
  MapEdit e(m, "/metadata/annotations");
  std::string want = "[";
  std::vector<std::string> keys;  // keys are not copied: they outlive the edit
  keys.reserve(40);
  for (int i = 0; i < 40; ++i) {
    const std::string& key = keys.emplace_back("key/" + std::to_string(i));
    const std::string value(100 + i, static_cast<char>('a' + i % 26));
    e.Set(key, value);
    if (i > 0) want += ",";
    want += R"({"op":"add","path":"/metadata/annotations/key~1)" + std::to_string(i) +
            R"(","value":")" + value + "\"}";
  }
  e.Remove("a");
  want += R"(,{"op":"remove","path":"/metadata/annotations/a"}])";
  JsonPatch p;
  e.AppendTo(&p);
  EXPECT_EQ(p.size(), 41u);
  EXPECT_EQ(p.ToJson(), want);
}

TEST(JsonPatch, MapItemsAndMembersAfterTheInlineBuffer) {
  JsonPatch p;
  const std::string big(700, 'x');  // past the 512 inline characters at once
  p.Test("/metadata/resourceVersion", big);
  p.StartMap("/metadata/labels");
  p.AddMapItem("k\"1", "v");
  p.AddMapItem("k2", big);
  p.AddStringAt("/metadata/annotations", "a~b/c", "w");
  p.RemoveAt("/metadata/annotations", "gone");
  EXPECT_EQ(p.ToJson(),
            R"([{"op":"test","path":"/metadata/resourceVersion","value":")" + big +
                R"("},{"op":"add","path":"/metadata/labels","value":{"k\"1":"v","k2":")" + big +
                R"("}},{"op":"add","path":"/metadata/annotations/a~0b~1c","value":"w"},)"
                R"({"op":"remove","path":"/metadata/annotations/gone"}])");
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
