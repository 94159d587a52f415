#include "server/admission_pipeline.h"

#include <fmt/format.h>

#include <cctype>
#include <chrono>
#include <exception>

#include "util/io/log.h"
#include "util/text.h"

namespace aw::server {
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
  const std::string route_name(admission::RouteName(route));

  auto reject = [&](int status, std::string message) {
    auto latency = std::chrono::steady_clock::now() - start;
    metrics_.Record(route, admission::Outcome::kError, false, latency);
    metrics_.HttpError(status);
    log::warn("admission request rejected", {{"route", route_name},
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

  admission::HandlerResult result;
  try {
    admission::Context ctx{policy_, crd_.AcceptsAllocating(), std::chrono::system_clock::now()};
    result = admission::Handle(route, body, ctx);
  } catch (const std::exception& e) {
    result = admission::HandlerResult{};
    result.http_status = 500;
    result.reason = fmt::format("internal error: {}", e.what());
  } catch (...) {
    result = admission::HandlerResult{};
    result.http_status = 500;
    result.reason = "internal error: unknown exception";
  }
  const auto latency = std::chrono::steady_clock::now() - start;

  if (result.http_status >= 500) {
    metrics_.Record(route, admission::Outcome::kError, false, latency);
    metrics_.HttpError(result.http_status);
    log::error("admission request failed", {{"route", route_name},
                                            {"uid", result.uid},
                                            {"status", std::to_string(result.http_status)},
                                            {"reason", result.reason},
                                            {"latency_ms", Millis(latency)}});
    return Text(result.http_status, result.reason.empty() ? "internal error" : result.reason);
  }

  metrics_.Record(route, result.outcome, result.fail_open, latency);
  if (result.http_status != 200) metrics_.HttpError(result.http_status);
  log::Fields fields{{"uid", result.uid},
                     {"namespace", result.namespace_},
                     {"name", result.name},
                     {"route", route_name},
                     {"decision", std::string(admission::OutcomeName(result.outcome))},
                     {"reason", result.reason},
                     {"latency_ms", Millis(latency)}};
  if (result.fail_open) fields.emplace_back("fail_open", "true");
  for (const auto& k : result.neutralised) metrics_.Neutralised(k);
  if (result.shutdown_held) {
    metrics_.ShutdownHeld();
    fields.emplace_back("scale_down_protection", "held");
  }
  if (result.scaled_down) {
    metrics_.ScaledDown();
    fields.emplace_back("scale_down", "applied, allocation abandoned (outcome ScaledDown)");
  }
  if (result.shutdown_deferred) {
    metrics_.ShutdownDeferred();
    fields.emplace_back("scale_down_protection", "deferred shutdown applied");
  }
  if (!result.neutralised.empty()) {
    std::string ks;
    for (const auto& k : result.neutralised) ks += (ks.empty() ? "" : ",") + k;
    fields.emplace_back("neutralised", ks);
  }
  if (result.http_status != 200) {
    fields.emplace_back("status", std::to_string(result.http_status));
    log::warn("admission request malformed", fields);
  } else if (result.fail_open || !result.neutralised.empty() || result.shutdown_held ||
             result.shutdown_deferred || result.scaled_down) {
    log::warn("admission decision", fields);
  } else {
    log::info("admission decision", fields);
  }
  HttpAnswer answer{result.http_status, std::move(result.content_type), std::move(result.body)};
  if (answer.status != 200 && (answer.body.empty() || answer.body.back() != '\n')) {
    if (answer.body.empty()) answer.body = result.reason.empty() ? "bad request" : result.reason;
    answer.body.push_back('\n');
  }
  return answer;
}

}  // namespace aw::server
