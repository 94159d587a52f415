#include "admission_test_util.h"

#include <gtest/gtest.h>
#include <rapidjson/pointer.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>

#include "util/base64.h"

namespace aw::testing {

using rapidjson::Document;
using rapidjson::Value;

std::chrono::system_clock::time_point TestNow() {
  using namespace std::chrono;
  // 2026-12-02T14:30:00.123456789Z
  sys_days d = year{2026} / December / 2;
  return time_point_cast<system_clock::duration>(d + hours{14} + minutes{30} +
                                                 nanoseconds{123456789});
}

policy::Policy TestPolicy() {
  policy::Policy p;
  p.trusted_users = {std::string(kResolver)};
  return p;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string ReadFixture(std::string_view rel) {
  return ReadFile(std::string(AW_SOURCE_DIR) + "/test/fixtures/" + std::string(rel));
}

std::string ToJson(const Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

namespace {

Value Str(std::string_view s, Document::AllocatorType& a) {
  return Value(s.data(), static_cast<rapidjson::SizeType>(s.size()), a);
}

Value& EnsureObject(Value& parent, std::string_view key, Document::AllocatorType& a) {
  auto it = parent.FindMember(Str(key, a));
  if (it == parent.MemberEnd()) {
    parent.AddMember(Str(key, a), Value(rapidjson::kObjectType), a);
    it = parent.FindMember(Str(key, a));
  } else if (!it->value.IsObject()) {
    it->value.SetObject();
  }
  return it->value;
}

void SetMember(Value& obj, std::string_view key, Value v, Document::AllocatorType& a) {
  auto it = obj.FindMember(Str(key, a));
  if (it != obj.MemberEnd()) {
    it->value = v;
  } else {
    obj.AddMember(Str(key, a), v, a);
  }
}

}  // namespace

Obj::Obj(std::string_view fixture_name) {
  std::string text = ReadFixture("objects/" + std::string(fixture_name) + ".json");
  doc_.Parse(text.c_str(), text.size());
  if (doc_.HasParseError()) throw std::runtime_error("bad fixture " + std::string(fixture_name));
}

Obj Obj::FromJson(std::string_view json) {
  Obj o;
  o.doc_.Parse(json.data(), json.size());
  if (o.doc_.HasParseError()) throw std::runtime_error("bad json");
  return o;
}

Obj::Obj(const Obj& other) { doc_.CopyFrom(other.doc_, doc_.GetAllocator()); }
Obj& Obj::operator=(const Obj& other) {
  if (this != &other) doc_.CopyFrom(other.doc_, doc_.GetAllocator());
  return *this;
}

Obj& Obj::State(std::string_view s) {
  auto& a = doc_.GetAllocator();
  SetMember(EnsureObject(doc_, "status", a), "state", Str(s, a), a);
  return *this;
}

Obj& Obj::NoStatus() {
  doc_.RemoveMember("status");
  return *this;
}

Obj& Obj::Ann(std::string_view k, std::string_view v) {
  auto& a = doc_.GetAllocator();
  Value& meta = EnsureObject(doc_, "metadata", a);
  SetMember(EnsureObject(meta, "annotations", a), k, Str(v, a), a);
  return *this;
}

Obj& Obj::NoAnn(std::string_view k) {
  auto& a = doc_.GetAllocator();
  Value& meta = EnsureObject(doc_, "metadata", a);
  auto it = meta.FindMember("annotations");
  if (it != meta.MemberEnd() && it->value.IsObject()) it->value.RemoveMember(Str(k, a));
  return *this;
}

Obj& Obj::NoAnnotations() {
  auto& a = doc_.GetAllocator();
  EnsureObject(doc_, "metadata", a).RemoveMember("annotations");
  return *this;
}

Obj& Obj::Label(std::string_view k, std::string_view v) {
  auto& a = doc_.GetAllocator();
  Value& meta = EnsureObject(doc_, "metadata", a);
  SetMember(EnsureObject(meta, "labels", a), k, Str(v, a), a);
  return *this;
}

Obj& Obj::NoLabel(std::string_view k) {
  auto& a = doc_.GetAllocator();
  Value& meta = EnsureObject(doc_, "metadata", a);
  auto it = meta.FindMember("labels");
  if (it != meta.MemberEnd() && it->value.IsObject()) it->value.RemoveMember(Str(k, a));
  return *this;
}

Obj& Obj::SetRaw(std::string_view pointer, std::string_view raw_json) {
  Document v(&doc_.GetAllocator());
  v.Parse(raw_json.data(), raw_json.size());
  if (v.HasParseError()) throw std::runtime_error("bad raw json");
  Value copy(v, doc_.GetAllocator());
  rapidjson::Pointer(std::string(pointer).c_str()).Set(doc_, copy);
  return *this;
}

std::optional<std::string> Obj::GetAnn(std::string_view k) const {
  auto m = doc_.FindMember("metadata");
  if (m == doc_.MemberEnd() || !m->value.IsObject()) return std::nullopt;
  auto a = m->value.FindMember("annotations");
  if (a == m->value.MemberEnd() || !a->value.IsObject()) return std::nullopt;
  auto it = a->value.FindMember(Value(rapidjson::StringRef(k.data(), k.size())));
  if (it == a->value.MemberEnd() || !it->value.IsString()) return std::nullopt;
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

std::string Obj::GetState() const {
  auto s = doc_.FindMember("status");
  if (s == doc_.MemberEnd() || !s->value.IsObject()) return "";
  auto st = s->value.FindMember("state");
  if (st == s->value.MemberEnd() || !st->value.IsString()) return "";
  return st->value.GetString();
}

std::string Review(std::string_view api, std::string_view op, std::string_view user,
                   const std::optional<std::string>& object, const std::optional<std::string>& old,
                   std::string_view kind, std::string_view uid) {
  std::string s =
      "{\"apiVersion\":\"" + std::string(api) +
      "\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"" + std::string(uid) +
      "\",\"kind\":{\"group\":\"agones.dev\",\"version\":\"v1\",\"kind\":\"" + std::string(kind) +
      "\"},\"namespace\":\"default\",\"operation\":\"" + std::string(op) +
      "\",\"userInfo\":{\"username\":\"" + std::string(user) +
      "\",\"groups\":[\"system:authenticated\"]},\"object\":" + (object ? *object : "null") +
      ",\"oldObject\":" + (old ? *old : "null") + ",\"dryRun\":false}}";
  return s;
}

namespace {

void MaybeRecordCase(admission::Route route, const std::string& body, const CallOptions& opts,
                     const std::string& patch) {
  const char* out = std::getenv("AW_PATCH_CASES_OUT");
  if (!out || !*out || patch.empty()) return;
  static std::mutex mu;
  static int counter = 0;
  std::lock_guard<std::mutex> lock(mu);
  Document review;
  review.Parse(body.c_str(), body.size());
  if (review.HasParseError() || !review.IsObject()) return;
  auto& a = review.GetAllocator();
  Value& req = review["request"];
  Document expected;
  expected.CopyFrom(req["object"], expected.GetAllocator());
  std::string err;
  bool ok = ApplyPatch(&expected, patch, &err);
  Document rec(rapidjson::kObjectType);
  auto& ra = rec.GetAllocator();
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "case";
  name += "#" + std::to_string(++counter);
  rec.AddMember("name", Str(name, ra), ra);
  rec.AddMember("route", Str(admission::RouteName(route), ra), ra);
  rec.AddMember("review", Value(review, ra), ra);
  rec.AddMember("object", Value(req["object"], ra), ra);
  Document p;
  p.Parse(patch.c_str(), patch.size());
  rec.AddMember("patch", Value(p, ra), ra);
  if (ok) {
    rec.AddMember("expected", Value(expected, ra), ra);
  } else {
    rec.AddMember("expected", Value(), ra);
  }
  Value users(rapidjson::kArrayType);
  for (const auto& u : opts.policy.trusted_users) users.PushBack(Str(u, ra), ra);
  rec.AddMember("trusted_users", users, ra);
  rec.AddMember("crd_accepts_allocating", opts.crd, ra);
  (void)a;
  std::ofstream f(out, std::ios::app);
  f << ToJson(rec) << "\n";
}

}  // namespace

Response Call(admission::Route route, const std::string& body, const CallOptions& opts) {
  admission::Context ctx{opts.policy, opts.crd, opts.now};
  Response r;
  r.raw = admission::Handle(route, body, ctx);
  if (r.raw.http_status != 200) return r;
  Document d;
  d.Parse(r.raw.body.c_str(), r.raw.body.size());
  if (d.HasParseError() || !d.IsObject()) {
    ADD_FAILURE() << "response is not JSON: " << r.raw.body;
    return r;
  }
  r.parsed = true;
  EXPECT_EQ(std::string(d["kind"].GetString()), "AdmissionReview");
  r.api_version = d["apiVersion"].GetString();
  const Value& resp = d["response"];
  r.uid = resp["uid"].GetString();
  r.allowed = resp["allowed"].GetBool();
  if (resp.HasMember("status")) {
    const Value& st = resp["status"];
    r.code = st["code"].GetInt();
    r.status_reason = st["reason"].GetString();
    r.message = st["message"].GetString();
  }
  if (resp.HasMember("patch")) {
    r.patch_type = resp["patchType"].GetString();
    auto decoded = util::Base64Decode(resp["patch"].GetString());
    EXPECT_TRUE(decoded.has_value());
    r.patch = decoded.value_or("");
  }
  if (resp.HasMember("warnings")) {
    for (const auto& w : resp["warnings"].GetArray()) r.warnings.emplace_back(w.GetString());
  }
  if (route == admission::Route::kMutateGameServers) MaybeRecordCase(route, body, opts, r.patch);
  return r;
}

bool ApplyPatch(Document* target, std::string_view patch_json, std::string* error) {
  Document patch;
  patch.Parse(patch_json.data(), patch_json.size());
  if (patch.HasParseError() || !patch.IsArray()) {
    *error = "patch is not a JSON array";
    return false;
  }
  auto& a = target->GetAllocator();
  for (const auto& op : patch.GetArray()) {
    std::string kind = op["op"].GetString();
    std::string path = op["path"].GetString();
    size_t slash = path.rfind('/');
    if (path.empty() || path[0] != '/' || slash == std::string::npos) {
      *error = "bad path " + path;
      return false;
    }
    std::string parent_path = path.substr(0, slash);
    std::string token = path.substr(slash + 1);
    // Unescape ~1 then ~0.
    std::string key;
    for (size_t i = 0; i < token.size(); ++i) {
      if (token[i] == '~' && i + 1 < token.size() && token[i + 1] == '1') {
        key += '/';
        ++i;
      } else if (token[i] == '~' && i + 1 < token.size() && token[i + 1] == '0') {
        key += '~';
        ++i;
      } else if (token[i] == '~') {
        *error = "bad escape in " + path;
        return false;
      } else {
        key += token[i];
      }
    }
    Value* parent =
        parent_path.empty() ? target : rapidjson::Pointer(parent_path.c_str()).Get(*target);
    if (!parent || !parent->IsObject()) {
      *error = "parent of " + path + " does not exist";
      return false;
    }
    auto it = parent->FindMember(Str(key, a));
    if (kind == "remove") {
      if (it == parent->MemberEnd()) {
        *error = "remove of missing " + path;
        return false;
      }
      parent->RemoveMember(it);
    } else if (kind == "replace") {
      if (it == parent->MemberEnd()) {
        *error = "replace of missing " + path;
        return false;
      }
      it->value.CopyFrom(op["value"], a);
    } else if (kind == "add") {
      Value v(op["value"], a);
      if (it != parent->MemberEnd()) {
        it->value = v;
      } else {
        parent->AddMember(Str(key, a), v, a);
      }
    } else if (kind == "test") {
      if (it == parent->MemberEnd() || it->value != op["value"]) {
        *error = "test failed at " + path;
        return false;
      }
    } else {
      *error = "unsupported op " + kind;
      return false;
    }
  }
  return true;
}

Obj MutateAndApply(const std::string& api, std::string_view op, std::string_view user,
                   const Obj& object, const Obj& old, const CallOptions& opts, Response* first) {
  Response r = Call(admission::Route::kMutateGameServers,
                    Review(api, op, user, object.Json(), old.Json()), opts);
  if (first) *first = r;
  Obj patched = object;
  if (!r.allowed || r.patch.empty()) return patched;
  EXPECT_EQ(r.patch_type, "JSONPatch");
  std::string err;
  EXPECT_TRUE(ApplyPatch(&patched.doc(), r.patch, &err)) << err << "\npatch: " << r.patch;
  CallOptions later = opts;
  later.now += std::chrono::seconds(1);
  Response again = Call(admission::Route::kMutateGameServers,
                        Review(api, op, user, patched.Json(), old.Json()), later);
  EXPECT_TRUE(again.allowed);
  EXPECT_EQ(again.patch, "") << "reinvocation patched again";
  return patched;
}

}  // namespace aw::testing
