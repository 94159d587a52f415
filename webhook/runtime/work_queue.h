// WorkQueue: the thread-safe, blocking controller work queue over WorkQueueState.
//
// Promise: the semantics of WorkQueueState (one item in flight per key, dirty re-queue, delayed
// and rate-limited adds, Forget), with the steady clock as time source and workers that block in
// Get() until a key is ready. Get() returns std::nullopt when the queue is shut down or the
// caller's stop_token is requested; every key it returns must be passed to Done() once processed.
// Any number of producer and worker threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>

#include "runtime/core/work_queue_state.h"

namespace aw::runtime {

class WorkQueue {
 public:
  explicit WorkQueue(RateLimit limit = {}) : state_(limit) {}
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Add(const std::string& key);
  void AddAfter(const std::string& key, std::chrono::nanoseconds delay);
  std::chrono::milliseconds AddRateLimited(const std::string& key);
  void Forget(const std::string& key);
  int Retries(const std::string& key);

  std::optional<std::string> Get(std::stop_token stop);
  void Done(const std::string& key);

  // Wakes every blocked Get(); later adds are ignored.
  void ShutDown();

  size_t Ready();
  size_t Delayed();

 private:
  std::mutex mu_;
  std::condition_variable_any cv_;
  WorkQueueState state_;
  uint64_t delays_changed_ = 0;  // bumped by every delayed add; guarded by mu_
};

}  // namespace aw::runtime
