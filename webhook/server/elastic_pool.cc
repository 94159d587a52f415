#include "server/elastic_pool.h"

#include <utility>

#include "util/log.h"

namespace aw::server {

ElasticTaskQueue::ElasticTaskQueue(size_t min_threads, size_t max_threads,
                                   std::chrono::milliseconds idle_exit)
    : min_threads_(min_threads), max_threads_(std::max<size_t>(1, max_threads)), idle_exit_(idle_exit) {}

ElasticTaskQueue::~ElasticTaskQueue() { shutdown(); }

void ElasticTaskQueue::enqueue(std::function<void()> fn) {
  std::unique_lock lock(mu_);
  ReapExited();
  jobs_.push_back(std::move(fn));
  if (idle_ >= jobs_.size()) {
    cv_.notify_one();
    return;
  }
  if (workers_.size() < max_threads_) {
    workers_.emplace_back();
    auto it = std::prev(workers_.end());
    *it = std::thread([this, it] { Work(it); });
    return;
  }
  if (!saturated_logged_) {
    saturated_logged_ = true;
    log::warn("connection limit reached; new connections wait for a free worker",
              {{"max_connections", std::to_string(max_threads_)},
               {"waiting", std::to_string(jobs_.size())}});
  }
  cv_.notify_one();
}

void ElasticTaskQueue::Work(std::list<std::thread>::iterator self) {
  std::unique_lock lock(mu_);
  for (;;) {
    ++idle_;
    bool ready = cv_.wait_for(lock, idle_exit_, [this] { return !jobs_.empty() || shutdown_; });
    --idle_;
    if (!ready) {
      if (workers_.size() - exited_.size() > min_threads_) {
        exited_.push_back(self);  // joined by the next enqueue or by shutdown
        return;
      }
      continue;
    }
    if (jobs_.empty()) return;  // shutdown with nothing left to run
    auto fn = std::move(jobs_.front());
    jobs_.pop_front();
    if (jobs_.empty()) saturated_logged_ = false;
    lock.unlock();
    fn();
    fn = nullptr;
    lock.lock();
  }
}

void ElasticTaskQueue::ReapExited() {
  for (auto it : exited_) {
    if (it->joinable()) it->join();
    workers_.erase(it);
  }
  exited_.clear();
}

void ElasticTaskQueue::shutdown() {
  std::list<std::thread> workers;
  {
    std::lock_guard lock(mu_);
    shutdown_ = true;
    workers.swap(workers_);
    exited_.clear();
  }
  cv_.notify_all();
  for (auto& t : workers) {
    if (t.joinable()) t.join();
  }
}

size_t ElasticTaskQueue::threads() const {
  std::lock_guard lock(mu_);
  return workers_.size() - exited_.size();
}

size_t ElasticTaskQueue::busy() const {
  std::lock_guard lock(mu_);
  return workers_.size() - exited_.size() - idle_;
}

}  // namespace aw::server
