#include "gateway/io/gateway.h"

#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include <map>
#include <mutex>
#include <vector>

#include "gateway/allocation.h"
#include "util/duration.h"
#include "util/log.h"

namespace aw::gateway {

using Clock = std::chrono::steady_clock;

struct Gateway::Metrics {
  explicit Metrics(prometheus::Registry& r)
      : requests(prometheus::BuildCounter()
                     .Name("allocating_gateway_requests_total")
                     .Help("Allocation requests answered, by HTTP status")
                     .Register(r)),
        retries(prometheus::BuildCounter()
                    .Name("allocating_gateway_retries_total")
                    .Help("Allocations lost while waiting (and allocated again when attempts and "
                          "time remained), by reason")
                    .Register(r)),
        attempts(prometheus::BuildCounter()
                     .Name("allocating_gateway_attempts_total")
                     .Help("Calls to agones-allocator, by result")
                     .Register(r)),
        waiting(prometheus::BuildGauge()
                    .Name("allocating_gateway_waiting")
                    .Help("Requests waiting for their GameServer to be confirmed")
                    .Register(r)
                    .Add({})),
        duration(prometheus::BuildHistogram()
                     .Name("allocating_gateway_request_duration_seconds")
                     .Help("Time from a request's arrival to its answer")
                     .Register(r)
                     .Add({}, prometheus::Histogram::BucketBoundaries{
                                  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
                                  60, 120, 300})) {}

  void Request(int status) {
    std::lock_guard lock(mu);
    auto it = by_code.find(status);
    if (it == by_code.end()) {
      it = by_code.emplace(status, &requests.Add({{"code", std::to_string(status)}})).first;
    }
    it->second->Increment();
  }
  void Retry(const std::string& reason) { retries.Add({{"reason", reason}}).Increment(); }
  void Attempt(const std::string& result) { attempts.Add({{"result", result}}).Increment(); }

  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Counter>& retries;
  prometheus::Family<prometheus::Counter>& attempts;
  prometheus::Gauge& waiting;
  prometheus::Histogram& duration;
  std::mutex mu;
  std::map<int, prometheus::Counter*> by_code;
};

struct Gateway::Call {
  std::string body;  // the AllocationRequest, forwarded unchanged on every attempt
  std::string ns;
  Clock::time_point start;
  Clock::time_point deadline;
  std::chrono::nanoseconds deadline_length{};
  int attempts = 0;
  std::vector<std::string> history;  // "gs-a: timed out ..." per lost attempt
  server::Responder respond;
  std::atomic<bool> finished{false};
};

namespace {

server::HttpResponse JsonAnswer(int status, std::string body) {
  server::HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = std::move(body);
  return r;
}

server::HttpResponse ErrorAnswer(GrpcCode code, std::string_view message) {
  return JsonAnswer(HttpStatusOf(code), ErrorBody(code, message));
}

std::string ReasonLabel(const std::string& reason) {
  if (reason.starts_with("timed out")) return "timed_out";
  if (reason == "deleted") return "deleted";
  if (reason.find("Unhealthy") != std::string::npos) return "unhealthy";
  if (reason.find("Shutdown") != std::string::npos) return "shutdown";
  if (reason.find("Error") != std::string::npos) return "error";
  if (reason.starts_with("allocated again")) return "reallocated";
  return "other";
}

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += "; ";
    out += s;
  }
  return out;
}

}  // namespace

Gateway::Gateway(GatewayOptions options, AllocatorClient& allocator, WaiterRegistry& waiters,
                 WaiterRegistry::Lookup lookup, prometheus::Registry& registry)
    : options_(options),
      allocator_(allocator),
      waiters_(waiters),
      lookup_(std::move(lookup)),
      metrics_(std::make_unique<Metrics>(registry)) {}

Gateway::~Gateway() = default;

void Gateway::Handle(const server::HttpRequest& req, server::Responder respond) {
  if (req.path == "/healthz" && req.method == "GET") {
    return respond(server::HttpResponse{200, "text/plain; charset=utf-8", "ok\n", {}});
  }
  if (req.path != "/gameserverallocation") {
    metrics_->Request(404);
    return respond(ErrorAnswer(GrpcCode::kNotFound, "Not Found"));
  }
  if (req.method != "POST") {
    metrics_->Request(501);
    return respond(ErrorAnswer(GrpcCode::kUnimplemented, "Method Not Allowed"));
  }
  if (req.body_too_large) {
    metrics_->Request(413);
    return respond(JsonAnswer(
        413, ErrorBody(GrpcCode::kResourceExhausted, "request body larger than the limit")));
  }
  auto call = std::make_shared<Call>();
  call->start = Clock::now();
  call->respond = std::move(respond);
  // An empty body is an empty AllocationRequest, as grpc-gateway reads it (io.EOF).
  std::string_view body = req.body;
  const bool blank = body.find_first_not_of(" \t\r\n") == std::string_view::npos;
  call->body = blank ? std::string("{}") : std::string(body);
  AllocationRequest parsed;
  if (Status s = ParseAllocationRequest(call->body, &parsed); !s.ok()) {
    return Finish(call, ErrorAnswer(GrpcCode::kInvalidArgument, s.message()));
  }
  call->ns = parsed.namespace_.empty() ? "default" : parsed.namespace_;
  std::chrono::nanoseconds length = options_.default_deadline;
  if (parsed.deadline) {
    if (*parsed.deadline > options_.max_deadline) {
      return Finish(call, ErrorAnswer(GrpcCode::kInvalidArgument,
                                      fmt::format("metadata.annotations[\"{}\"]: must be at most {}",
                                                  kDeadlineAnnotation,
                                                  util::FormatDuration(options_.max_deadline))));
    }
    length = *parsed.deadline;
  }
  if (req.header) {
    if (std::string_view h = req.header(kDeadlineHeader); !h.empty()) {
      if (Status s = ParseDeadline(h, kDeadlineHeader, options_.max_deadline, &length); !s.ok()) {
        return Finish(call, ErrorAnswer(GrpcCode::kInvalidArgument, s.message()));
      }
    }
  }
  call->deadline_length = length;
  call->deadline = call->start + std::chrono::duration_cast<Clock::duration>(length);
  in_flight_.fetch_add(1);
  Attempt(call);
}

void Gateway::Attempt(const std::shared_ptr<Call>& call) {
  ++call->attempts;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(call->deadline -
                                                                         Clock::now());
  allocator_.Allocate(call->body, std::max(std::chrono::milliseconds(1), left),
                      [this, call](AllocatorAnswer a) { OnAllocated(call, std::move(a)); });
}

void Gateway::OnAllocated(const std::shared_ptr<Call>& call, AllocatorAnswer a) {
  if (!a.status.ok()) {
    metrics_->Attempt("unavailable");
    log::warn("allocator unavailable", {{"error", a.status.message()}});
    std::string msg = fmt::format("allocator unavailable: {}", a.status.message());
    if (!call->history.empty()) msg += fmt::format(" (earlier attempts: {})", Joined(call->history));
    return Finish(call, ErrorAnswer(GrpcCode::kUnavailable, msg));
  }
  if (a.http_status != 200) {
    metrics_->Attempt(a.http_status == 429 ? "no_server" : "error");
    if (call->history.empty()) return Finish(call, JsonAnswer(a.http_status, std::move(a.body)));
    // A later attempt: keep the allocator's code, say what happened before.
    std::string msg = fmt::format("{} (earlier attempts: {})", ErrorMessageOf(a.body),
                                  Joined(call->history));
    if (a.http_status == 429) return Finish(call, ErrorAnswer(GrpcCode::kResourceExhausted, msg));
    return Finish(call, JsonAnswer(a.http_status, std::move(a.body)));
  }
  AllocationResponse parsed;
  if (Status s = ParseAllocationResponse(a.body, &parsed); !s.ok()) {
    metrics_->Attempt("bad_answer");
    return Finish(call, ErrorAnswer(GrpcCode::kInternal, s.message()));
  }
  metrics_->Attempt("allocated");
  if (!parsed.gated) return Finish(call, JsonAnswer(200, std::move(a.body)));
  metrics_->waiting.Increment();
  auto body = std::make_shared<std::string>(std::move(a.body));
  const std::string name = parsed.game_server_name;
  waiters_.Wait(call->ns, name, parsed.last_allocated, call->deadline,
                [this, call, body, name](const Decision& d, const kube::ObjectPtr& obj) {
                  metrics_->waiting.Decrement();
                  OnDecided(call, *body, name, d, obj);
                });
}

void Gateway::OnDecided(const std::shared_ptr<Call>& call, const std::string& response_body,
                        const std::string& gs_name, const Decision& d,
                        const kube::ObjectPtr& obj) {
  switch (d.verdict) {
    case Verdict::kAnswer: {
      std::string out;
      if (obj && RefreshMetadata(response_body, *obj->doc, &out).ok()) {
        return Finish(call, JsonAnswer(200, std::move(out)));
      }
      return Finish(call, JsonAnswer(200, response_body));
    }
    case Verdict::kRetry:
      metrics_->Retry(ReasonLabel(d.reason));
      log::info("allocation lost while waiting; allocating again",
                {{"gameserver", call->ns + "/" + gs_name}, {"reason", d.reason},
                 {"attempt", std::to_string(call->attempts)}});
      return Retry(call, fmt::format("{}: {}", gs_name, d.reason));
    case Verdict::kWait:
      if (d.reason == "stopped") {
        return Finish(call, ErrorAnswer(GrpcCode::kUnavailable, "the gateway is shutting down"));
      }
      call->history.push_back(fmt::format("{}: not confirmed playable within the deadline",
                                          gs_name));
      return Finish(call,
                    ErrorAnswer(GrpcCode::kResourceExhausted,
                                fmt::format("{}: no allocated GameServer was confirmed playable "
                                            "within {} ({})",
                                            kNoServerMessage,
                                            util::FormatDuration(call->deadline_length),
                                            Joined(call->history))));
  }
}

void Gateway::Retry(const std::shared_ptr<Call>& call, const std::string& what) {
  call->history.push_back(what);
  if (AttemptsLeft(call->attempts, options_.max_attempts, call->deadline - Clock::now())) {
    return Attempt(call);
  }
  const bool out_of_time = call->deadline <= Clock::now();
  Finish(call, ErrorAnswer(GrpcCode::kResourceExhausted,
                           fmt::format("{}: {} ({})", kNoServerMessage,
                                       out_of_time
                                           ? fmt::format("the deadline of {} passed",
                                                         util::FormatDuration(call->deadline_length))
                                           : fmt::format("{} attempts made", call->attempts),
                                       Joined(call->history))));
}

void Gateway::Finish(const std::shared_ptr<Call>& call, server::HttpResponse res) {
  if (call->finished.exchange(true)) return;
  metrics_->Request(res.status);
  metrics_->duration.Observe(
      std::chrono::duration<double>(Clock::now() - call->start).count());
  if (call->attempts > 0) in_flight_.fetch_sub(1);
  call->respond(std::move(res));
}

}  // namespace aw::gateway
