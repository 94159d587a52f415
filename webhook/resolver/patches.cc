#include "resolver/patches.h"

#include <utility>
#include <vector>

#include "gate/json_patch.h"
#include "gate/keys.h"

namespace aw::resolver {
namespace {

std::string AnnotationPath(std::string_view key) {
  return "/metadata/annotations/" + gate::EscapePointerToken(key);
}

std::string Build(const GameServerView& gs, std::string_view state,
                  std::vector<std::pair<std::string, std::string>> sets) {
  gate::JsonPatch patch;
  patch.Test("/metadata/resourceVersion", gs.resource_version);
  if (!gs.allocation.empty()) patch.Test(AnnotationPath(keys::kAllocation), gs.allocation);
  patch.ReplaceString("/status/state", std::string(state));
  if (!gs.annotations.present()) {
    patch.AddMap("/metadata/annotations", std::move(sets));
  } else {
    // "add" on an existing member replaces it (RFC 6902 4.1).
    for (auto& [k, v] : sets) patch.AddString(AnnotationPath(k), std::move(v));
  }
  return patch.ToJson();
}

}  // namespace

std::string PromotePatch(const GameServerView& gs) {
  return Build(gs, keys::kStateAllocated,
               {{std::string(keys::kConfirmed), gs.allocation},
                {std::string(keys::kOutcome), std::string(keys::kOutcomeConfirmed)}});
}

std::string TimeoutPatch(const GameServerView& gs, gate::OnTimeout action) {
  std::vector<std::pair<std::string, std::string>> sets;
  if (action == gate::OnTimeout::kAllocated) {
    sets.emplace_back(std::string(keys::kConfirmed), gs.allocation);
  }
  sets.emplace_back(std::string(keys::kOutcome), std::string(keys::kOutcomeTimedOut));
  return Build(gs, gate::OnTimeoutName(action), std::move(sets));
}

}  // namespace aw::resolver
