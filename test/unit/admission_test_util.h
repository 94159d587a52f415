// Helpers for the admission unit tests: fixtures, object builders, calling Handle() and decoding
// its answer, and a small in-test RFC 6902 applier (a test helper only; the `patches` suite checks
// every produced patch again with python3-jsonpatch, see apply_patches.py).
//
// When the environment variable AW_PATCH_CASES_OUT names a file, every call that produces a
// patch appends one JSON line {name, route, review, object, patch, expected, trusted_users,
// crd_accepts_allocating} to it.
#pragma once

#include <rapidjson/document.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admission/handler.h"
#include "policy/policy.h"

namespace aw::testing {

inline constexpr std::string_view kResolver =
    "system:serviceaccount:allocating-system:allocating-webhook";
inline constexpr std::string_view kAllocator =
    "system:serviceaccount:agones-system:agones-allocator";
inline constexpr std::string_view kController =
    "system:serviceaccount:agones-system:agones-controller";
inline constexpr std::string_view kSdk = "system:serviceaccount:default:agones-sdk";
inline constexpr std::string_view kStranger = "alice@example.com";
inline constexpr std::string_view kV1 = "admission.k8s.io/v1";
inline constexpr std::string_view kV1beta1 = "admission.k8s.io/v1beta1";

// 2026-12-02T14:30:00.123456789Z
std::chrono::system_clock::time_point TestNow();
policy::Policy TestPolicy();  // trusted: kResolver

std::string ReadFile(const std::string& path);
std::string ReadFixture(std::string_view rel);  // relative to test/fixtures/
std::string ToJson(const rapidjson::Value& v);

// A GameServer (or any object) built from a fixture and edited.
class Obj {
 public:
  explicit Obj(std::string_view fixture_name);  // objects/<name>.json
  static Obj FromJson(std::string_view json);
  Obj(const Obj& other);
  Obj& operator=(const Obj& other);
  Obj& State(std::string_view s);
  Obj& NoStatus();
  Obj& Ann(std::string_view k, std::string_view v);
  Obj& NoAnn(std::string_view k);
  Obj& NoAnnotations();  // removes metadata.annotations
  Obj& Label(std::string_view k, std::string_view v);
  Obj& NoLabel(std::string_view k);
  // Sets a member at a JSON pointer to raw JSON (for wrong-type tests).
  Obj& SetRaw(std::string_view pointer, std::string_view raw_json);
  std::string Json() const { return ToJson(doc_); }
  std::optional<std::string> GetAnn(std::string_view k) const;
  std::string GetState() const;
  rapidjson::Document& doc() { return doc_; }

 private:
  Obj() = default;
  rapidjson::Document doc_;
};

// An AdmissionReview request body. `object`/`old` may be nullopt (-> JSON null).
std::string Review(std::string_view api, std::string_view op, std::string_view user,
                   const std::optional<std::string>& object, const std::optional<std::string>& old,
                   std::string_view kind = "GameServer", std::string_view uid = "uid-1");

struct Response {
  admission::HandlerResult raw;
  bool parsed = false;  // body was an AdmissionReview
  std::string api_version;
  std::string uid;
  bool allowed = false;
  int code = 0;
  std::string status_reason;
  std::string message;
  std::string patch_type;
  std::string patch;  // decoded JSON text ("" when none)
  std::vector<std::string> warnings;
};

struct CallOptions {
  policy::Policy policy = TestPolicy();
  bool crd = true;
  std::chrono::system_clock::time_point now = TestNow();
};

Response Call(admission::Route route, const std::string& body, const CallOptions& opts = {});

// Applies RFC 6902 add/replace/remove/test ops (object members only) to `target`.
bool ApplyPatch(rapidjson::Document* target, std::string_view patch_json, std::string* error);

// Calls /mutate/gameservers; if it patches, applies the patch to `object`, re-runs the decision
// with the patched object (same oldObject, a later clock) and returns the patched object.
// Fails the current test if the patch does not apply or the re-run patches again.
Obj MutateAndApply(const std::string& api, std::string_view op, std::string_view user,
                   const Obj& object, const Obj& old, const CallOptions& opts = {},
                   Response* first = nullptr);

}  // namespace aw::testing
