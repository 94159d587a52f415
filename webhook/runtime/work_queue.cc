#include "runtime/work_queue.h"

namespace aw::runtime {

void WorkQueue::Add(const std::string& key) {
  {
    std::lock_guard lock(mu_);
    state_.Add(key);
  }
  cv_.notify_one();
}

void WorkQueue::AddAfter(const std::string& key, std::chrono::nanoseconds delay) {
  if (delay <= std::chrono::nanoseconds::zero()) {
    Add(key);
    return;
  }
  {
    std::lock_guard lock(mu_);
    state_.AddAfter(key, Clock::now() + delay);
    ++delays_changed_;
  }
  // A waiting worker may need an earlier wake-up than the one it sleeps for.
  cv_.notify_all();
}

std::chrono::milliseconds WorkQueue::AddRateLimited(const std::string& key) {
  std::chrono::milliseconds d;
  {
    std::lock_guard lock(mu_);
    d = state_.AddRateLimited(key, Clock::now());
    ++delays_changed_;
  }
  cv_.notify_all();
  return d;
}

void WorkQueue::Forget(const std::string& key) {
  std::lock_guard lock(mu_);
  state_.Forget(key);
}

int WorkQueue::Retries(const std::string& key) {
  std::lock_guard lock(mu_);
  return state_.Retries(key);
}

std::optional<std::string> WorkQueue::Get(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested() && !state_.ShuttingDown()) {
    state_.PromoteDue(Clock::now());
    if (auto key = state_.Pop()) {
      // Another key may be ready for another worker.
      if (state_.Ready() > 0) cv_.notify_one();
      return key;
    }
    // Wake for a ready key, a shutdown, or a change of the delayed keys (an earlier due time
    // than the one this worker sleeps until, or a first one when it sleeps without a timeout).
    const uint64_t seen = delays_changed_;
    auto ready = [this, seen] {
      return state_.ShuttingDown() || state_.Ready() > 0 || delays_changed_ != seen;
    };
    if (auto due = state_.NextDue()) {
      cv_.wait_until(lock, stop, *due, ready);
    } else {
      cv_.wait(lock, stop, ready);
    }
  }
  return std::nullopt;
}

void WorkQueue::Done(const std::string& key) {
  bool requeued;
  {
    std::lock_guard lock(mu_);
    size_t before = state_.Ready();
    state_.Done(key);
    requeued = state_.Ready() > before;
  }
  if (requeued) cv_.notify_one();
}

void WorkQueue::ShutDown() {
  {
    std::lock_guard lock(mu_);
    state_.ShutDown();
  }
  cv_.notify_all();
}

size_t WorkQueue::Ready() {
  std::lock_guard lock(mu_);
  return state_.Ready();
}

size_t WorkQueue::Delayed() {
  std::lock_guard lock(mu_);
  return state_.Delayed();
}

}  // namespace aw::runtime
