// WaiterRegistry: the requests waiting for their GameServer, keyed by namespace/name, woken by the
// one GameServer informer's events, each with a deadline timer. No thread per request: a waiter
// is a map entry and a timer on the registry's single timer thread.
//
// Promise:
//   - Wait() registers the waiter, then evaluates it at once against the informer's cache (so an
//     event that arrived before the registration is not missed); afterwards every OnUpsert /
//     OnDelete of that key re-evaluates it with gateway::Decide.
//   - `done` is called exactly once per Wait(): with the first non-kWait decision and the object
//     that decided it (on the informer thread, or the caller's thread for the first check), with
//     {kWait, "deadline"} when the deadline passes first (on the timer thread), or with
//     {kWait, "stopped"} from Stop(). It must not block (post work elsewhere).
//   - Waiting() is the number of registered waiters. Thread-safe.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/executor_work_guard.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "gateway/decision.h"
#include "kube/informer.h"

namespace aw::gateway {

class WaiterRegistry final : public kube::InformerHandler {
 public:
  using Lookup = std::function<kube::ObjectPtr(const std::string& ns, const std::string& name)>;
  using Done = std::function<void(const Decision&, const kube::ObjectPtr& object)>;

  explicit WaiterRegistry(Lookup lookup);
  ~WaiterRegistry() override;
  WaiterRegistry(const WaiterRegistry&) = delete;
  WaiterRegistry& operator=(const WaiterRegistry&) = delete;

  void Start();  // the timer thread
  void Stop();   // completes every waiter with "stopped"; idempotent

  void Wait(const std::string& ns, const std::string& name, std::string last_allocated,
            std::chrono::steady_clock::time_point deadline, Done done);
  size_t Waiting() const;

  void OnUpsert(const kube::ObjectPtr& obj) override;
  void OnDelete(const kube::ObjectPtr& last_known) override;

 private:
  struct Waiter;
  void Evaluate(const std::string& key, const kube::ObjectPtr& obj, bool deleted);
  // Removes `w` if still registered and completes it.
  void Finish(const std::shared_ptr<Waiter>& w, const Decision& d, const kube::ObjectPtr& obj);

  const Lookup lookup_;
  mutable std::mutex mu_;
  std::multimap<std::string, std::shared_ptr<Waiter>> waiters_;  // key ns/name
  boost::asio::io_context timers_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace aw::gateway
