#include "gateway/io/gateway.h"

#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/strand.hpp>
#include <map>
#include <mutex>
#include <vector>

#include "contract/keys.h"
#include "gateway/allocation.h"
#include "gateway/delivery.h"
#include "policy/gameserver.h"
#include "util/duration.h"
#include "util/io/log.h"
#include "util/time_format.h"

namespace aw::gateway {

using Clock = std::chrono::steady_clock;
namespace asio = boost::asio;

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
        abandoned(prometheus::BuildCounter()
                      .Name("allocating_gateway_abandoned_total")
                      .Help("Requests whose client went away before the answer (closed or reset "
                            "the connection, or it was evicted), by phase: waiting for the "
                            "GameServer's confirmation, or allocating (the allocator call in "
                            "flight)")
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
                     .Add({}, prometheus::Histogram::BucketBoundaries{0.005, 0.01, 0.025, 0.05, 0.1,
                                                                      0.25, 0.5, 1, 2.5, 5, 10, 30,
                                                                      60, 120, 300})) {
    // Every label value known in advance exists from start-up at 0 (Prometheus' advice for
    // counters with known labels), so rate() and the dashboards see the series before the first
    // retry or the first client that goes away. Requests by code are open-ended: they appear with
    // their first answer.
    for (const char* reason : kRetryReasons) retries.Add({{"reason", reason}});
    for (const char* result : kAttemptResults) attempts.Add({{"result", result}});
    for (const char* phase : kAbandonedPhases) abandoned.Add({{"phase", phase}});
  }

  // The `reason` values of retries_total: ReasonLabel's, and the gateway's own two.
  static constexpr const char* kRetryReasons[] = {"timed_out", "deleted",       "unhealthy",
                                                  "shutdown",  "error",         "reallocated",
                                                  "other",     "delivery_mark", "duplicate_key"};
  // The `result` values of attempts_total (the Attempt() calls below).
  static constexpr const char* kAttemptResults[] = {
      "allocated",   "joined",     "idempotent", "queued_past_deadline",
      "unavailable", "bad_answer", "remote"};
  // The `phase` values of abandoned_total.
  static constexpr const char* kAbandonedPhases[] = {"waiting", "allocating"};

  void Request(int status) {
    MutexLock lock(mu);
    auto it = by_code.find(status);
    if (it == by_code.end()) {
      it = by_code.emplace(status, &requests.Add({{"code", std::to_string(status)}})).first;
    }
    it->second->Increment();
  }
  void Retry(const std::string& reason) { retries.Add({{"reason", reason}}).Increment(); }
  void Attempt(const std::string& result) { attempts.Add({{"result", result}}).Increment(); }
  void Abandoned(const std::string& phase) { abandoned.Add({{"phase", phase}}).Increment(); }

  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Counter>& retries;
  prometheus::Family<prometheus::Counter>& attempts;
  prometheus::Family<prometheus::Counter>& abandoned;
  prometheus::Gauge& waiting;
  prometheus::Histogram& duration;
  Mutex mu;
  std::map<int, prometheus::Counter*> by_code GUARDED_BY(mu);
};

// One request (and the clients that joined it with its idempotency key). Written by Handle's thread
// until it is published; from then on only on `strand`, except the fields Join (the listener's
// thread) also reads: `clients`, `finished` and `abandoned` (atomics) and `joined` (under `mu`).
struct Gateway::Call {
  explicit Call(const asio::any_io_executor& ex) : strand(asio::make_strand(ex)) {}
  asio::strand<asio::any_io_executor> strand;
  std::string body;  // the AllocationRequest, forwarded unchanged on every attempt
  std::string ns;
  Clock::time_point start;
  Clock::time_point deadline;
  std::chrono::nanoseconds deadline_length{};
  int attempts = 0;             // on the strand
  bool counted = false;         // in in_flight_
  std::string key;              // the idempotency key ("" when none)
  std::string ns_key;           // "<ns>/<key>" in by_key_
  std::string answer_by;        // the deadline as written in allocating.agones.dev/answer-by
  std::atomic<int> clients{1};  // the first client and those that joined it
  std::vector<server::Responder> joined GUARDED_BY(mu);
  std::vector<std::string> history;  // "gs-a: timed out ..." per lost attempt; on the strand
  server::Responder respond;
  std::atomic<bool> finished{false};
  std::atomic<bool> abandoned{false};  // the client went away
  Mutex mu;
  WaiterRegistry::Ticket ticket;  // while waiting for a GameServer; on the strand
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
                 WaiterRegistry::Lookup lookup, prometheus::Registry& registry,
                 asio::any_io_executor executor)
    : options_(options),
      executor_(std::move(executor)),
      allocator_(allocator),
      waiters_(waiters),
      lookup_(std::move(lookup)),
      metrics_(std::make_unique<Metrics>(registry)) {}

Gateway::~Gateway() { life_.End(); }  // first: no guarded callback runs from here on

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
  if (draining_.load()) {
    metrics_->Request(503);
    auto res = ErrorAnswer(GrpcCode::kUnavailable, "the gateway is shutting down");
    res.headers.emplace_back("Connection", "close");
    return respond(std::move(res));
  }
  auto call = std::make_shared<Call>(executor_);
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
  // The request's namespace as given: agones-allocator does not default it (an allocation without
  // one finds no GameServer); the server is looked for wherever the allocator put it anyway.
  call->ns = parsed.namespace_;
  std::chrono::nanoseconds length = options_.default_deadline;
  if (parsed.deadline) {
    if (*parsed.deadline > options_.max_deadline) {
      return Finish(
          call, ErrorAnswer(
                    GrpcCode::kInvalidArgument,
                    fmt::format("metadata.annotations[\"{}\"]: must be at most {}",
                                kDeadlineAnnotation, util::FormatDuration(options_.max_deadline))));
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
  if (req.header) call->key = std::string(req.header(kIdempotencyKeyHeader));
  if (!call->key.empty()) {
    if (Status s = ValidateIdempotencyKey(call->key); !s.ok()) {
      return Finish(call, ErrorAnswer(GrpcCode::kInvalidArgument, s.message()));
    }
    call->ns_key = call->ns + "/" + call->key;
    if (Join(call->ns_key, req, call->respond)) return;
  }
  call->answer_by = util::FormatRfc3339Nano(std::chrono::time_point_cast<std::chrono::nanoseconds>(
      std::chrono::system_clock::now() +
      std::chrono::duration_cast<std::chrono::nanoseconds>(length)));
  std::string forwarded;
  if (Status s = WithGatewayAnnotations(call->body, call->answer_by, call->key, &forwarded);
      !s.ok()) {
    return Finish(call, ErrorAnswer(GrpcCode::kInvalidArgument, s.message()));
  }
  call->body = std::move(forwarded);
  in_flight_.fetch_add(1);
  call->counted = true;
  if (!call->ns_key.empty()) {
    MutexLock lock(keys_mu_);
    by_key_[call->ns_key] = call;
  }
  if (req.on_abandoned) {
    std::weak_ptr<Call> weak = call;
    req.on_abandoned(life_.Guard([this, weak] {
      if (auto c = weak.lock()) {
        asio::dispatch(c->strand, life_.Guard([this, c] { OnClientGone(c); }));
      }
    }));
  }
  // Published: from here on the call's state is touched only on its strand.
  asio::dispatch(call->strand, life_.Guard([this, call] {
    if (!call->key.empty() && Resume(call)) return;
    Attempt(call);
  }));
}

bool Gateway::Join(const std::string& ns_key, const server::HttpRequest& req,
                   server::Responder& respond) {
  std::shared_ptr<Call> call;
  {
    MutexLock lock(keys_mu_);
    auto it = by_key_.find(ns_key);
    if (it == by_key_.end()) return false;
    call = it->second.lock();
    if (!call) {
      by_key_.erase(it);
      return false;
    }
  }
  {
    MutexLock lock(call->mu);
    if (call->finished.load() || call->abandoned.load()) return false;
    call->joined.push_back(std::move(respond));
    call->clients.fetch_add(1);
  }
  metrics_->Attempt("joined");
  log::info("idempotent retry joins the request in flight with its key", {{"key", ns_key}});
  if (req.on_abandoned) {
    std::weak_ptr<Call> weak = call;
    req.on_abandoned(life_.Guard([this, weak] {
      if (auto c = weak.lock()) {
        asio::dispatch(c->strand, life_.Guard([this, c] { OnClientGone(c); }));
      }
    }));
  }
  return true;
}

std::optional<Gateway::KeyHolder> Gateway::FindKeyHolder(const std::shared_ptr<Call>& call) const {
  if (!options_.find_by_key) return std::nullopt;
  kube::ObjectPtr obj = options_.find_by_key(call->ns, call->key);
  if (!obj) return std::nullopt;
  KeyHolder h{*obj, {}};
  if (!AnswerFromGameServer(*obj, &h.body).ok()) return std::nullopt;
  return h;
}

void Gateway::WaitOnKeyHolder(const std::shared_ptr<Call>& call, KeyHolder holder) {
  // The earlier attempt's answer-by may be near: this request's deadline holds the server now.
  if (options_.extend_answer_by) {
    options_.extend_answer_by(holder.gs.namespace_, holder.gs.name, call->answer_by);
  }
  std::string last(holder.gs.Annotation(keys::kLastAllocated).value_or(""));
  WaitFor(call, std::move(holder.body), holder.gs.name, last);
}

bool Gateway::Resume(const std::shared_ptr<Call>& call) {
  std::optional<KeyHolder> holder = FindKeyHolder(call);
  if (!holder) return false;
  metrics_->Attempt("idempotent");
  log::info("idempotent retry: waiting on the GameServer an earlier attempt allocated",
            {{"gameserver", holder->gs.namespace_ + "/" + holder->gs.name},
             {"key", call->key},
             {"state", holder->gs.state}});
  ++call->attempts;
  WaitOnKeyHolder(call, std::move(*holder));
  return true;
}

void Gateway::Release(const std::shared_ptr<Call>& call, const std::string& ns,
                      const std::string& name) {
  if (options_.release_now && !name.empty()) options_.release_now(ns, name, call->answer_by);
}

void Gateway::Deliver(const std::shared_ptr<Call>& call, const std::string& ns,
                      const std::string& name, const kube::ObjectPtr& seen,
                      server::HttpResponse res) {
  if (!options_.mark_delivered) return Finish(call, std::move(res));
  auto shared = std::make_shared<server::HttpResponse>(std::move(res));
  DeliveryMark mark;
  mark.ns = ns;
  mark.name = name;
  mark.at = util::FormatRfc3339Nano(
      std::chrono::time_point_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now()));
  if (seen) mark.seen = *seen;
  const std::string at = mark.at;
  // The mark's answer comes on the marks' thread: back to the call's strand.
  auto on_marked = life_.Guard([this, call, ns, name, at, shared](Status s) {
    if (!s.ok()) {
      metrics_->Retry("delivery_mark");
      log::warn("could not mark the GameServer delivered; releasing it and allocating again",
                {{"gameserver", ns + "/" + name}, {"error", s.ToString()}});
      Release(call, ns, name);
      return Retry(call, fmt::format("{}: could not be marked delivered ({})", name, s.message()));
    }
    // Not written to any client of the call: this delivery is taken back (another call's
    // delivery of the same server, e.g. an idempotent retry's, stays), and with none left the
    // resolver releases the server.
    shared->on_written = life_.Guard([this, ns, name, at](bool written) {
      if (written || !options_.undeliver) return;
      log::warn("the answer naming the GameServer was not written; releasing it",
                {{"gameserver", ns + "/" + name}});
      options_.undeliver(ns, name, at);
    });
    Finish(call, std::move(*shared));
  });
  options_.mark_delivered(mark, [call, on_marked](Status s) {
    asio::dispatch(call->strand, [on_marked, s = std::move(s)]() mutable { on_marked(s); });
  });
}

void Gateway::Attempt(const std::shared_ptr<Call>& call) {
  ++call->attempts;
  // The allocator answers on its client's thread (or inline when stopped): back to the strand.
  allocator_.Allocate(call->body, call->deadline, life_.Guard([this, call](AllocatorAnswer a) {
    asio::dispatch(call->strand, life_.Guard([this, call, a = std::move(a)]() mutable {
      OnAllocated(call, std::move(a));
    }));
  }));
}

server::HttpResponse Gateway::NoServer(std::string_view message) const {
  return JsonAnswer(options_.unallocated_status, ErrorBody(GrpcCode::kResourceExhausted, message));
}

void Gateway::OnClientGone(const std::shared_ptr<Call>& call) {
  {
    // The call is abandoned only when every client of it (the first and those that joined with
    // the same key) is gone.
    MutexLock lock(call->mu);
    if (call->clients.fetch_sub(1) != 1) return;
  }
  if (call->finished.load() || call->abandoned.exchange(true)) return;
  // Waiting: the wait ends now (OnDecided reports it). Allocating: OnAllocated reports it when
  // the allocator answers.
  waiters_.Cancel(call->ticket, "abandoned");
}

void Gateway::ReportAbandoned(const std::shared_ptr<Call>& call, AbandonedAllocation a) {
  metrics_->Abandoned(a.phase);
  log::warn(a.request_key.empty()
                ? "the client went away before its answer; its GameServer is released"
                : "the client went away before its answer; its GameServer waits for a retry "
                  "with the request's idempotency key until the request's deadline, then it is "
                  "released",
            {{"gameserver", a.namespace_ + "/" + a.name},
             {"allocation", a.last_allocated},
             {"phase", a.phase},
             {"key", a.request_key},
             {"waited", util::FormatDuration(Clock::now() - call->start)}});
  if (options_.on_abandoned) options_.on_abandoned(a);
}

void Gateway::OnAllocated(const std::shared_ptr<Call>& call, AllocatorAnswer a) {
  if (call->abandoned.load()) {
    AllocationResponse parsed;
    if (a.status.ok() && a.http_status == 200 && ParseAllocationResponse(a.body, &parsed).ok()) {
      metrics_->Attempt("allocated");
      ReportAbandoned(call, {call->ns, parsed.game_server_name, parsed.last_allocated, "allocating",
                             call->key, call->answer_by});
    } else {
      metrics_->Abandoned("allocating");
      log::info("the client went away before the allocator answered; nothing was allocated",
                {{"status", std::to_string(a.http_status)}});
    }
    return Finish(call, ErrorAnswer(GrpcCode::kUnavailable, "abandoned"));
  }
  if (!a.status.ok() && a.status.code() == Status::Code::kDeadlineExceeded) {
    metrics_->Attempt("queued_past_deadline");
    std::string msg = fmt::format(
        "{}: the deadline of {} passed before the allocator was called "
        "({})",
        kNoServerMessage, util::FormatDuration(call->deadline_length), a.status.message());
    if (!call->history.empty()) {
      msg += fmt::format(" (earlier attempts: {})", Joined(call->history));
    }
    return Finish(call, NoServer(msg));
  }
  if (!a.status.ok()) {
    metrics_->Attempt("unavailable");
    log::warn("allocator unavailable", {{"error", a.status.message()}});
    std::string msg = fmt::format("allocator unavailable: {}", a.status.message());
    if (!call->history.empty())
      msg += fmt::format(" (earlier attempts: {})", Joined(call->history));
    return Finish(call, ErrorAnswer(GrpcCode::kUnavailable, msg));
  }
  if (a.http_status != 200) {
    metrics_->Attempt(a.http_status == 429 ? "no_server" : "error");
    if (call->history.empty()) return Finish(call, JsonAnswer(a.http_status, std::move(a.body)));
    // A later attempt: keep the allocator's code, say what happened before.
    std::string msg =
        fmt::format("{} (earlier attempts: {})", ErrorMessageOf(a.body), Joined(call->history));
    if (a.http_status == 429 ||
        ErrorCodeOf(a.body) == static_cast<int>(GrpcCode::kResourceExhausted)) {
      return Finish(call, NoServer(msg));
    }
    return Finish(call, JsonAnswer(a.http_status, std::move(a.body)));
  }
  AllocationResponse parsed;
  if (Status s = ParseAllocationResponse(a.body, &parsed); !s.ok()) {
    metrics_->Attempt("bad_answer");
    return Finish(call, ErrorAnswer(GrpcCode::kInternal, s.message()));
  }
  if (parsed.remote) {
    // Allocated by another cluster: not in the local watch. Its gateway (the policy's endpoint)
    // is the one that can wait for it.
    metrics_->Attempt("remote");
    return Finish(call, JsonAnswer(200, std::move(a.body)));
  }
  metrics_->Attempt("allocated");
  if (!parsed.gated) return Finish(call, JsonAnswer(200, std::move(a.body)));
  if (!call->key.empty() && Converge(call, parsed.game_server_name)) return;
  WaitFor(call, std::move(a.body), parsed.game_server_name, parsed.last_allocated);
}

bool Gateway::Converge(const std::shared_ptr<Call>& call, const std::string& allocated) {
  // A retry that reached this replica before the earlier attempt's server was in its cache has
  // allocated a second server for the key. Every replica keeps the earliest server holding the
  // key (FindByRequestKey), so this one is released and the call waits on that one.
  std::optional<KeyHolder> holder = FindKeyHolder(call);
  if (!holder || holder->gs.name == allocated) return false;
  metrics_->Retry("duplicate_key");
  log::info(
      "a second server was allocated for an idempotency key; releasing it and waiting on "
      "the earlier one",
      {{"released", call->ns + "/" + allocated},
       {"gameserver", holder->gs.namespace_ + "/" + holder->gs.name},
       {"key", call->key}});
  Release(call, call->ns, allocated);
  WaitOnKeyHolder(call, std::move(*holder));
  return true;
}

void Gateway::WaitFor(const std::shared_ptr<Call>& call, std::string response_body,
                      const std::string& name, const std::string& last) {
  metrics_->waiting.Increment();
  auto body = std::make_shared<std::string>(std::move(response_body));
  // The decision comes on the informer's, the timer's or a canceller's thread (inline when the
  // cache already decides): back to the strand.
  WaiterRegistry::Ticket ticket = waiters_.Wait(
      call->ns, name, last, call->deadline,
      life_.Guard([this, call, body, name, last](const Decision& d, const kube::ObjectPtr& obj,
                                                 const std::string& ns) {
        asio::dispatch(call->strand, life_.Guard([this, call, body, name, last, d, obj, ns] {
          metrics_->waiting.Decrement();
          OnDecided(call, *body, name, last, ns, d, obj);
        }));
      }));
  call->ticket = ticket;
  // The client may have gone between the allocator's answer and the registration.
  if (call->abandoned.load()) waiters_.Cancel(ticket, "abandoned");
}

void Gateway::OnDecided(const std::shared_ptr<Call>& call, const std::string& response_body,
                        const std::string& gs_name, const std::string& last_allocated,
                        const std::string& ns, const Decision& d, const kube::ObjectPtr& obj) {
  call->ticket.reset();
  if (d.verdict == Verdict::kWait && d.reason == "abandoned") {
    ReportAbandoned(call, {ns, gs_name, last_allocated, "waiting", call->key, call->answer_by});
    return Finish(call, ErrorAnswer(GrpcCode::kUnavailable, "abandoned"));
  }
  switch (d.verdict) {
    case Verdict::kAnswer: {
      std::string out;
      if (obj && RefreshMetadata(response_body, *obj, &out).ok()) {
        return Deliver(call, ns, gs_name, obj, JsonAnswer(200, std::move(out)));
      }
      return Deliver(call, ns, gs_name, obj, JsonAnswer(200, response_body));
    }
    case Verdict::kRetry:
      metrics_->Retry(ReasonLabel(d.reason));
      log::info("allocation lost while waiting; allocating again",
                {{"gameserver", ns + "/" + gs_name},
                 {"reason", d.reason},
                 {"attempt", std::to_string(call->attempts)}});
      return Retry(call, fmt::format("{}: {}", gs_name, d.reason));
    case Verdict::kWait:
      // Nobody is told this server's address: the resolver releases it at once (answer-by now).
      Release(call, ns, gs_name);
      if (d.reason == "stopped") {
        return Finish(call, ErrorAnswer(GrpcCode::kUnavailable, "the gateway is shutting down"));
      }
      call->history.push_back(
          fmt::format("{}: not confirmed playable within the deadline", gs_name));
      return Finish(
          call, NoServer(fmt::format("{}: no allocated GameServer was confirmed "
                                     "playable within {} ({})",
                                     kNoServerMessage, util::FormatDuration(call->deadline_length),
                                     Joined(call->history))));
  }
}

void Gateway::Retry(const std::shared_ptr<Call>& call, const std::string& what) {
  call->history.push_back(what);
  if (AttemptsLeft(call->attempts, options_.max_attempts, call->deadline - Clock::now())) {
    return Attempt(call);
  }
  const bool out_of_time = call->deadline <= Clock::now();
  Finish(call,
         NoServer(fmt::format("{}: {} ({})", kNoServerMessage,
                              out_of_time ? fmt::format("the deadline of {} passed",
                                                        util::FormatDuration(call->deadline_length))
                                          : fmt::format("{} attempts made", call->attempts),
                              Joined(call->history))));
}

void Gateway::Finish(const std::shared_ptr<Call>& call, server::HttpResponse res) {
  if (call->finished.exchange(true)) return;
  if (!call->abandoned.load()) metrics_->Request(res.status);
  metrics_->duration.Observe(std::chrono::duration<double>(Clock::now() - call->start).count());
  if (call->counted) in_flight_.fetch_sub(1);
  if (!call->ns_key.empty()) {
    MutexLock lock(keys_mu_);
    auto it = by_key_.find(call->ns_key);
    if (it != by_key_.end() && it->second.lock() == call) by_key_.erase(it);
  }
  std::vector<server::Responder> joined;
  {
    MutexLock lock(call->mu);
    joined.swap(call->joined);
  }
  if (res.on_written && !joined.empty()) {
    // One answer to every client of the call: the mark is undone only when none received it.
    struct Tally {
      Tally(size_t l, std::function<void(bool)> t) : left(l), then(std::move(t)) {}
      Mutex mu;
      size_t left GUARDED_BY(mu);
      bool any GUARDED_BY(mu) = false;
      std::function<void(bool)> then GUARDED_BY(mu);
    };
    auto tally = std::make_shared<Tally>(joined.size() + 1, std::move(res.on_written));
    res.on_written = [tally](bool written) {
      std::function<void(bool)> then;
      bool any = false;
      {
        MutexLock lock(tally->mu);
        tally->any = tally->any || written;
        if (--tally->left != 0) return;
        then = std::move(tally->then);
        any = tally->any;
      }
      then(any);
    };
  }
  for (auto& r : joined) r(res);
  call->respond(std::move(res));
}

void RegisterGatewayFlags(flags::FlagSet& fs, GatewayOptions* o) {
  fs.Duration("deadline", &o->default_deadline,
              "default time budget of a request: allocation, waiting and re-allocations",
              std::chrono::milliseconds(1));
  fs.Duration("max-deadline", &o->max_deadline,
              "largest per-request deadline (X-Allocating-Deadline header or "
              "allocating.agones.dev/gateway-deadline annotation)",
              std::chrono::milliseconds(1));
  fs.Int("max-attempts", &o->max_attempts,
         "allocations per request at most (the first one included)", 1, 100);
  fs.Int("http-unallocated-status-code", &o->unallocated_status,
         "HTTP status of the gateway's own \"no GameServer\" answers (gRPC code 8 in the body), "
         "like agones-allocator's flag of the same name",
         200, 599);
}

Status ValidateGatewayOptions(const GatewayOptions& o) {
  if (o.default_deadline > o.max_deadline) {
    return Status::InvalidArgument("--deadline is above --max-deadline");
  }
  return Status::Ok();
}

}  // namespace aw::gateway
