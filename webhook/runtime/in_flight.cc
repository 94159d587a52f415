#include "runtime/in_flight.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>

namespace aw::runtime {
namespace {

// The operations this thread is to run, while an outer Run on it drains them: a release called
// inside an operation hands the slot on without recursing (thousands of operations that end at
// once, as with a fake transport, cost no stack).
thread_local std::deque<std::pair<InFlightLimit*, InFlightLimit::Op>>* tl_pending = nullptr;

}  // namespace

InFlightLimit::InFlightLimit(size_t limit) : limit_(std::max<size_t>(1, limit)) {}

InFlightLimit::~InFlightLimit() { WaitIdle(); }

void InFlightLimit::Submit(Op op) {
  {
    MutexLock lk(mu_);
    if (in_flight_ >= limit_) {
      waiting_.push_back(std::move(op));
      return;
    }
    ++in_flight_;
  }
  Run(std::move(op));
}

void InFlightLimit::Run(Op op) {
  if (tl_pending != nullptr) {
    tl_pending->emplace_back(this, std::move(op));
    return;
  }
  std::deque<std::pair<InFlightLimit*, Op>> pending;
  tl_pending = &pending;
  pending.emplace_back(this, std::move(op));
  while (!pending.empty()) {
    InFlightLimit* self = pending.front().first;
    Op next = std::move(pending.front().second);
    pending.pop_front();
    // A release called twice would free someone else's slot: the second call does nothing.
    auto once = std::make_shared<std::atomic<bool>>(false);
    next([self, once] {
      if (!once->exchange(true)) self->Done();
    });
  }
  tl_pending = nullptr;
}

void InFlightLimit::Done() {
  Op next;
  {
    MutexLock lk(mu_);
    if (waiting_.empty()) {
      --in_flight_;
      // The last touch of `this` on this path: WaitIdle (and so the destructor) may return as
      // soon as the lock is released.
      if (in_flight_ == 0) idle_cv_.SignalAll();
      return;
    }
    next = std::move(waiting_.front());  // the slot passes to it, still counted
    waiting_.pop_front();
  }
  Run(std::move(next));
}

void InFlightLimit::WaitIdle() {
  MutexLock lk(mu_);
  idle_cv_.Wait(mu_, [this]() REQUIRES(mu_) { return in_flight_ == 0 && waiting_.empty(); });
}

size_t InFlightLimit::InFlight() const {
  MutexLock lk(mu_);
  return in_flight_;
}

size_t InFlightLimit::Waiting() const {
  MutexLock lk(mu_);
  return waiting_.size();
}

}  // namespace aw::runtime
