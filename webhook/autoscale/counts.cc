#include "autoscale/counts.h"

namespace aw::autoscale {
namespace {

const rapidjson::Value* Object(const rapidjson::Value& v, const char* name) {
  if (!v.IsObject()) return nullptr;
  auto it = v.FindMember(name);
  if (it == v.MemberEnd() || !it->value.IsObject()) return nullptr;
  return &it->value;
}

}  // namespace

GameServerFacts FactsOf(const rapidjson::Value& gs) {
  GameServerFacts f;
  if (const rapidjson::Value* meta = Object(gs, "metadata")) {
    if (const rapidjson::Value* labels = Object(*meta, "labels")) {
      auto it = labels->FindMember(rapidjson::Value(
          kFleetLabel.data(), static_cast<rapidjson::SizeType>(kFleetLabel.size())));
      if (it != labels->MemberEnd() && it->value.IsString()) {
        f.fleet.assign(it->value.GetString(), it->value.GetStringLength());
      }
    }
  }
  if (const rapidjson::Value* status = Object(gs, "status")) {
    auto it = status->FindMember("state");
    f.allocating =
        it != status->MemberEnd() && it->value.IsString() &&
        std::string_view(it->value.GetString(), it->value.GetStringLength()) == "Allocating";
  }
  return f;
}

}  // namespace aw::autoscale
