// GameServerMarks: the allocation gateway's writes on the GameServers it allocated
// (docs/gateway.md, "No server lost"), as JSON patches by the gateway's own ServiceAccount.
//
// Promise:
//   - MarkDelivered(ns, name, at, done): writes allocating.agones.dev/delivered = `at` if the
//   server is
//     still Allocated (gateway/delivery.h, DeliveredPatch); `done` gets Ok, or the error (then the
//     server was released meanwhile, or the API server could not be reached: the caller must not
//     send the server to its client). `done` runs on the Kubernetes client's I/O thread (it must
//     not block).
//   - ReleaseNow(ns, name, expected): answer-by = now while it is still `expected` (the releasing
//     call's own answer-by: a retry that took the server over keeps it), when the client is gone,
//     the deadline passed or the gateway is shutting down:
//     the resolver releases the server after its grace instead of at the request's deadline.
//   - Undeliver(ns, name, at): removes `delivered` while it is still `at` (a later call's mark is
//     kept: the writes run on a pool, out of order) and sets answer-by = now (the answer was not
//     written to the client).
//   - ExtendAnswerBy(ns, name, answer_by): answer-by = `answer_by` (a retry with the same
//     idempotency key now waits on the server).
//   The three fire-and-forget writes are tried up to 3 times on a retryable error and logged when
//   they fail; if one is lost, the resolver still releases the server at its earlier answer-by
//   + grace (or never, once `delivered` is written and Undeliver fails: logged as an error).
//   Every write is a chain of asynchronous calls on the Kubernetes client (no thread waits for
//   one), at most `workers` (--delivery-workers) in flight, the others waiting their turn in
//   order. Thread-safe. The destructor waits for the writes already submitted (each bounded by
//   the kube client's per-call timeout), so a SIGTERM's releases are sent before the process
//   exits; on the Kubernetes client's I/O thread (where it would wait for ever) it aborts with a
//   message naming the rule (runtime/io_thread.h).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "gateway/io/gateway.h"
#include "kube/client.h"
#include "policy/gameserver.h"
#include "runtime/in_flight.h"
#include "util/flags.h"
#include "util/status.h"

namespace aw::gateway {

// --delivery-workers: the delivery-mark writes in flight at most (the constructor's `workers`).
void RegisterDeliveryFlags(flags::FlagSet& fs, size_t* workers);

class GameServerMarks {
 public:
  GameServerMarks(kube::Client& client, size_t workers);
  ~GameServerMarks();
  GameServerMarks(const GameServerMarks&) = delete;
  GameServerMarks& operator=(const GameServerMarks&) = delete;

  // The first write uses the object as the caller saw it (mark.resource_version/delivered, one
  // call); a conflict, or no view, reads the object first.
  void MarkDelivered(const DeliveryMark& mark, std::function<void(Status)> done);
  void ReleaseNow(const std::string& ns, const std::string& name, const std::string& expected);
  void Undeliver(const std::string& ns, const std::string& name, const std::string& at);
  void ExtendAnswerBy(const std::string& ns, const std::string& name, const std::string& answer_by);

 private:
  // One compare-and-swap edit (marks.cc, SwapOp); `first`: the object as the caller saw it,
  // used for the first attempt instead of a read.
  void Swap(const std::string& ns, const std::string& name,
            std::function<std::string(const policy::GameServerView&)> build,
            std::optional<policy::GameServerView> first, std::function<void(Status)> done);
  void Write(const std::string& what, const std::string& ns, const std::string& name,
             std::string patch);

  kube::Client& client_;
  runtime::InFlightLimit limit_;  // last member: waited for first, while the client is there
};

}  // namespace aw::gateway
