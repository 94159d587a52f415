// PollTimer: calls a function again and again on an existing io_context, without a thread of its
// own (the certificate and client CA pollers run on the process's dispatcher, with the health
// server).
//
// Promise: after Start(executor), `poll` runs on that executor after `first_delay`, and then again
// after the delay it returns, until Stop(). Polls never overlap. Stop() waits for a poll in
// progress, guarantees that no poll starts after it returned, and is idempotent; a stopped timer
// may be started again. The timer itself lives in state shared with its pending handler, so
// the PollTimer may be destroyed before the io_context and the io_context before it. Thread-safe.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <functional>
#include <memory>

#include "util/io/mutex.h"

namespace aw::server {

class PollTimer {
 public:
  using Poll = std::function<std::chrono::milliseconds()>;  // returns the delay to the next poll
  explicit PollTimer(Poll poll);
  ~PollTimer();  // Stop()
  PollTimer(const PollTimer&) = delete;
  PollTimer& operator=(const PollTimer&) = delete;

  void Start(boost::asio::any_io_executor executor, std::chrono::milliseconds first_delay)
      EXCLUDES(mu_);
  void Stop() EXCLUDES(mu_);

 private:
  struct State;
  static void Arm(const std::shared_ptr<State>& state, std::chrono::milliseconds delay);
  Poll poll_;
  Mutex mu_;
  std::shared_ptr<State> state_ GUARDED_BY(mu_);  // while started
};

}  // namespace aw::server
