// Manager: runs the program's components ("runnables") in ordered groups and stops them in
// reverse, in the style of controller-runtime's manager (pkg/manager/runnable_group.go).
//
// Promise:
//   - Runnables are added before Run(), each to a group named at construction; groups start in
//     that order, and a group starts only once every runnable of the groups before it has called
//     RunContext::Ready() (a server listening, a cache synced).
//   - A runnable added with needs_leader runs only while this replica leads: SetLeader() records
//     the change and returns at once (it never waits, so a leader elector may call it from an
//     I/O thread); Run's thread applies the changes in order, one at a time. Gaining leadership
//     starts the leader runnables (after the groups have started). Losing it asks them to stop
//     and waits for them, at most the stop deadline (one still running then is logged and left
//     running); the groups keep running and the replica stays a candidate: a leader runnable may
//     run again at the next leadership. (controller-runtime's manager instead exits when it loses
//     the lease; here a replica that loses it keeps serving admission and its caches, and only
//     its leader work stops.) The manager's stop stops them too.
//   - Run(stop) returns when `stop` is requested or a runnable fails: returns a non-OK Status, or
//     returns at all without having been asked to stop. Then every running runnable is asked to
//     stop through its std::stop_token: leader runnables first, then the groups last to first,
//     each group waited for before the next, all within one deadline (`stop_deadline`).
//   - A runnable being stopped sees, through RunContext::StopDeadline(), the time by which the
//     whole stop must end (so a drain can use what is left of it rather than a deadline of its
//     own). OnStarted(f) runs f once, on Run's thread, when every group is up (before any leader
//     runnable starts); it is not run when Run stops or fails before that.
//   - A Service (a component whose work runs on threads it owns: a server's io threads, a watch
//     thread) takes no thread of the manager: Start() is called on Run's thread in group order
//     (OK = ready), Stop(deadline) on the stopping thread in reverse order; a non-OK Stop counts
//     as still running at the deadline. Runnables and services of one group start together
//     (services first) and stop together (services after the runnables were asked to stop).
//   - Run's result: OK after a requested stop within the deadline; else the first failure
//     ("<name>: <status>"); DeadlineExceeded naming the runnables still running at the deadline.
//     In that last case their threads still run: exit the process (the destructor would wait).
// Thread-safe: SetLeader may be called from any thread (typically the leader elector's callbacks,
// on the Kubernetes I/O thread); it does not block.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "util/io/mutex.h"
#include "util/status.h"

namespace aw::runtime {

class Manager;

// What a running runnable sees of the manager.
class RunContext {
 public:
  std::stop_token stop() const { return stop_; }
  // Reports that the runnable is up (idempotent); the next group waits for it.
  void Ready();
  // Once stop() is requested: the steady-clock time by which the manager's whole stop must end.
  // Before that: time_point::max().
  std::chrono::steady_clock::time_point StopDeadline() const;

 private:
  friend class Manager;
  RunContext(Manager* m, size_t slot, std::stop_token stop) : m_(m), slot_(slot), stop_(stop) {}
  Manager* m_;
  size_t slot_;
  std::stop_token stop_;
};

class Runnable {
 public:
  virtual ~Runnable() = default;
  virtual std::string Name() const = 0;
  // Runs until ctx.stop() is requested (then returns OK) or the component fails (then returns
  // the error). Must call ctx.Ready() once it serves.
  virtual Status Run(RunContext& ctx) = 0;
};

// A runnable from a function (for small components and tests).
std::unique_ptr<Runnable> MakeRunnable(std::string name, std::function<Status(RunContext&)> run);

class Service {
 public:
  virtual ~Service() = default;
  virtual std::string Name() const = 0;
  // Serving when it returns OK; an error is the service's failure (Stop is then not called).
  virtual Status Start() = 0;
  // Called once after a successful Start; returns by `deadline` (an error if it could not finish).
  virtual Status Stop(std::chrono::steady_clock::time_point deadline) = 0;
};

// A service from two functions.
std::unique_ptr<Service> MakeService(
    std::string name, std::function<Status()> start,
    std::function<Status(std::chrono::steady_clock::time_point)> stop);

struct RunnableOptions {
  std::string group;
  bool needs_leader = false;
};

class Manager {
 public:
  Manager(std::vector<std::string> groups, std::chrono::nanoseconds stop_deadline);
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // Before Run(). An unknown group is an InvalidArgument (the runnable is not added).
  Status Add(std::unique_ptr<Runnable> runnable, RunnableOptions options);
  Status Add(std::unique_ptr<Service> service, RunnableOptions options);

  Status Run(std::stop_token stop) EXCLUDES(mu_);

  // Before Run(): called once every group is up (see the promise above).
  void OnStarted(std::function<void()> f) EXCLUDES(mu_);

  // Leadership gained (true) or lost (false): recorded, applied by Run's thread (see the
  // promise above). Returns at once.
  void SetLeader(bool leader) EXCLUDES(mu_);

 private:
  friend class RunContext;
  struct Slot;

  Status AddSlot(std::unique_ptr<Slot> slot, const std::string& group) EXCLUDES(mu_);
  void Start(size_t i) REQUIRES(mu_);  // releases mu_ while a service starts
  void MarkReady(size_t i) EXCLUDES(mu_);
  bool GroupReady(size_t group) REQUIRES(mu_);
  std::string FirstFailure() REQUIRES(mu_);  // "" when none
  // On Run's thread: applies the oldest recorded change; starts or stops (and waits for) the
  // leader runnables. Releases mu_ while waiting.
  void ApplyLeadership() REQUIRES(mu_);
  // Asks the slots to stop and waits for them until `deadline`; names of those still running.
  // Releases mu_ while a service stops and while waiting.
  std::vector<std::string> StopAndWait(const std::vector<size_t>& slots,
                                       std::chrono::steady_clock::time_point deadline)
      REQUIRES(mu_);

  const std::vector<std::string> groups_;
  const std::chrono::nanoseconds stop_deadline_;
  Mutex mu_;
  CondVar cv_;  // signalled when a slot starts, becomes ready, fails or stops
  // The slots and every field of a Slot are guarded by mu_ (the analysis checks the vector; a
  // Slot's fields cannot name the manager's mutex). A slot's runnable and service pointers are
  // set before Run() and never change after.
  std::vector<std::unique_ptr<Slot>> slots_ GUARDED_BY(mu_);
  bool running_ GUARDED_BY(mu_) = false;             // Run() between start and stop
  bool leader_ GUARDED_BY(mu_) = false;              // applied by Run's thread
  bool leader_wish_ GUARDED_BY(mu_) = false;         // the last SetLeader()
  std::deque<bool> leader_changes_ GUARDED_BY(mu_);  // recorded, not yet applied (in order)
  std::function<void()> on_started_ GUARDED_BY(mu_);
};

}  // namespace aw::runtime
