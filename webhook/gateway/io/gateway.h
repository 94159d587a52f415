// Gateway: agones-allocator's REST API in front of agones-allocator, answering an allocation only
// once its GameServer is playable.
//
// Promise (per POST /gameserverallocation):
//   - a malformed AllocationRequest -> 400 {"code":3,...}; a body over the limit -> 413; another
//     method -> 501 {"code":12,"message":"Method Not Allowed"}; another path -> 404
//     {"code":5,"message":"Not Found"} (grpc-gateway's answers); /healthz on this port -> "ok";
//   - the request is forwarded unchanged to the allocator; its errors are answered as it gave
//     them (status and body); no HTTP answer from it -> 503 {"code":14,...};
//   - an allocation whose GameServer is not gated, or that another cluster made (`source` not
//     "local": a multi-cluster policy's remote endpoint), is answered at once with the
//     allocator's body; a gated local one waits, in whatever namespace the allocator put it,
//     (WaiterRegistry) until Decide() says kAnswer -> 200 with the allocator's
//     body, metadata refreshed from the GameServer; kRetry -> allocate again with the same
//     request while attempts and time remain; the request's deadline (header
//     X-Allocating-Deadline, annotation allocating.agones.dev/gateway-deadline, else the
//     default; at most `max_deadline`) bounds everything; out of attempts or time -> 429
//     {"code":8,"message":"there is no available GameServer to allocate: <what happened>"}, with
//     `unallocated_status` (429 by default) as the HTTP status of every such "no server" answer
//     the gateway makes itself; the deadline passing while the call was queued for an allocator
//     worker is such an answer too;
//   - a client that goes away before its answer (HttpRequest::on_abandoned: it closed or reset
//     the connection, or the connection was evicted) is noticed at once: its wait is cancelled,
//     allocating_gateway_abandoned_total{phase} counts it, a warning names the GameServer, and
//     `on_abandoned` is called with that GameServer (when one was allocated for it: also when the
//     allocator's answer comes after the client left). Releasing the server is that hook's job;
//   - after BeginDrain() (SIGTERM), a new allocation request is refused with 503
//     {"code":14,"message":"the gateway is shutting down"}; requests already accepted go on
//     (waiting, and re-allocating) until answered;
//   - every answer is given exactly once, from the call's strand; no thread waits.
//   Threads: a call's state (attempts, history, the waiter's ticket) is touched only on the call's
//   own strand of `executor` (the gateway passes its Kubernetes client's I/O executor, where the
//   allocator's and the marks' answers arrive): the allocator's answer, the waiter's decision
//   (informer, timer, Cancel or Stop thread), the delivery mark's answer and the client going
//   away are each dispatched onto it, so they run one at a time whichever thread they come from.
//   Before the call is published (by key, to its client's on_abandoned, to the allocator) only
//   Handle's thread sees it. Every callback holds the call (a shared_ptr) and reaches the gateway
//   only through its lifeline (runtime/lifeline.h): a callback still queued on a strand when the
//   gateway is destroyed does nothing, and the destructor waits for those running (never destroy
//   the gateway from one of its callbacks). The allocator client, the waiters and the marks it is
//   given must still outlive it (gateway_main.cpp: the manager stops them before it is destroyed).
//   No server lost (docs/gateway.md; gateway/delivery.h): every forwarded request carries
//   metadata.annotations allocating.agones.dev/answer-by (the request's deadline, RFC 3339) and,
//   with a key, allocating.agones.dev/request-key; a request setting those (or `delivered`)
//   itself gets 400. Before a 200 naming a gated server, `mark_delivered` writes `delivered`;
//   when that fails the server is released (`release_now`) and another is allocated while
//   attempts and time remain. If the answer is then not written (HttpResponse::on_written false
//   for every client of the call), `undeliver` takes back this call's delivery (the others of
//   the same server stay: `delivered` lists every delivery, gateway/delivery.h). A client gone, the
//   deadline passing or the shutdown's 503 release the call's server (`release_now`; the
//   abandoned case through `on_abandoned`).
//   Idempotency (header X-Allocating-Idempotency-Key, 1..128 of [A-Za-z0-9._~:-], else 400): a
//   request whose key is in flight on this replica joins that call (one allocation, every client
//   gets the answer; the call is abandoned only when all of them are gone); else a cached
//   GameServer holding the key (`find_by_key`) is waited on (answer-by extended to this
//   request's deadline) or, already playable, answered at once; else a new allocation.
// Metrics: allocating_gateway_requests_total{code}, allocating_gateway_retries_total{reason},
// allocating_gateway_waiting, allocating_gateway_request_duration_seconds,
// allocating_gateway_attempts_total{result}, allocating_gateway_abandoned_total{phase}; every
// reason, result and phase the gateway counts exists from start-up at 0.
#pragma once

#include <prometheus/registry.h>

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "gateway/io/allocator_client.h"
#include "gateway/io/waiters.h"
#include "policy/gameserver.h"
#include "runtime/lifeline.h"
#include "server/connection_server.h"
#include "util/flags.h"
#include "util/io/mutex.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace aw::gateway {

// A GameServer allocated for a request whose client went away before the answer.
struct AbandonedAllocation {
  std::string namespace_;  // where the gateway saw it (else the request's namespace)
  std::string name;
  std::string last_allocated;  // the allocation's agones.dev/last-allocated (its id)
  std::string phase;           // "waiting" (for confirmation) or "allocating" (answer came late)
  std::string request_key;     // the request's idempotency key ("" when none): a retry may
                               // still come for the server, so it is not released at once
  std::string answer_by;       // the request's answer-by as written on the server
};

// One answer's delivery mark: the server, the delivery (a unique RFC 3339 time) and the
// server as the gateway decided on it (its resourceVersion and `delivered`), so that the mark is
// usually one write; std::nullopt when unknown.
struct DeliveryMark {
  std::string ns;
  std::string name;
  std::string at;
  std::optional<policy::GameServerView> seen;
};

struct GatewayOptions {
  std::chrono::nanoseconds default_deadline = std::chrono::seconds(30);
  std::chrono::nanoseconds max_deadline = std::chrono::minutes(10);
  int max_attempts = 3;
  int unallocated_status = 429;  // HTTP status of the gateway's own "no server" answers
  // Called (quickly, from any thread) for each abandoned allocation that holds a GameServer.
  std::function<void(const AbandonedAllocation&)> on_abandoned;
  // "No server lost" (gateway/io/marks.h); each unset = that write is skipped (unit tests).
  // `at`: the delivered time written (undeliver takes back only that mark); `expected`: the
  // releasing call's answer-by (release_now moves it to now only while it is still that).
  std::function<void(const DeliveryMark&, std::function<void(Status)>)> mark_delivered;
  std::function<void(const std::string& ns, const std::string& name, const std::string& at)>
      undeliver;
  std::function<void(const std::string& ns, const std::string& name, const std::string& expected)>
      release_now;
  std::function<void(const std::string& ns, const std::string& name, const std::string& answer_by)>
      extend_answer_by;
  // The cached GameServer in `ns` holding the request with idempotency key `key`, or nullptr.
  std::function<kube::ObjectPtr(const std::string& ns, const std::string& key)> find_by_key;
};

// The request flags (--deadline, --max-deadline, --max-attempts, --http-unallocated-status-code),
// each defaulting to the struct's value.
void RegisterGatewayFlags(flags::FlagSet& fs, GatewayOptions* o);
// InvalidArgument naming the flags when --deadline is above --max-deadline.
Status ValidateGatewayOptions(const GatewayOptions& o);

class Gateway {
 public:
  // `executor`: where each call's strand runs (see "Threads" above).
  Gateway(GatewayOptions options, AllocatorClient& allocator, WaiterRegistry& waiters,
          WaiterRegistry::Lookup lookup, prometheus::Registry& registry,
          boost::asio::any_io_executor executor);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // The ConnectionServer's asynchronous handler.
  void Handle(const server::HttpRequest& req, server::Responder respond);
  size_t InFlight() const { return in_flight_.load(); }
  // Refuse new requests from now on (503); accepted ones go on.
  void BeginDrain() { draining_.store(true); }
  bool Draining() const { return draining_.load(); }

 private:
  struct Call;
  struct Metrics;
  void Attempt(const std::shared_ptr<Call>& call);
  // Joins a call in flight with the same key on this replica; false when there is none.
  bool Join(const std::string& ns_key, const server::HttpRequest& req, server::Responder& respond);
  // The cached server holding the call's idempotency key, with the answer built from it.
  struct KeyHolder {
    policy::GameServerView gs;
    std::string body;
  };
  std::optional<KeyHolder> FindKeyHolder(const std::shared_ptr<Call>& call) const;
  // Waits on that server, its answer-by moved to this call's.
  void WaitOnKeyHolder(const std::shared_ptr<Call>& call, KeyHolder holder);
  // Waits on (or answers from) a cached server that holds the call's key; false when none.
  bool Resume(const std::shared_ptr<Call>& call);
  // After an allocation for a keyed call: when another server already holds the key, releases
  // the new one and waits on that one (true).
  bool Converge(const std::shared_ptr<Call>& call, const std::string& allocated);
  void WaitFor(const std::shared_ptr<Call>& call, std::string body, const std::string& name,
               const std::string& last_allocated);
  // Marks the server delivered, then answers (or, when the mark fails, allocates again).
  void Deliver(const std::shared_ptr<Call>& call, const std::string& ns, const std::string& name,
               const kube::ObjectPtr& seen, server::HttpResponse res);
  // Moves the server's answer-by to now while it is still the call's own (release_now).
  void Release(const std::shared_ptr<Call>& call, const std::string& ns, const std::string& name);
  void OnAllocated(const std::shared_ptr<Call>& call, AllocatorAnswer answer);
  void OnDecided(const std::shared_ptr<Call>& call, const std::string& response_body,
                 const std::string& gs_name, const std::string& last_allocated,
                 const std::string& ns, const Decision& d, const kube::ObjectPtr& obj);
  void OnClientGone(const std::shared_ptr<Call>& call);
  void ReportAbandoned(const std::shared_ptr<Call>& call, AbandonedAllocation a);
  server::HttpResponse NoServer(std::string_view message) const;
  void Retry(const std::shared_ptr<Call>& call, const std::string& what);
  void Finish(const std::shared_ptr<Call>& call, server::HttpResponse res);

  const GatewayOptions options_;
  const boost::asio::any_io_executor executor_;
  AllocatorClient& allocator_;
  WaiterRegistry& waiters_;
  const WaiterRegistry::Lookup lookup_;
  std::unique_ptr<Metrics> metrics_;
  std::atomic<size_t> in_flight_{0};
  std::atomic<bool> draining_{false};
  Mutex keys_mu_;
  std::map<std::string, std::weak_ptr<Call>> by_key_
      GUARDED_BY(keys_mu_);  // "<ns>/<key>" -> the call in flight
  // Every callback that uses the gateway is guarded by it: ended first by the destructor.
  runtime::Lifeline life_;
};

}  // namespace aw::gateway
