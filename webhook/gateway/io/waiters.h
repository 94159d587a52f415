// WaiterRegistry: the requests waiting for their GameServer, keyed by name, woken by the one
// GameServer informer's events, each with a deadline timer. No thread per request: a waiter is a
// map entry and a timer on the executor given (the process's runtime::Dispatcher), or, without
// one, on the registry's single timer thread.
//
// Where the server is: agones-allocator's answer names the GameServer but not its namespace, and
// the allocator may put it in another namespace than the request's (a multi-cluster policy
// allocates in the policy's namespace). A waiter is therefore bound to a namespace by the
// allocation itself: the first copy of a GameServer with its name whose
// agones.dev/last-allocated equals this allocation's binds it to that copy's namespace. Before
// that, only copies in the request's namespace (`ns_hint`) are judged (an older copy waits; a
// newer allocation or a deletion there is a loss, as before); copies elsewhere are ignored.
//
// Promise:
//   - Wait() registers the waiter, then evaluates it at once against the informer's cache (so an
//     event that arrived before the registration is not missed); afterwards every OnAdd /
//     OnUpdate / OnDelete of that name re-evaluates it with gateway::Decide as above.
//   - `done` is called exactly once per Wait(): with the first non-kWait decision and the object
//     that decided it (on the informer's thread, which is the Kubernetes client's I/O thread, or
//     the caller's thread for the first check), with
//     {kWait, "deadline"} when the deadline passes first (on the timer executor), with
//     {kWait, <reason>} from Cancel() (on the caller's thread), or with {kWait, "stopped"} from
//     Stop(). `ns` is the bound namespace, else `ns_hint`. It must not block.
//   - Cancel() of a waiter that already completed does nothing.
//   - Waiting() is the number of registered waiters. Thread-safe.
//   - Stop() returns once no `done` runs on the timer executor any more and none will: with an
//     executor of its own, once the timer thread has ended; on a given executor, once a deadline's
//     `done` running there has returned (runtime::Lifeline; a deadline handler that runs later does
//     nothing, and every timer is cancelled, so the executor is left without work of the
//     registry's). It must not be called on the timer executor's thread (from a `done` called with
//     "deadline"): it would wait for itself, so it aborts the process with a message naming the
//     rule (runtime/io_thread.h).
//   - Safe by construction: the timer thread and the timer handlers hold the registry's shared
//     state (the timer thread a strong handle, the handlers weak ones), never the registry itself;
//     a waiter's timer keeps the io_context it was made on alive (its own; a given executor's
//     io_context must outlive the registry and its waiters: the dispatcher does).
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gateway/decision.h"
#include "kube/informer.h"
#include "runtime/lifeline.h"
#include "util/io/mutex.h"

namespace aw::gateway {

class WaiterRegistry final : public kube::InformerHandler {
 public:
  // Every cached GameServer with this name, in any namespace.
  using Lookup = std::function<std::vector<kube::ObjectPtr>(const std::string& name)>;
  using Done =
      std::function<void(const Decision&, const kube::ObjectPtr& object, const std::string& ns)>;
  struct Waiter;
  using Ticket = std::weak_ptr<Waiter>;

  // `executor`: where the deadline timers run (the process's dispatcher); empty: a timer thread
  // of the registry's own, started by Start().
  explicit WaiterRegistry(Lookup lookup, boost::asio::any_io_executor executor = {});
  ~WaiterRegistry() override;
  WaiterRegistry(const WaiterRegistry&) = delete;
  WaiterRegistry& operator=(const WaiterRegistry&) = delete;

  void Start() EXCLUDES(thread_mu_);  // the timer thread (nothing on a given executor)
  void Stop() EXCLUDES(thread_mu_);   // completes every waiter with "stopped"; idempotent

  Ticket Wait(const std::string& ns_hint, const std::string& name, std::string last_allocated,
              std::chrono::steady_clock::time_point deadline, Done done);
  void Cancel(const Ticket& ticket, const std::string& reason);
  size_t Waiting() const;

  void OnAdd(const kube::ObjectPtr& obj) override { Evaluate(obj, false); }
  void OnUpdate(const kube::ObjectPtr&, const kube::ObjectPtr& obj) override {
    Evaluate(obj, false);
  }
  void OnDelete(const kube::ObjectPtr& last_known) override;

 private:
  void Evaluate(const kube::ObjectPtr& obj, bool deleted);

  struct Timers;  // the timer executor: the given one, or the timer thread's io_context and guard
  struct State;   // the registered waiters, shared with the timer thread and handlers

  const Lookup lookup_;
  const std::shared_ptr<State> state_;
  Mutex thread_mu_;  // Start() and Stop() against each other
  std::thread thread_ GUARDED_BY(thread_mu_);
  std::atomic<std::thread::id> thread_id_{};  // the timer thread's, for Stop()'s contract
  // The deadline handlers' `done` calls (on a given executor, Stop() waits for them with it).
  runtime::Lifeline life_;
};

}  // namespace aw::gateway
