// /validate/fleets, /validate/gameserversets (spec.template.metadata) and
// /validate/gameserverallocations (spec.metadata): configuration that GameServers will inherit.
#include <fmt/format.h>

#include "admission/decisions.h"
#include "contract/keys.h"
#include "policy/config.h"
#include "util/text.h"

namespace aw::admission {
namespace {

using policy::ObjectMeta;
using policy::StringMap;

// spec.template.metadata of a Fleet or GameServerSet (empty view when absent).
ObjectMeta ReadTemplateMeta(const Json* obj, const std::string& path) {
  if (!obj) return {};
  if (!obj->IsObject()) {
    throw BadRequest(fmt::format("{} is {}, expected an object", path, JsonTypeName(*obj)));
  }
  const Json* spec = OptObject(*obj, "spec", path);
  if (!spec) return {};
  const Json* tmpl = OptObject(*spec, "template", path + ".spec");
  if (!tmpl) return {};
  return policy::ReadMeta(OptObject(*tmpl, "metadata", path + ".spec.template"),
                          path + ".spec.template.metadata");
}

}  // namespace

Decision ValidateTemplateOwner(const ReviewRequest& req, const Context& ctx) {
  if (std::optional<Decision> skip = SkipUnlessCreateOrUpdate(req)) return *skip;
  const bool update = req.operation == "UPDATE";
  const bool create = !update;
  if (!req.object->IsObject()) {
    throw BadRequest(
        fmt::format("request.object is {}, expected an object", JsonTypeName(*req.object)));
  }
  ObjectMeta meta = policy::ReadMeta(OptObject(*req.object, "metadata", "request.object"),
                                     "request.object.metadata");
  ObjectMeta t = ReadTemplateMeta(req.object, "request.object");
  ObjectMeta ot = update ? ReadTemplateMeta(req.old_object, "request.oldObject") : ObjectMeta{};
  const std::string kind = req.kind.empty() ? "object" : std::string(req.kind);
  const std::string name = policy::ObjectName(meta, req.namespace_, req.name);

  Decision d = Decision::Allow("valid");
  auto label = t.labels.Get(keys::kEnabledLabel);
  if (label && *label != "true") {
    d.warnings.push_back(
        fmt::format("template label {}: \"{}\" does not opt in; only \"true\" does",
                    keys::kEnabledLabel, util::Clip(*label, 60)));
  }
  if (!t.OptedIn()) {
    d.reason = "template not opted in";
    return d;
  }
  auto changed = [&](std::string_view key) {
    return create || !ot.OptedIn() || ot.annotations.Get(key) != t.annotations.Get(key);
  };
  std::vector<std::string> errors;
  policy::GateConfigResult cfg = policy::ParseGateConfig(t.annotations, ctx.policy);
  for (size_t i = 0; i < cfg.errors.size(); ++i) {
    if (changed(cfg.error_keys[i])) {
      errors.push_back(cfg.errors[i]);
    } else {
      d.warnings.push_back(cfg.errors[i]);
    }
  }
  const Json* tspec = nullptr;
  if (const Json* spec = OptObject(*req.object, "spec", "request.object")) {
    if (const Json* tmpl = OptObject(*spec, "template", "request.object.spec")) {
      tspec = OptObject(*tmpl, "spec", "request.object.spec.template");
    }
  }
  if (auto mismatch = ProbePortMismatch(
          cfg.config, policy::PortNames(tspec, "request.object.spec.template.spec"))) {
    if (changed(keys::kProbePort)) {
      errors.push_back(*mismatch);
    } else {
      d.warnings.push_back(*mismatch);
    }
  }
  if (cfg.config.CanNeverConfirm()) {
    if (changed(keys::kRequireAnnotation) || changed(keys::kProbePort)) {
      errors.push_back(policy::CanNeverConfirmMessage());
    } else {
      d.warnings.push_back(policy::CanNeverConfirmMessage());
    }
  }
  for (std::string_view key : keys::kOwnedAnnotations) {
    if (t.annotations.Get(key) && changed(key)) {
      errors.push_back(
          fmt::format("{} is written only by the webhook and the resolver; remove it from the "
                      "template",
                      key));
    }
  }
  if (t.annotations.Get(keys::kSdkReady) && changed(keys::kSdkReady)) {
    errors.push_back(fmt::format(
        "{} is written only by each game server through the Agones SDK (SetAnnotation(\"{}\", "
        "<allocation id>)); remove it from the template",
        keys::kSdkReady, keys::kSdkReady.substr(std::string_view("agones.dev/sdk-").size())));
  }
  for (auto& w : cfg.warnings) d.warnings.push_back(std::move(w));
  if (!errors.empty()) {
    std::string msg = fmt::format("{} {}: spec.template.metadata.annotations: ", kind, name);
    for (size_t i = 0; i < errors.size(); ++i) msg += (i ? "; " : "") + errors[i];
    Decision deny = Decision::Deny(422, "Invalid", msg);
    deny.warnings = std::move(d.warnings);
    return deny;
  }
  return d;
}

Decision ValidateGameServerAllocation(const ReviewRequest& req, const Context& ctx) {
  if (req.operation != "CREATE") {
    return NotValidated(req.operation);
  }
  if (!req.object) throw BadRequest("request.object is missing");
  if (!req.object->IsObject()) {
    throw BadRequest(
        fmt::format("request.object is {}, expected an object", JsonTypeName(*req.object)));
  }
  ObjectMeta meta = policy::ReadMeta(OptObject(*req.object, "metadata", "request.object"),
                                     "request.object.metadata");
  const std::string name = policy::ObjectName(meta, req.namespace_, req.name);
  const Json* spec = OptObject(*req.object, "spec", "request.object");
  if (!spec) return Decision::Allow("no spec");
  std::vector<std::string> errors;
  // spec.metadata (allocation.agones.dev/v1), and metaPatch, the deprecated name of the same
  // field in the agones-allocator service's requests, in case a proxy forwards that form.
  for (std::string_view field : {"metadata", "metaPatch"}) {
    std::string path = "spec." + std::string(field);
    const Json* mp = OptObject(*spec, field, "request.object.spec");
    if (!mp) continue;
    ObjectMeta m;
    m.labels = StringMap(Member(*mp, "labels"), "request.object." + path + ".labels");
    m.annotations =
        StringMap(Member(*mp, "annotations"), "request.object." + path + ".annotations");
    std::vector<std::string_view> forbidden(keys::kOwnedAnnotations.begin(),
                                            keys::kOwnedAnnotations.end());
    forbidden.push_back(keys::kSdkReady);
    for (std::string_view key : forbidden) {
      if (m.annotations.Get(key)) {
        errors.push_back(
            fmt::format("{}.annotations[\"{}\"] may not be set by an allocation: it "
                        "is written only by the webhook, the resolver or the game "
                        "server",
                        path, key));
      }
    }
    if (m.labels.Get(keys::kEnabledLabel)) {
      errors.push_back(fmt::format(
          "{}.labels[\"{}\"] may not be set by an allocation: it would switch the gate on or off "
          "for the allocated server",
          path, keys::kEnabledLabel));
    }
    // Configuration annotations are merged into the GameServer: they must parse.
    policy::GateConfigResult cfg = policy::ParseGateConfig(m.annotations, ctx.policy);
    for (const auto& e : cfg.errors) errors.push_back(path + ".annotations: " + e);
  }
  if (!errors.empty()) {
    std::string msg = fmt::format("GameServerAllocation {}: ", name);
    for (size_t i = 0; i < errors.size(); ++i) msg += (i ? "; " : "") + errors[i];
    return Decision::Deny(403, "Forbidden", msg);
  }
  return Decision::Allow("valid");
}

}  // namespace aw::admission
