#include "admission/io/pipeline.h"

#include <fmt/format.h>

#include <cctype>
#include <chrono>
#include <exception>

#include "util/io/log.h"
#include "util/text.h"

namespace aw::admission {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

using util::EqualsIgnoreCase;

std::string Millis(std::chrono::nanoseconds d) {
  return fmt::format("{:.3f}", std::chrono::duration<double, std::milli>(d).count());
}

// The decision log line's fields, kept per thread: each request overwrites the values in place, so
// that strings already grown to a request's size are not allocated again for the next one.
class DecisionFields {
 public:
  void Add(std::string_view key, std::string_view value) {
    if (n_ == fields_.size()) fields_.emplace_back();
    fields_[n_].first = key;
    fields_[n_].second.assign(value);
    ++n_;
  }
  // The fields added since the last call (the list shrinks only when a request has fewer).
  const log::Fields& Take() {
    fields_.resize(n_);
    n_ = 0;
    return fields_;
  }

 private:
  log::Fields fields_;
  size_t n_ = 0;
};

admission::HandlerResult HandleGuarded(admission::Route route, std::string_view body,
                                       const admission::Context& ctx) {
  try {
    return admission::Handle(route, body, ctx);
  } catch (const std::exception& e) {
    admission::HandlerResult result;
    result.http_status = 500;
    result.reason = fmt::format("internal error: {}", e.what());
    return result;
  } catch (...) {
    admission::HandlerResult result;
    result.http_status = 500;
    result.reason = "internal error: unknown exception";
    return result;
  }
}

}  // namespace

bool IsJsonContentType(std::string_view content_type) {
  std::string_view media = content_type.substr(0, content_type.find(';'));
  return EqualsIgnoreCase(Trim(media), "application/json");
}

HttpAnswer AdmissionPipeline::Text(int status, std::string message) {
  if (message.empty() || message.back() != '\n') message.push_back('\n');
  return HttpAnswer{status, "text/plain; charset=utf-8", std::move(message)};
}

AdmissionPipeline::AdmissionPipeline(const policy::Policy& policy,
                                     const contract::CrdReadiness& crd, AdmissionMetrics& metrics,
                                     size_t max_body_bytes)
    : policy_(policy), crd_(crd), metrics_(metrics), max_body_bytes_(max_body_bytes) {}

HttpAnswer AdmissionPipeline::Serve(admission::Route route, std::string_view content_type,
                                    std::string_view body, bool body_too_large) {
  const auto start = std::chrono::steady_clock::now();
  metrics_.in_flight().Increment();
  struct InFlight {
    AdmissionMetrics& m;
    ~InFlight() { m.in_flight().Decrement(); }
  } in_flight{metrics_};
  const std::string_view route_name = admission::RouteName(route);

  auto reject = [&](int status, std::string message) {
    auto latency = std::chrono::steady_clock::now() - start;
    metrics_.Record(route, admission::Outcome::kError, false, latency);
    metrics_.HttpError(status);
    log::warn("admission request rejected", {{"route", std::string(route_name)},
                                             {"status", std::to_string(status)},
                                             {"reason", message},
                                             {"latency_ms", Millis(latency)}});
    return Text(status, std::move(message));
  };

  if (body_too_large) {
    return reject(413,
                  fmt::format("request body larger than the limit of {} bytes", max_body_bytes_));
  }
  if (!IsJsonContentType(content_type)) {
    return reject(415, fmt::format("unsupported content type \"{}\": admission requests must be "
                                   "application/json",
                                   content_type));
  }

  admission::HandlerResult result = HandleGuarded(
      route, body,
      admission::Context{policy_, crd_.AcceptsAllocating(), std::chrono::system_clock::now()});
  const auto latency = std::chrono::steady_clock::now() - start;

  if (result.http_status >= 500) {
    metrics_.Record(route, admission::Outcome::kError, false, latency);
    metrics_.HttpError(result.http_status);
    log::error("admission request failed", {{"route", std::string(route_name)},
                                            {"uid", result.uid},
                                            {"status", std::to_string(result.http_status)},
                                            {"reason", result.reason},
                                            {"latency_ms", Millis(latency)}});
    return Text(result.http_status, result.reason.empty() ? "internal error" : result.reason);
  }

  metrics_.Record(route, result.outcome, result.fail_open, latency);
  if (result.http_status != 200) metrics_.HttpError(result.http_status);
  thread_local DecisionFields fields;
  char millis[32];
  const auto millis_end =
      fmt::format_to_n(millis, sizeof(millis), "{:.3f}",
                       std::chrono::duration<double, std::milli>(latency).count())
          .out;
  fields.Add("uid", result.uid);
  fields.Add("namespace", result.namespace_);
  fields.Add("name", result.name);
  fields.Add("route", route_name);
  fields.Add("decision", admission::OutcomeName(result.outcome));
  fields.Add("reason", result.reason);
  fields.Add("latency_ms", std::string_view(millis, static_cast<size_t>(millis_end - millis)));
  if (result.fail_open) fields.Add("fail_open", "true");
  for (const auto& k : result.neutralised) metrics_.Neutralised(k);
  if (result.shutdown_held) {
    metrics_.ShutdownHeld();
    fields.Add("scale_down_protection", "held");
  }
  if (result.scaled_down) {
    metrics_.ScaledDown();
    fields.Add("scale_down", "applied, allocation abandoned (outcome ScaledDown)");
  }
  if (result.shutdown_deferred) {
    metrics_.ShutdownDeferred();
    fields.Add("scale_down_protection", "deferred shutdown applied");
  }
  if (!result.neutralised.empty()) {
    std::string ks;
    for (const auto& k : result.neutralised) ks += (ks.empty() ? "" : ",") + k;
    fields.Add("neutralised", ks);
  }
  if (result.http_status != 200) {
    fields.Add("status", std::to_string(result.http_status));
    log::warn("admission request malformed", fields.Take());
  } else if (result.fail_open || !result.neutralised.empty() || result.shutdown_held ||
             result.shutdown_deferred || result.scaled_down) {
    log::warn("admission decision", fields.Take());
  } else if (log::Enabled(log::Level::kInfo)) {
    log::info("admission decision", fields.Take());
  } else {
    fields.Take();
  }
  HttpAnswer answer{result.http_status, std::move(result.content_type), std::move(result.body)};
  if (answer.status != 200 && (answer.body.empty() || answer.body.back() != '\n')) {
    if (answer.body.empty()) answer.body = result.reason.empty() ? "bad request" : result.reason;
    answer.body.push_back('\n');
  }
  return answer;
}

}  // namespace aw::admission
