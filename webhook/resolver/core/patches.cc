#include "resolver/core/patches.h"

#include <utility>
#include <vector>

#include "contract/keys.h"
#include "policy/json_patch.h"

namespace aw::resolver {
namespace {

std::string AnnotationPath(std::string_view key) {
  return "/metadata/annotations/" + policy::EscapePointerToken(key);
}

// `state` empty: status.state is not written. `removes`: annotations removed when present.
std::string Build(const GameServerView& gs, std::string_view state,
                  std::vector<std::pair<std::string, std::string>> sets,
                  const std::vector<std::string_view>& removes = {}) {
  policy::JsonPatch patch;
  patch.Test("/metadata/resourceVersion", gs.resource_version);
  if (!gs.allocation.empty()) patch.Test(AnnotationPath(keys::kAllocation), gs.allocation);
  if (!state.empty()) patch.ReplaceString("/status/state", std::string(state));
  for (std::string_view k : removes) {
    if (gs.Annotation(k)) patch.Remove(AnnotationPath(k));
  }
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

std::string TimeoutPatch(const GameServerView& gs, policy::OnTimeout action) {
  std::vector<std::pair<std::string, std::string>> sets;
  if (action == policy::OnTimeout::kAllocated) {
    sets.emplace_back(std::string(keys::kConfirmed), gs.allocation);
  }
  sets.emplace_back(std::string(keys::kOutcome), std::string(keys::kOutcomeTimedOut));
  return Build(gs, policy::OnTimeoutName(action), std::move(sets));
}

std::string RecordBypassPatch(const GameServerView& gs, const std::string& allocation,
                              const std::string& since) {
  return Build(gs, "",
               {{std::string(keys::kSince), since},
                {std::string(keys::kAllocation), allocation},
                {std::string(keys::kBypassed), allocation}},
               {keys::kConfirmed, keys::kOutcome});
}

std::string ConfirmBypassPatch(const GameServerView& gs) {
  return Build(gs, "",
               {{std::string(keys::kConfirmed), gs.allocation},
                {std::string(keys::kOutcome), std::string(keys::kOutcomeConfirmed)}});
}

std::string BypassDeadlinePatch(const GameServerView& gs, const policy::BypassTimeoutRule& rule) {
  std::vector<std::pair<std::string, std::string>> sets;
  if (rule.confirm) sets.emplace_back(std::string(keys::kConfirmed), gs.allocation);
  sets.emplace_back(std::string(keys::kOutcome), std::string(rule.outcome));
  return Build(gs, "", std::move(sets));
}

std::string ReleasePatch(const GameServerView& gs, policy::OnUndelivered action) {
  // The resourceVersion test already refuses a patch on an object that gained `delivered`.
  return Build(gs, policy::OnUndeliveredName(action),
               {{std::string(keys::kOutcome), std::string(keys::kOutcomeUndelivered)}});
}

}  // namespace aw::resolver
