// Driver for test/unit/apply_patches.py (the `patches` suite), not a test by itself.
//
// apply_patches.py runs the unit tests once with AW_PATCH_CASES_OUT=<file> to collect every patch
// the mutating webhook produced (see admission_test_util.h), applies each with python3-jsonpatch,
// and then runs this test with AW_REINVOKE_IN=<file> AW_REINVOKE_OUT=<file>: each input line is
// {name, review, trusted_users, crd_accepts_allocating} where review.request.object is the object
// as patched by jsonpatch; each output line is {name, http_status, allowed, patch} with the
// decision re-run on it (one hour later), so that idempotence is checked on an object built by an
// independent RFC 6902 implementation. Without the variables it checks one built-in case.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cstdlib>
#include <fstream>

#include "admission_test_util.h"

namespace aw::testing {
namespace {

std::string Decide(const std::string& line) {
  rapidjson::Document in;
  in.Parse(line.c_str(), line.size());
  if (in.HasParseError() || !in.IsObject()) return "";
  CallOptions opts;
  opts.now = TestNow() + std::chrono::hours(1);
  opts.policy.trusted_users.clear();
  if (in.HasMember("trusted_users")) {
    for (const auto& u : in["trusted_users"].GetArray()) {
      opts.policy.trusted_users.emplace_back(u.GetString());
    }
  }
  if (in.HasMember("crd_accepts_allocating")) opts.crd = in["crd_accepts_allocating"].GetBool();
  Response r = Call(admission::Route::kMutateGameServers, ToJson(in["review"]), opts);
  rapidjson::Document out(rapidjson::kObjectType);
  auto& a = out.GetAllocator();
  out.AddMember("name", rapidjson::Value(in["name"], a), a);
  out.AddMember("http_status", r.raw.http_status, a);
  out.AddMember("allowed", r.allowed, a);
  out.AddMember("patch", rapidjson::Value(r.patch.c_str(), a), a);
  return ToJson(out);
}

TEST(PatchCases, Reinvoke) {
  const char* in_path = std::getenv("AW_REINVOKE_IN");
  const char* out_path = std::getenv("AW_REINVOKE_OUT");
  if (!in_path || !out_path) {
    // Built-in case: the patched allocator update re-run yields no patch.
    Obj patched = Obj("gameserver-allocating");
    std::string review =
        Review(kV1, "UPDATE", kAllocator, patched.Json(), Obj("gameserver-ready").Json());
    std::string line = "{\"name\":\"builtin\",\"review\":" + review + ",\"trusted_users\":[]}";
    std::string out = Decide(line);
    EXPECT_NE(out.find("\"allowed\":true"), std::string::npos) << out;
    EXPECT_NE(out.find("\"patch\":\"\""), std::string::npos) << out;
    return;
  }
  std::ifstream in(in_path);
  ASSERT_TRUE(in) << in_path;
  std::ofstream out(out_path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    out << Decide(line) << "\n";
    ++n;
  }
  EXPECT_GT(n, 0);
}

}  // namespace
}  // namespace aw::testing
