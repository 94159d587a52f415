#include "resolver/core/evaluate.h"

#include "contract/keys.h"
#include "policy/decision_table.h"
#include "util/time_format.h"

namespace aw::resolver {

bool IsScaledDown(const GameServerView& gs) {
  policy::ResolveInput in;
  in.opted_in = gs.OptedIn();
  in.deleting = gs.deleting;
  in.phase = policy::PhaseOf(gs.state);
  in.scaled_down = gs.Annotation(keys::kOutcome) == keys::kOutcomeScaledDown;
  return policy::DecideResolve(in).verdict == policy::ResolveVerdict::kRecord;
}

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kIgnore:
      return "ignore";
    case Verdict::kWait:
      return "wait";
    case Verdict::kPromote:
      return "promote";
    case Verdict::kTimeOut:
      return "timeout";
    case Verdict::kScaledDown:
      return "scaled_down";
    case Verdict::kRecordBypass:
      return "record-bypass";
    case Verdict::kConfirmBypass:
      return "confirm-bypass";
    case Verdict::kBypassDeadline:
      return "bypass-deadline";
    case Verdict::kRelease:
      return "release";
  }
  return "unknown";
}

probe::Type ToProbeType(policy::ProbeType t) {
  switch (t) {
    case policy::ProbeType::kHttp:
      return probe::Type::kHttp;
    case policy::ProbeType::kTcp:
      return probe::Type::kTcp;
    case policy::ProbeType::kUdp:
      return probe::Type::kUdp;
  }
  return probe::Type::kHttp;
}

std::optional<std::string> ReadinessAnnotationProblem(const GameServerView& gs) {
  const std::string key(keys::kSdkReady);
  auto ready = gs.Annotation(keys::kSdkReady);
  if (!ready) return "readiness annotation " + key + " not set";
  if (gs.allocation.empty()) return "no allocation id yet (" + std::string(keys::kAllocation) + ")";
  if (*ready == gs.allocation) return std::nullopt;
  if (*ready == "true") {
    if (!gs.Annotation(keys::kLastAllocated)) return std::nullopt;
    return "readiness annotation " + key + " is \"true\", but the server has " +
           std::string(keys::kLastAllocated) + ": it must equal the allocation id " + gs.allocation;
  }
  return "readiness annotation " + key + " is \"" + std::string(*ready) +
         "\" (stale or wrong), expected the allocation id " + gs.allocation;
}

std::optional<probe::Target> ResolveProbeTarget(const GameServerView& gs,
                                                const policy::GateConfig& config,
                                                std::string* problem) {
  if (!config.probe_port) return std::nullopt;
  const policy::ProbePort& pp = *config.probe_port;
  int port = 0;
  if (pp.IsNumber()) {
    port = pp.number;
  } else {
    for (const PortView& p : gs.ports) {
      if (p.name == pp.name) {
        port = p.port;
        break;
      }
    }
    if (port == 0) {
      *problem = "probe port \"" + pp.name + "\" not found in status.ports";
      return std::nullopt;
    }
  }
  if (port <= 0 || port > 65535) {
    *problem = "probe port " + std::to_string(port) + " out of range";
    return std::nullopt;
  }
  if (gs.address.empty()) {
    *problem = "no status.address to probe";
    return std::nullopt;
  }
  probe::Target t;
  t.type = ToProbeType(config.probe_type);
  t.host = gs.address;
  t.port = static_cast<uint16_t>(port);
  t.path = config.probe_path.empty() ? "/" : config.probe_path;
  return t;
}

bool AwaitsDelivery(const GameServerView& gs) {
  return gs.Annotation(keys::kAnswerBy) && !gs.Annotation(keys::kDelivered) &&
         gs.Annotation(keys::kOutcome) != keys::kOutcomeUndelivered;
}

policy::Delivery DeliveryOf(const GameServerView& gs, TimePoint now, std::chrono::nanoseconds grace,
                            TimePoint* release_at) {
  if (!AwaitsDelivery(gs)) return policy::Delivery::kNone;
  auto t = util::ParseRfc3339(*gs.Annotation(keys::kAnswerBy));
  if (!t) return policy::Delivery::kOverdue;
  TimePoint due = std::chrono::time_point_cast<Clock::duration>(*t) +
                  std::chrono::duration_cast<Clock::duration>(grace);
  if (now >= due) return policy::Delivery::kOverdue;
  if (release_at) *release_at = due;
  return policy::Delivery::kPending;
}

Evaluation Evaluate(const GameServerView& gs, const policy::GateConfig& config,
                    const ProbeObservation* last_probe, TimePoint now, TimePoint first_seen,
                    std::chrono::nanoseconds undelivered_grace) {
  Evaluation ev;
  policy::ResolveInput in;
  in.opted_in = gs.OptedIn();
  in.deleting = gs.deleting;
  in.phase = policy::PhaseOf(gs.state);
  in.scaled_down = gs.Annotation(keys::kOutcome) == keys::kOutcomeScaledDown;
  in.bypass = policy::BypassOf(gs);
  ev.bypass = in.bypass;
  TimePoint release_at{};
  in.delivery = DeliveryOf(gs, now, undelivered_grace, &release_at);
  ev.delivery = in.delivery;
  if (in.delivery == policy::Delivery::kPending) ev.release_at = release_at;
  ev.release_action = config.on_undelivered;
  const policy::ResolveRule& pre = policy::DecideResolve(in);
  if (pre.verdict == policy::ResolveVerdict::kRelease) {
    ev.verdict = Verdict::kRelease;
    ev.reason = "allocated by the gateway and never delivered";
    return ev;
  }
  if (pre.verdict == policy::ResolveVerdict::kWait && in.phase == policy::Phase::kAllocated &&
      in.bypass == policy::Bypass::kNone) {
    // Allocated through the gate, waiting only for the gateway's delivery mark.
    ev.verdict = Verdict::kWait;
    ev.deadline = release_at;
    ev.reason = "waiting for the gateway's delivery";
    return ev;
  }
  if (pre.verdict == policy::ResolveVerdict::kRecord) {
    ev.verdict = Verdict::kScaledDown;
    ev.reason = "scaled down while Allocating";
    return ev;
  }
  if (pre.verdict == policy::ResolveVerdict::kIgnore) {
    ev.reason = !in.opted_in  ? "not opted in"
                : in.deleting ? "being deleted"
                              : "state is " + (gs.state.empty() ? std::string("empty") : gs.state);
    return ev;
  }
  if (pre.verdict == policy::ResolveVerdict::kRecordBypass) {
    ev.verdict = Verdict::kRecordBypass;
    auto last = gs.Annotation(keys::kLastAllocated);
    std::optional<TimePoint> at;
    if (last) {
      if (auto t = util::ParseRfc3339(*last)) {
        at = std::chrono::time_point_cast<Clock::duration>(*t);
      }
    }
    // A last-allocated in the future (a skewed or forged clock) counts from now.
    bool from_last = at && *at <= now;
    ev.bypass_since = from_last ? *at : now;
    // `since` keeps agones.dev/last-allocated's own text when it is used, so that the two compare
    // equal as strings whatever the writer's fraction digits (Agones trims trailing zeros).
    ev.bypass_since_text = from_last ? std::string(*last) : util::FormatRfc3339Nano(now);
    ev.bypass_allocation = last && !last->empty() ? std::string(*last) : ev.bypass_since_text;
    return ev;
  }
  ev.action =
      policy::TimeoutAction(config.on_timeout, gs.Annotation(keys::kShutdownRequested).has_value());
  ev.bypass_action = &policy::BypassTimeoutAction(config.on_timeout);
  TimePoint start = gs.since.value_or(first_seen);
  ev.deadline = start + std::chrono::duration_cast<Clock::duration>(config.timeout);

  if (config.require_annotation) {
    if (auto problem = ReadinessAnnotationProblem(gs)) ev.failed.push_back(*problem);
  } else if (gs.allocation.empty()) {
    ev.failed.push_back("no allocation id yet (" + std::string(keys::kAllocation) + ")");
  }
  if (config.probe_port) {
    std::string problem;
    ev.probe = ResolveProbeTarget(gs, config, &problem);
    if (!ev.probe) {
      ev.failed.push_back(problem);
    } else if (last_probe == nullptr || last_probe->allocation != gs.allocation ||
               !(last_probe->target == *ev.probe)) {
      ev.failed.push_back("probe " + probe::Describe(*ev.probe) + " has not answered yet");
    } else if (!last_probe->result.ok()) {
      ev.failed.push_back(
          "probe " + probe::Describe(*ev.probe) + ": " +
          std::string(probe::StatusName(last_probe->result.status)) +
          (last_probe->result.detail.empty() ? "" : " (" + last_probe->result.detail + ")"));
    }
  }
  if (config.CanNeverConfirm() && ev.failed.empty()) {
    ev.failed.push_back("no check configured (" + policy::CanNeverConfirmMessage() + ")");
  }
  in.ready = ev.failed.empty();
  in.past_deadline = now >= ev.deadline;
  switch (policy::DecideResolve(in).verdict) {
    case policy::ResolveVerdict::kPromote:
      ev.verdict = Verdict::kPromote;
      break;
    case policy::ResolveVerdict::kTimeOut:
      ev.verdict = Verdict::kTimeOut;
      break;
    case policy::ResolveVerdict::kWait:
      ev.verdict = Verdict::kWait;
      break;
    case policy::ResolveVerdict::kIgnore:
      ev.verdict = Verdict::kIgnore;
      break;
    case policy::ResolveVerdict::kRecord:
      ev.verdict = Verdict::kScaledDown;
      break;
    case policy::ResolveVerdict::kRecordBypass:
      ev.verdict = Verdict::kRecordBypass;
      break;
    case policy::ResolveVerdict::kConfirmBypass:
      ev.verdict = Verdict::kConfirmBypass;
      break;
    case policy::ResolveVerdict::kBypassDeadline:
      ev.verdict = Verdict::kBypassDeadline;
      break;
    case policy::ResolveVerdict::kRelease:
      ev.verdict = Verdict::kRelease;
      break;
  }
  return ev;
}

}  // namespace aw::resolver
