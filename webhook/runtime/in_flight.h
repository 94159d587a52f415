// InFlightLimit: at most N asynchronous operations in flight, the others waiting their turn (first
// in, first out), without a thread of its own: the gateway's delivery-mark writes
// (--delivery-workers) are its user.
//
// Promise:
//   - Submit(op) runs op(release) at once, on the calling thread, when fewer than `limit`
//     operations are in flight; else op waits and runs later on the thread that frees a slot.
//     An operation holds its slot until it calls its `release` (exactly once, from any thread,
//     typically the callback that ends its asynchronous call); release() then runs the next
//     waiting operation, on that thread, before returning.
//   - WaitIdle() blocks until nothing is in flight or waiting (not from a thread that must call a
//     release: it would wait forever). The destructor calls it: the owner's operations end before
//     what they use goes away.
//   - InFlight() and Waiting() are for metrics and tests. Thread-safe.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>

#include "util/io/mutex.h"

namespace aw::runtime {

class InFlightLimit {
 public:
  using Release = std::function<void()>;
  using Op = std::function<void(Release release)>;

  explicit InFlightLimit(size_t limit);
  ~InFlightLimit();
  InFlightLimit(const InFlightLimit&) = delete;
  InFlightLimit& operator=(const InFlightLimit&) = delete;

  void Submit(Op op) EXCLUDES(mu_);
  void WaitIdle() EXCLUDES(mu_);
  size_t InFlight() const EXCLUDES(mu_);
  size_t Waiting() const EXCLUDES(mu_);

 private:
  // Runs `op` in a slot already counted (and, on this thread, each op a release hands the slot
  // on to meanwhile).
  void Run(Op op) EXCLUDES(mu_);
  void Done() EXCLUDES(mu_);

  const size_t limit_;
  mutable Mutex mu_;
  CondVar idle_cv_;  // signalled when nothing is in flight or waiting any more
  size_t in_flight_ GUARDED_BY(mu_) = 0;
  std::deque<Op> waiting_ GUARDED_BY(mu_);
};

}  // namespace aw::runtime
