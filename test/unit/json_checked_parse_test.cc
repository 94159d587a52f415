// json::ParseChecked (one pass) must answer exactly what the three separate steps answered before
// it: FirstTooDeep on the text, then RapidJSON's parse, then FindDuplicateKey on the document.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "json/checked_parse.h"
#include "json/duplicate_keys.h"
#include "json/nesting_depth.h"

namespace aw::json {
namespace {

// "ok", "deep@N", "syntax:CODE@N" or the duplicate's message.
std::string Old(std::string_view text, size_t max_depth) {
  if (auto at = FirstTooDeep(text, max_depth)) return "deep@" + std::to_string(*at);
  std::string copy(text);
  rapidjson::Document d;
  d.ParseInsitu<rapidjson::kParseIterativeFlag>(copy.data());
  if (d.HasParseError()) {
    return "syntax:" + std::to_string(d.GetParseError()) + "@" + std::to_string(d.GetErrorOffset());
  }
  if (auto dup = FindDuplicateKey(d)) return dup->Message();
  return "ok";
}

std::string New(std::string_view text, size_t max_depth, std::string* buffer,
                CheckedDocument* doc) {
  buffer->assign(text);
  CheckedParse r = ParseChecked(text, buffer->data(), max_depth, doc);
  switch (r.result) {
    case CheckedParse::Result::kOk:
      return "ok";
    case CheckedParse::Result::kTooDeep:
      return "deep@" + std::to_string(r.offset);
    case CheckedParse::Result::kSyntax:
      return "syntax:" + std::to_string(r.code) + "@" + std::to_string(r.offset);
    case CheckedParse::Result::kDuplicateKey:
      return r.duplicate->Message();
  }
  return "?";
}

std::string New(std::string_view text, size_t max_depth) {
  std::string buffer;
  CheckedDocument doc;
  return New(text, max_depth, &buffer, &doc);
}

void ExpectSame(std::string_view text, size_t max_depth = 512) {
  EXPECT_EQ(New(text, max_depth), Old(text, max_depth)) << text.substr(0, 200);
}

std::vector<std::string> Fixtures() {
  std::vector<std::string> out;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(AW_SOURCE_DIR) + "/test/fixtures/reviews")) {
    std::ifstream f(e.path());
    std::stringstream ss;
    ss << f.rdbuf();
    out.push_back(ss.str());
  }
  return out;
}

TEST(CheckedParse, ValidDocumentsGiveTheSameValue) {
  for (const std::string& text : Fixtures()) {
    std::string buffer = text;
    CheckedDocument doc;
    ASSERT_EQ(ParseChecked(text, buffer.data(), 512, &doc).result, CheckedParse::Result::kOk);
    rapidjson::Document want;
    want.Parse(text.data(), text.size());
    ASSERT_FALSE(want.HasParseError());
    EXPECT_TRUE(doc == want);
  }
}

TEST(CheckedParse, DuplicatesAreNamedAsFindDuplicateKeyNamesThem) {
  // One duplicate at each level, arrays, quoted keys, escapes, the "request" shorthand.
  for (const char* text : {
           R"({"a":1,"a":2})",
           R"({"request":{"uid":"a","uid":"b"}})",
           R"({"request":{"object":{"status":{"state":"Ready","st\u0061te":"x"}}}})",
           R"([[{"x":1,"x":1}]])",
           R"({"a":[1,{"b":[{},{"z":[0,{"q":1,"q":2}]}]}]})",
           R"({"a.b":{"c/d":{"\"":1,"\"":2}}})",
           R"({"":{"x":1,"x":2}})",
           R"({"":1,"":2})",
       }) {
    ExpectSame(text);
  }
}

TEST(CheckedParse, TheObjectOpenedFirstIsReportedWhenSeveralRepeatKeys) {
  // The parse closes the inner object first; FindDuplicateKey visits the outer one first.
  ExpectSame(R"({"a":{"x":1,"x":2},"a":3})");
  ExpectSame(R"({"p":{"a":{"x":1,"x":2},"a":3},"q":{"y":1,"y":1}})");
  ExpectSame(R"([{"a":[{"b":1,"b":2}]},{"c":1,"c":2}])");
  ExpectSame(R"({"k":[{"z":1,"z":2}],"k":1,"k":2})");
}

TEST(CheckedParse, LargeObjectsReportTheLeastRepeatedName) {
  std::string big = "{";
  for (int i = 40; i > 0; --i)
    big += "\"k" + std::to_string(i % 30) + "\":" + std::to_string(i) + ",";
  big.back() = '}';
  ExpectSame(big);
  ExpectSame("{\"o\":" + big + ",\"o\":1}");
}

TEST(CheckedParse, DepthAndSyntaxErrorsKeepTheirOrderAndOffsets) {
  ExpectSame(std::string(100, '['), 64);
  ExpectSame(std::string(100, '[') + std::string(100, ']'), 64);
  ExpectSame(std::string(64, '[') + std::string(64, ']'), 64);  // at the limit: accepted
  ExpectSame(std::string(513, '['));
  ExpectSame("]]]][[", 1);             // malformed first, too deep later: too deep
  ExpectSame(R"({"a": x [[[[[[)", 3);  // the same
  ExpectSame(R"({"k":"[[[{{{"})", 1);  // brackets in strings do not count
  ExpectSame(R"({"k":"\"[[["})", 1);
  ExpectSame(R"(["\\",[)", 1);
  ExpectSame(R"({"a":"\q[[[[[["})", 3);  // a bad escape, brackets in the rest of the string
  ExpectSame(R"({"a":1,"a":2} x)");      // trailing garbage beats the duplicate
  ExpectSame("");
  ExpectSame("{");
  ExpectSame(R"({"a":1,)");
  ExpectSame(R"({"a":"\ud800"})");
}

TEST(CheckedParse, MutatedReviewsAnswerAsBefore) {
  // Deterministic mutations of every fixture: bytes deleted, replaced and inserted from JSON's
  // structural characters, so that malformed, duplicate and deep variants all occur.
  const std::string alphabet = "{}[]\",:\\ a1u0";
  uint64_t state = 0x9e3779b97f4a7c15u;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  std::string buffer;
  CheckedDocument doc;  // reused, as a server thread reuses its scratch
  int checked = 0;
  for (const std::string& text : Fixtures()) {
    for (int i = 0; i < 150; ++i) {
      std::string m = text;
      const int edits = 1 + static_cast<int>(next() % 4);
      for (int e = 0; e < edits && !m.empty(); ++e) {
        const size_t at = next() % m.size();
        const char c = alphabet[next() % alphabet.size()];
        switch (next() % 3) {
          case 0:
            m.erase(at, 1 + next() % 8);
            break;
          case 1:
            m[at] = c;
            break;
          default:
            m.insert(at, std::string(1 + next() % 3, c));
        }
      }
      const size_t depth = 2 + next() % 12;
      EXPECT_EQ(New(m, depth, &buffer, &doc), Old(m, depth)) << m;
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000);
}

TEST(ReusedStackAllocator, KeepsOneFreedBlockAndGrowsPastIt) {
  ReusedStackAllocator a;
  char* p = static_cast<char*>(a.Malloc(1000));
  ASSERT_NE(p, nullptr);
  p[999] = 'x';
  ReusedStackAllocator::Free(p);
  char* q = static_cast<char*>(a.Malloc(500));  // the kept block
  EXPECT_EQ(q, p);
  q = static_cast<char*>(a.Realloc(q, 500, 900));  // still fits: same block
  EXPECT_EQ(q, p);
  q[0] = 'y';
  q = static_cast<char*>(a.Realloc(q, 900, 100000));  // grows, keeps the bytes
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q[0], 'y');
  ReusedStackAllocator::Free(q);
  EXPECT_EQ(a.Malloc(0), nullptr);
  EXPECT_EQ(a.Realloc(nullptr, 0, 0), nullptr);
}

}  // namespace
}  // namespace aw::json
