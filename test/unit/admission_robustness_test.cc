// Robustness: seeded random mutations of realistic reviews (bytes and JSON structure) on every
// route. Whatever the input, Handle answers 200 with an AdmissionReview or 400 with a message;
// it never crashes, throws or answers 500. Deterministic (fixed seeds), not timed.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "admission_test_util.h"

namespace aw::testing {
namespace {

using admission::Route;

// AW_ROBUSTNESS_ITERATIONS and AW_ROBUSTNESS_SEED scale a longer run by hand; the defaults keep
// the unit suite fast and deterministic.
int Iterations() {
  const char* v = std::getenv("AW_ROBUSTNESS_ITERATIONS");
  return v ? std::atoi(v) : 1500;
}
unsigned Seed(unsigned dflt) {
  const char* v = std::getenv("AW_ROBUSTNESS_SEED");
  return v ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) : dflt;
}

std::vector<std::string> Seeds() {
  std::vector<std::string> out;
  for (const char* f :
       {"reviews/v1-allocator-update.json", "reviews/v1beta1-allocator-update.json",
        "reviews/v1-resolver-promotion.json", "reviews/v1-untrusted-promotion.json",
        "reviews/v1-controller-shutdown.json", "reviews/v1-create.json", "reviews/v1-delete.json",
        "reviews/v1-fleet-create.json", "reviews/v1-gameserverset-update.json",
        "reviews/v1-gsa-create.json", "reviews/v1-sdk-patch-update.json"}) {
    out.push_back(ReadFixture(f));
  }
  return out;
}

void ExpectSane(Route route, const std::string& body, const std::string& what) {
  CallOptions opts;
  admission::Context ctx{opts.policy, true, opts.now};
  admission::HandlerResult r = admission::Handle(route, body, ctx);
  ASSERT_TRUE(r.http_status == 200 || r.http_status == 400)
      << what << ": " << r.http_status << " " << r.body;
  if (r.http_status == 200) {
    rapidjson::Document d;
    d.Parse(r.body.c_str(), r.body.size());
    ASSERT_FALSE(d.HasParseError()) << what;
    ASSERT_TRUE(d.IsObject() && d.HasMember("response") && d["response"].HasMember("uid"));
  } else {
    EXPECT_FALSE(r.body.empty());
  }
}

TEST(Robustness, ByteMutations) {
  std::mt19937 rng(Seed(20261202));
  const std::vector<std::string> seeds = Seeds();
  const char* tokens[] = {"null",  "[]",   "{}",          "1",           "-1e999",
                          "\"x\"", "true", "\"\\u0000\"", "\"\\ud800\"", ",",
                          ":",     "\"",   "]",           "}",           "{\"a\":"};
  for (int i = 0; i < Iterations(); ++i) {
    std::string body = seeds[rng() % seeds.size()];
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !body.empty(); ++e) {
      size_t pos = rng() % body.size();
      switch (rng() % 4) {
        case 0:
          body[pos] = static_cast<char>(rng() % 256);
          break;
        case 1:
          body.erase(pos, 1 + rng() % 16);
          break;
        case 2:
          body.insert(pos, tokens[rng() % std::size(tokens)]);
          break;
        case 3:
          body.insert(pos, body.substr(rng() % body.size(), rng() % 64));
          break;
      }
    }
    for (Route route : admission::AllRoutes()) {
      ExpectSane(route, body, "byte mutation " + std::to_string(i));
      if (HasFatalFailure()) return;
    }
  }
}

// Replaces one random value anywhere in the document by a value of another JSON type.
TEST(Robustness, TypeMutations) {
  std::mt19937 rng(Seed(7));
  const std::vector<std::string> seeds = Seeds();
  for (int i = 0; i < Iterations(); ++i) {
    rapidjson::Document d;
    const std::string& seed = seeds[rng() % seeds.size()];
    d.Parse(seed.c_str(), seed.size());
    ASSERT_FALSE(d.HasParseError());
    std::vector<rapidjson::Value*> all;
    std::vector<rapidjson::Value*> stack = {&d};
    while (!stack.empty()) {
      rapidjson::Value* v = stack.back();
      stack.pop_back();
      all.push_back(v);
      if (v->IsObject()) {
        for (auto& m : v->GetObject()) stack.push_back(&m.value);
      } else if (v->IsArray()) {
        for (auto& x : v->GetArray()) stack.push_back(&x);
      }
    }
    auto& a = d.GetAllocator();
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      rapidjson::Value* target = all[1 + rng() % (all.size() - 1)];
      switch (rng() % 6) {
        case 0:
          target->SetNull();
          break;
        case 1:
          target->SetInt(static_cast<int>(rng()));
          break;
        case 2:
          target->SetArray();
          target->PushBack(rapidjson::Value("x", a), a);
          break;
        case 3:
          target->SetObject();
          break;
        case 4:
          target->SetString("Allocated", a);
          break;
        case 5:
          target->SetBool(true);
          break;
      }
      // Values below the edited one are gone; do not edit them again.
      all.resize(1);
      stack = {&d};
      while (!stack.empty()) {
        rapidjson::Value* v = stack.back();
        stack.pop_back();
        if (v != &d) all.push_back(v);
        if (v->IsObject()) {
          for (auto& m : v->GetObject()) stack.push_back(&m.value);
        } else if (v->IsArray()) {
          for (auto& x : v->GetArray()) stack.push_back(&x);
        }
      }
      if (all.size() < 2) break;
    }
    std::string body = ToJson(d);
    for (Route route : admission::AllRoutes()) {
      ExpectSane(route, body, "type mutation " + std::to_string(i) + ": " + body.substr(0, 200));
      if (HasFatalFailure()) return;
    }
  }
}

// Handle is called from many server threads at once (each with its own per-thread arena): the
// answers must be the same as on one thread.
TEST(Robustness, ConcurrentCallsAgree) {
  const std::vector<std::string> seeds = Seeds();
  CallOptions opts;
  admission::Context ctx{opts.policy, true, opts.now};
  std::vector<std::string> expected;
  for (const auto& body : seeds) {
    for (Route route : admission::AllRoutes()) {
      expected.push_back(admission::Handle(route, body, ctx).body);
    }
  }
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 50; ++round) {
        size_t k = 0;
        for (const auto& body : seeds) {
          for (Route route : admission::AllRoutes()) {
            if (admission::Handle(route, body, ctx).body != expected[k++]) ++mismatches;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace aw::testing
