// ElasticTaskQueue: cpp-httplib's TaskQueue with one thread per connection, up to a bound.
//
// cpp-httplib serves a connection (all its keep-alive requests) on one task, so with its default
// fixed pool of 8 threads the ninth idle keep-alive connection starves new ones. This queue starts
// a worker whenever a task arrives and no worker is idle, up to `max_threads`; beyond that, tasks
// wait in FIFO order for a worker (and that wait is logged once per burst). Idle workers beyond
// `min_threads` exit after `idle_exit`. shutdown() runs every queued task and joins all workers.
//
// Not used by AdmissionServer any more (TlsConnectionServer parks connections in epoll and serves
// them from its own small worker pool); kept, with its unit tests, for httplib servers that need
// a growing pool.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

#include <httplib.h>

namespace aw::server {

class ElasticTaskQueue final : public httplib::TaskQueue {
 public:
  ElasticTaskQueue(size_t min_threads, size_t max_threads,
                   std::chrono::milliseconds idle_exit = std::chrono::seconds(60));
  ~ElasticTaskQueue() override;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

  size_t threads() const;
  size_t busy() const;

 private:
  void Work(std::list<std::thread>::iterator self);
  void ReapExited();  // joins workers that exited on idle; mu_ held

  const size_t min_threads_, max_threads_;
  const std::chrono::milliseconds idle_exit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::list<std::thread> workers_;
  std::vector<std::list<std::thread>::iterator> exited_;
  size_t idle_ = 0;
  bool shutdown_ = false;
  bool saturated_logged_ = false;
};

}  // namespace aw::server
