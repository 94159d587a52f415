// ThreadPool: a fixed number of worker threads running posted tasks in FIFO order.
//
// Promise: Post() never blocks on a task and may be called from any thread, including from a
// task. Tasks run on one of the `threads` workers (at least one), each task exactly once, in the
// order posted when there is one worker. The destructor runs every task already posted, then
// joins the workers; a task posted during destruction (by a running task) also runs. An
// exception escaping a task ends the process (std::terminate): tasks report errors as values.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "util/io/mutex.h"

namespace aw::runtime {

class ThreadPool {
 public:
  explicit ThreadPool(size_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Post(std::function<void()> task) EXCLUDES(mu_);
  size_t Threads() const { return workers_.size(); }

 private:
  void Work() EXCLUDES(mu_);

  Mutex mu_;
  CondVar cv_;  // signalled on Post and on closing
  std::deque<std::function<void()>> tasks_ GUARDED_BY(mu_);
  bool closing_ GUARDED_BY(mu_) = false;
  std::vector<std::jthread> workers_;
};

}  // namespace aw::runtime
