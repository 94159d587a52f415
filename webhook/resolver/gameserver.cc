#include "resolver/gameserver.h"

#include "admission/keys.h"
#include "util/time_format.h"

namespace aw::resolver {
namespace {

const rapidjson::Value* Member(const rapidjson::Value& v, const char* name) {
  if (!v.IsObject()) return nullptr;
  auto it = v.FindMember(name);
  return it == v.MemberEnd() ? nullptr : &it->value;
}

std::string StringAt(const rapidjson::Value* obj, const char* name) {
  if (obj == nullptr) return {};
  const rapidjson::Value* v = Member(*obj, name);
  if (v == nullptr || !v->IsString()) return {};
  return std::string(v->GetString(), v->GetStringLength());
}

}  // namespace

const std::string* GameServerView::Annotation(std::string_view key) const {
  auto it = annotations.find(key);
  return it == annotations.end() ? nullptr : &it->second;
}

GameServerView ParseGameServer(const rapidjson::Value& gs) {
  GameServerView view;
  const rapidjson::Value* meta = Member(gs, "metadata");
  view.namespace_ = StringAt(meta, "namespace");
  view.name = StringAt(meta, "name");
  view.uid = StringAt(meta, "uid");
  view.resource_version = StringAt(meta, "resourceVersion");
  if (meta != nullptr) {
    const rapidjson::Value* del = Member(*meta, "deletionTimestamp");
    view.deleting = del != nullptr && !del->IsNull();
    if (const rapidjson::Value* labels = Member(*meta, "labels"); labels && labels->IsObject()) {
      const rapidjson::Value* enabled = Member(*labels, std::string(keys::kEnabledLabel).c_str());
      view.opted_in = enabled && enabled->IsString() && std::string_view(enabled->GetString()) == "true";
    }
    if (const rapidjson::Value* ann = Member(*meta, "annotations"); ann && ann->IsObject()) {
      view.has_annotations = true;
      for (auto it = ann->MemberBegin(); it != ann->MemberEnd(); ++it) {
        if (!it->name.IsString() || !it->value.IsString()) continue;
        view.annotations.emplace(std::string(it->name.GetString(), it->name.GetStringLength()),
                                 std::string(it->value.GetString(), it->value.GetStringLength()));
      }
    }
  }
  const rapidjson::Value* status = Member(gs, "status");
  view.state = StringAt(status, "state");
  view.address = StringAt(status, "address");
  if (status != nullptr) {
    if (const rapidjson::Value* ports = Member(*status, "ports"); ports && ports->IsArray()) {
      for (const auto& p : ports->GetArray()) {
        PortView pv;
        pv.name = StringAt(&p, "name");
        const rapidjson::Value* num = Member(p, "port");
        if (num != nullptr && num->IsInt()) pv.port = num->GetInt();
        view.ports.push_back(std::move(pv));
      }
    }
  }
  if (const std::string* a = view.Annotation(keys::kAllocation)) view.allocation = *a;
  if (const std::string* s = view.Annotation(keys::kSince)) {
    if (auto t = util::ParseRfc3339(*s)) {
      view.since = std::chrono::time_point_cast<Clock::duration>(*t);
    }
  }
  return view;
}

}  // namespace aw::resolver
