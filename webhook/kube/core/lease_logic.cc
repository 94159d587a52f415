#include "kube/core/lease_logic.h"

#include <fmt/format.h>

#include <ctime>

#include "util/time_format.h"

namespace aw::kube {
namespace {

const rapidjson::Value* Spec(const rapidjson::Value& lease) {
  if (!lease.IsObject()) return nullptr;
  auto it = lease.FindMember("spec");
  if (it == lease.MemberEnd() || !it->value.IsObject()) return nullptr;
  return &it->value;
}

std::string Str(const rapidjson::Value* o, const char* k) {
  if (!o) return {};
  auto it = o->FindMember(k);
  if (it == o->MemberEnd() || !it->value.IsString()) return {};
  return it->value.GetString();
}

int Int(const rapidjson::Value* o, const char* k) {
  if (!o) return 0;
  auto it = o->FindMember(k);
  if (it == o->MemberEnd() || !it->value.IsInt()) return 0;
  return it->value.GetInt();
}

}  // namespace

LeaseRecord LeaseRecordFromObject(const rapidjson::Value& lease) {
  const rapidjson::Value* s = Spec(lease);
  LeaseRecord r;
  r.holder_identity = Str(s, "holderIdentity");
  r.lease_duration_seconds = Int(s, "leaseDurationSeconds");
  r.acquire_time = Str(s, "acquireTime");
  r.renew_time = Str(s, "renewTime");
  r.lease_transitions = Int(s, "leaseTransitions");
  return r;
}

void WriteLeaseRecord(const LeaseRecord& r, rapidjson::Document* lease) {
  auto& a = lease->GetAllocator();
  if (!lease->IsObject()) lease->SetObject();
  lease->RemoveMember("spec");  // absent: nothing to remove
  rapidjson::Value spec(rapidjson::kObjectType);
  if (!r.holder_identity.empty())
    spec.AddMember("holderIdentity", rapidjson::Value(r.holder_identity.c_str(), a), a);
  spec.AddMember("leaseDurationSeconds", r.lease_duration_seconds, a);
  if (!r.acquire_time.empty())
    spec.AddMember("acquireTime", rapidjson::Value(r.acquire_time.c_str(), a), a);
  if (!r.renew_time.empty())
    spec.AddMember("renewTime", rapidjson::Value(r.renew_time.c_str(), a), a);
  spec.AddMember("leaseTransitions", r.lease_transitions, a);
  lease->AddMember("spec", spec, a);
}

std::string FormatMicroTime(std::chrono::system_clock::time_point t) {
  return util::FormatRfc3339(t, util::Rfc3339Precision::kMicros);
}

LeaseAction DecideLease(const LeaseDecisionInput& in) {
  if (!in.current) return LeaseAction::kCreate;
  const LeaseRecord& r = *in.current;
  if (r.holder_identity == in.identity && !in.identity.empty()) return LeaseAction::kRenew;
  if (r.holder_identity.empty()) return LeaseAction::kTakeOver;
  // Someone else holds it: valid until leaseDurationSeconds after we last saw it change.
  auto valid_until = in.observed_time + std::chrono::seconds(r.lease_duration_seconds);
  if (valid_until > in.now) return LeaseAction::kWait;
  return LeaseAction::kTakeOver;
}

LeaseRecord NextLeaseRecord(LeaseAction action, const std::optional<LeaseRecord>& current,
                            const std::string& identity, int lease_duration_seconds,
                            const std::string& now_micro) {
  LeaseRecord r;
  r.holder_identity = identity;
  r.lease_duration_seconds = lease_duration_seconds;
  r.renew_time = now_micro;
  r.acquire_time = now_micro;
  switch (action) {
    case LeaseAction::kCreate:
    case LeaseAction::kWait:
      r.lease_transitions = 0;
      break;
    case LeaseAction::kRenew:
      r.acquire_time =
          current && !current->acquire_time.empty() ? current->acquire_time : now_micro;
      r.lease_transitions = current ? current->lease_transitions : 0;
      break;
    case LeaseAction::kTakeOver:
      r.lease_transitions = current ? current->lease_transitions + 1 : 0;
      break;
  }
  return r;
}

LeaseRecord ReleasedLeaseRecord(const LeaseRecord& current, const std::string& now_micro) {
  LeaseRecord r;
  r.holder_identity = "";
  r.lease_duration_seconds = 1;
  r.acquire_time = now_micro;
  r.renew_time = now_micro;
  r.lease_transitions = current.lease_transitions;
  return r;
}

}  // namespace aw::kube
