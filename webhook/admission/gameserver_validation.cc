// /validate/gameservers: configuration annotations, owned-annotation protection (the rules of
// policy::OwnedRules(), docs/design.md "Decision tables"), the readiness annotation's writer.
#include <fmt/format.h>

#include <chrono>

#include "admission/decisions.h"
#include "admission/identity.h"
#include "contract/keys.h"
#include "policy/config.h"
#include "policy/decision_table.h"
#include "util/text.h"
#include "util/time_format.h"

namespace aw::admission {
namespace {

using policy::GameServerView;

// How far a `since` written by an untrusted request (i.e. by the mutating webhook's rewrite on
// its behalf) may be from this replica's clock: covers the mutate->validate delay and clock skew.
constexpr auto kSinceTolerance = std::chrono::minutes(2);

bool ConfigChanged(const GameServerView& o, const GameServerView& n, std::string_view key) {
  return o.Annotation(key) != n.Annotation(key);
}

std::string Quoted(std::optional<std::string_view> v) {
  return v ? fmt::format("\"{}\"", util::Clip(*v, 100)) : std::string("absent");
}

// Checks one owned annotation change by an untrusted identity against what the mutating
// webhook's rewrite produces (policy::DecideOwned); returns an error message or "" when the change
// is allowed.
std::string CheckOwnedChange(std::string_view key, const GameServerView& o, const GameServerView& n,
                             std::string_view user, const Context& ctx) {
  auto ov = o.Annotation(key);
  auto nv = n.Annotation(key);
  policy::OwnedInput in;
  in.key = policy::OwnedKeyOf(key);
  in.change = nv ? policy::OwnedChange::kSet : policy::OwnedChange::kRemove;
  in.old_phase = policy::PhaseOf(o.state);
  in.new_phase = policy::PhaseOf(n.state);
  in.writer = ctx.policy.IsAgonesController(std::string(user)) ? policy::Writer::kAgonesController
                                                               : policy::Writer::kOther;
  in.was_absent = !ov;
  const policy::OwnedRule& rule = policy::DecideOwned(in);
  if (rule.verdict == policy::OwnedVerdict::kAllow) return "";
  if (rule.verdict == policy::OwnedVerdict::kDeny) {
    if (!nv) return fmt::format("{} may not be removed while the GameServer is {}", key, n.state);
    if (key == keys::kShutdownRequested) {
      return fmt::format("{} is written only by the webhook (scale-down protection)", key);
    }
    if (key == keys::kConfirmed || key == keys::kOutcome || key == keys::kBypassed) {
      return fmt::format("{} is written only by the resolver (a trusted identity)", key);
    }
    return fmt::format("{} is written only by the webhook when the GameServer enters Allocating",
                       key);
  }
  // kCheckValue: outcome, since and allocation as the gate writes them.
  if (key == keys::kOutcome) {
    if (*nv != keys::kOutcomeScaledDown) {
      return fmt::format(
          "{}: \"{}\" is written only by the resolver; the webhook writes only "
          "\"{}\" on a scale-down",
          key, util::Clip(*nv, 100), keys::kOutcomeScaledDown);
    }
    return "";
  }
  if (key == keys::kSince) {
    auto t = util::ParseRfc3339(*nv);
    if (!t) return fmt::format("{}: \"{}\" is not an RFC 3339 time", key, util::Clip(*nv, 100));
    auto now = std::chrono::time_point_cast<std::chrono::nanoseconds>(ctx.now);
    if (*t < now - kSinceTolerance || *t > now + kSinceTolerance) {
      return fmt::format("{}: \"{}\" is not the current time; it is written by the webhook", key,
                         *nv);
    }
    return "";
  }
  // allocation: agones.dev/last-allocated set by this update, else since.
  auto fresh = policy::FreshLastAllocated(o, n);
  auto expected = fresh ? fresh : n.Annotation(keys::kSince);
  if (!expected || *expected != *nv) {
    return fmt::format("{}: \"{}\" must equal {} ({})", key, util::Clip(*nv, 100),
                       fresh ? keys::kLastAllocated : keys::kSince, Quoted(expected));
  }
  return "";
}

// SdkIdentityOf and IsSdkWriter (identity.h) over the decision's input.
std::string SdkIdentityOf(const ValidateInput& req, const policy::Policy& policy) {
  const std::string_view ns =
      req.object.namespace_.empty() ? req.namespace_ : std::string_view(req.object.namespace_);
  return policy.SdkIdentity(ns, req.object_json != nullptr
                                    ? PodServiceAccount(req.object_json, "request.object")
                                    : req.service_account);
}

bool IsSdkWriter(const ValidateInput& req, const policy::Policy& policy) {
  const std::string_view ns =
      req.object.namespace_.empty() ? req.namespace_ : std::string_view(req.object.namespace_);
  return !req.username.empty() && !ns.empty() && req.username == SdkIdentityOf(req, policy);
}

}  // namespace

std::optional<std::string> ProbePortMismatch(
    const policy::GateConfig& cfg, const std::optional<std::vector<std::string_view>>& port_names) {
  if (!cfg.probe_port || cfg.probe_port->IsNumber() || !port_names) return std::nullopt;
  std::string known;
  for (std::string_view n : *port_names) {
    if (n == cfg.probe_port->name) return std::nullopt;
    known += (known.empty() ? "" : ", ") + util::Clip(n, 63);
  }
  return fmt::format("{}: \"{}\" names no port of the GameServer (spec.ports: {})",
                     keys::kProbePort, util::Clip(cfg.probe_port->name, 100),
                     known.empty() ? "none" : known);
}

Decision NotValidated(std::string_view operation) {
  return Decision::Allow(fmt::format("operation {} is not validated", operation));
}

std::optional<Decision> SkipUnlessCreateOrUpdate(const ReviewRequest& req) {
  const bool create = req.operation == "CREATE";
  const bool update = req.operation == "UPDATE";
  if (!create && !update) {
    return NotValidated(req.operation);
  }
  if (!req.object) throw BadRequest("request.object is missing");
  if (update && !req.old_object) throw BadRequest("request.oldObject is missing (UPDATE)");
  return std::nullopt;
}

Decision ValidateGameServer(const ReviewRequest& req, const Context& ctx) {
  if (std::optional<Decision> skip = SkipUnlessCreateOrUpdate(req)) return *skip;
  const bool update = req.operation == "UPDATE";
  GameServerView n = policy::ParseGameServer(req.object, "request.object", policy::Parse::kStrict);
  GameServerView o =
      update ? policy::ParseGameServer(req.old_object, "request.oldObject", policy::Parse::kStrict)
             : GameServerView{};
  return ValidateGameServer(
      ValidateInput{req.operation, req.username, req.namespace_, req.name, n, o, req.object}, ctx);
}

Decision ValidateGameServer(const ValidateInput& req, const Context& ctx) {
  const bool update = req.operation == "UPDATE";
  const bool create = !update;
  const GameServerView& n = req.object;
  const GameServerView& o = req.old_object;

  Decision d = Decision::Allow("valid");
  auto label = n.Label(keys::kEnabledLabel);
  if (label && *label != "true") {
    d.warnings.push_back(fmt::format("{}: \"{}\" does not opt in; only \"true\" does",
                                     keys::kEnabledLabel, util::Clip(*label, 60)));
  }
  if (!n.OptedIn() && !o.OptedIn()) {
    d.reason = "not opted in";
    return d;
  }
  // Named only in a denial: built when one is written.
  const auto name = [&] { return policy::ObjectName(n, req.namespace_, req.name); };
  const std::string_view user = req.username;
  const bool trusted = WriterOf(user, ctx.policy) == policy::Writer::kTrusted;

  // Configuration annotations. On UPDATE only changed keys are enforced, so that a value made
  // invalid by a later policy change never blocks Agones' own updates of the server.
  if (n.OptedIn()) {
    policy::GateConfigResult cfg = policy::ParseGateConfig(n.annotations, ctx.policy);
    const bool newly_opted = update && !o.OptedIn();
    std::vector<std::string> errors;
    for (size_t i = 0; i < cfg.errors.size(); ++i) {
      if (create || newly_opted || ConfigChanged(o, n, cfg.error_keys[i])) {
        errors.push_back(cfg.errors[i]);
      } else {
        d.warnings.push_back(cfg.errors[i]);
      }
    }
    if (auto mismatch = ProbePortMismatch(
            cfg.config,
            req.object_json != nullptr
                ? policy::PortNames(OptObject(*req.object_json, "spec", "request.object"),
                                    "request.object.spec")
                : req.port_names)) {
      if (create || newly_opted || ConfigChanged(o, n, keys::kProbePort)) {
        errors.push_back(*mismatch);
      } else {
        d.warnings.push_back(*mismatch);
      }
    }
    if (cfg.config.CanNeverConfirm()) {
      bool changed = create || newly_opted || ConfigChanged(o, n, keys::kRequireAnnotation) ||
                     ConfigChanged(o, n, keys::kProbePort);
      if (changed) {
        errors.push_back(policy::CanNeverConfirmMessage());
      } else {
        d.warnings.push_back(policy::CanNeverConfirmMessage());
      }
    }
    for (auto& w : cfg.warnings) d.warnings.push_back(std::move(w));
    if (!errors.empty()) {
      std::string msg = fmt::format("GameServer {}: ", name());
      for (size_t i = 0; i < errors.size(); ++i) msg += (i ? "; " : "") + errors[i];
      Decision deny = Decision::Deny(422, "Invalid", msg);
      deny.warnings = std::move(d.warnings);
      return deny;
    }
  }

  // Project-owned annotations.
  if (!trusted) {
    for (std::string_view key : keys::kOwnedAnnotations) {
      std::string err;
      if (create) {
        if (n.Annotation(key)) {
          err = fmt::format("{} is written only by the webhook and the resolver; remove it", key);
        }
      } else if (o.Annotation(key) != n.Annotation(key)) {
        err = CheckOwnedChange(key, o, n, user, ctx);
      }
      if (!err.empty()) {
        return Decision::Deny(
            403, "Forbidden",
            fmt::format("GameServer {}: {} (user \"{}\" is not trusted)", name(), err, user));
      }
    }
  }

  // The readiness annotation: only the GameServer's own SDK (or a trusted identity) says that the
  // game server is ready; any other writer could otherwise promote a server that is not.
  if (!trusted) {
    auto rn = n.Annotation(keys::kSdkReady);
    auto ro = o.Annotation(keys::kSdkReady);
    if (rn && (create || rn != ro) && !IsSdkWriter(req, ctx.policy)) {
      return Decision::Deny(
          403, "Forbidden",
          fmt::format("GameServer {}: {} is written only by the game server's SDK ({}) or a "
                      "trusted identity; user \"{}\" may not {} it",
                      name(), keys::kSdkReady, SdkIdentityOf(req, ctx.policy),
                      util::Clip(user, 200), create || !ro ? "set" : "change"));
    }
  }

  // The opt-in label may not be dropped while the server is held in Allocating: the resolver only
  // watches opted-in servers, so it would stay Allocating forever.
  if (update && !trusted && o.OptedIn() && !n.OptedIn() && o.state == keys::kStateAllocating &&
      n.state == keys::kStateAllocating) {
    return Decision::Deny(
        403, "Forbidden",
        fmt::format("GameServer {} is Allocating: the label {} may not be removed or changed until "
                    "it leaves Allocating (the resolver would no longer see it)",
                    name(), keys::kEnabledLabel));
  }

  // Scale-down protection lives in the mutating webhook (it keeps the state Allocating and lets
  // the Agones controller's update succeed): a denial here would abort the GameServerSet
  // controller's pass and freeze Fleet status.
  return d;
}

}  // namespace aw::admission
