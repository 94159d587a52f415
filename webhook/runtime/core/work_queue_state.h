// WorkQueueState: the bookkeeping of a controller work queue, without threads or clocks.
//
// The semantics are those of client-go's workqueue (and Agones' workerqueue on top of it), made
// explicit and deterministic so that they can be tested row by row:
//   - Add(key): queues the key unless it is already queued. A key being processed (taken by Pop
//     and not yet Done) is marked dirty instead and queued again by Done, so one key is never
//     processed twice at once and no Add made during processing is lost.
//   - AddAfter(key, due): the key is added when `due` is reached (PromoteDue). A later AddAfter of
//     the same key keeps the earlier due time; an Add makes it ready at once.
//   - AddRateLimited(key, now): AddAfter(now + backoff), the backoff growing per key (initial,
//     2x, 4x, ... capped at max) until Forget(key).
//   - Pop(): the oldest ready key (FIFO), now processing. Done(key) ends processing.
//   - ShutDown(): from then on Pop returns nothing and adds are ignored; keys left are dropped
//     (a controller rebuilds its work from a re-list when it starts again).
// Time is a parameter (`now`, `due`), never read here. Not thread-safe: WorkQueue wraps it.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace aw::runtime {

using Clock = std::chrono::steady_clock;

struct RateLimit {
  std::chrono::milliseconds initial{100};
  std::chrono::milliseconds max{5000};
};

class WorkQueueState {
 public:
  explicit WorkQueueState(RateLimit limit = {}) : limit_(limit) {}

  void Add(const std::string& key);
  void AddAfter(const std::string& key, Clock::time_point due);
  // Returns the delay chosen for this retry.
  std::chrono::milliseconds AddRateLimited(const std::string& key, Clock::time_point now);
  // Forgets the key's retry history (after a success).
  void Forget(const std::string& key);
  // Retries recorded for the key since its last Forget.
  int Retries(const std::string& key) const;

  // Moves every delayed key due at or before `now` to the ready queue.
  void PromoteDue(Clock::time_point now);
  // The earliest due time of a delayed key, if any.
  std::optional<Clock::time_point> NextDue() const;

  std::optional<std::string> Pop();
  void Done(const std::string& key);

  // Forgets every key (ready, delayed, processing, dirty) and every retry history, and undoes a
  // ShutDown: the state of a new queue (a controller starting again, e.g. a new leader).
  void Clear();

  void ShutDown() { shutting_down_ = true; }
  bool ShuttingDown() const { return shutting_down_; }

  size_t Ready() const { return queue_.size(); }      // keys queued and ready
  size_t Delayed() const { return delayed_.size(); }  // keys waiting for their due time
  size_t Processing() const { return processing_.size(); }

 private:
  const RateLimit limit_;
  std::deque<std::string> queue_;           // ready keys, FIFO
  std::unordered_set<std::string> queued_;  // keys in queue_
  std::unordered_set<std::string> dirty_;   // added while processing: queued again by Done
  std::unordered_set<std::string> processing_;
  std::multimap<Clock::time_point, std::string> delayed_;           // due -> key
  std::unordered_map<std::string, Clock::time_point> delayed_due_;  // key -> due (one per key)
  std::unordered_map<std::string, int> retries_;
  bool shutting_down_ = false;
};

}  // namespace aw::runtime
