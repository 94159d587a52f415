#include "runtime/core/work_queue_state.h"

#include <algorithm>

namespace aw::runtime {

void WorkQueueState::Add(const std::string& key) {
  if (shutting_down_) return;
  // An Add supersedes a pending delayed add of the same key.
  if (auto it = delayed_due_.find(key); it != delayed_due_.end()) {
    auto range = delayed_.equal_range(it->second);
    for (auto d = range.first; d != range.second; ++d) {
      if (d->second == key) {
        delayed_.erase(d);
        break;
      }
    }
    delayed_due_.erase(it);
  }
  if (processing_.count(key)) {
    dirty_.insert(key);
    return;
  }
  if (queued_.insert(key).second) queue_.push_back(key);
}

void WorkQueueState::AddAfter(const std::string& key, Clock::time_point due) {
  if (shutting_down_) return;
  if (queued_.count(key) || dirty_.count(key)) return;  // already ready (or will be)
  if (auto it = delayed_due_.find(key); it != delayed_due_.end()) {
    if (it->second <= due) return;  // the earlier due time wins
    auto range = delayed_.equal_range(it->second);
    for (auto d = range.first; d != range.second; ++d) {
      if (d->second == key) {
        delayed_.erase(d);
        break;
      }
    }
    it->second = due;
  } else {
    delayed_due_.emplace(key, due);
  }
  delayed_.emplace(due, key);
}

std::chrono::milliseconds WorkQueueState::AddRateLimited(const std::string& key,
                                                         Clock::time_point now) {
  int& n = retries_[key];
  std::chrono::milliseconds delay = limit_.initial;
  for (int i = 0; i < n && delay < limit_.max; ++i) delay *= 2;
  delay = std::min(delay, limit_.max);
  ++n;
  AddAfter(key, now + delay);
  return delay;
}

void WorkQueueState::Clear() {
  queue_.clear();
  queued_.clear();
  dirty_.clear();
  processing_.clear();
  delayed_.clear();
  delayed_due_.clear();
  retries_.clear();
  shutting_down_ = false;
}

void WorkQueueState::Forget(const std::string& key) { retries_.erase(key); }

int WorkQueueState::Retries(const std::string& key) const {
  auto it = retries_.find(key);
  return it == retries_.end() ? 0 : it->second;
}

void WorkQueueState::PromoteDue(Clock::time_point now) {
  while (!delayed_.empty() && delayed_.begin()->first <= now) {
    std::string key = std::move(delayed_.begin()->second);
    delayed_.erase(delayed_.begin());
    delayed_due_.erase(key);
    Add(key);
  }
}

std::optional<Clock::time_point> WorkQueueState::NextDue() const {
  if (delayed_.empty()) return std::nullopt;
  return delayed_.begin()->first;
}

std::optional<std::string> WorkQueueState::Pop() {
  if (shutting_down_ || queue_.empty()) return std::nullopt;
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  queued_.erase(key);
  processing_.insert(key);
  return key;
}

void WorkQueueState::Done(const std::string& key) {
  if (processing_.erase(key) == 0) return;
  if (dirty_.erase(key) && !shutting_down_) {
    if (queued_.insert(key).second) queue_.push_back(key);
  }
}

}  // namespace aw::runtime
