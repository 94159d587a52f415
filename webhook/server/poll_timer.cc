#include "server/poll_timer.h"

#include <boost/asio/steady_timer.hpp>

#include "util/io/log.h"

namespace aw::server {

// Everything a pending handler touches; every field (the timer's operations included) under mu.
struct PollTimer::State {
  explicit State(boost::asio::any_io_executor ex, Poll p) : timer(ex), poll(std::move(p)) {}
  Mutex mu;
  boost::asio::steady_timer timer GUARDED_BY(mu);
  Poll poll GUARDED_BY(mu);  // empty once stopped
};

PollTimer::PollTimer(Poll poll) : poll_(std::move(poll)) {}

PollTimer::~PollTimer() { Stop(); }

void PollTimer::Start(boost::asio::any_io_executor executor,
                      std::chrono::milliseconds first_delay) {
  MutexLock lock(mu_);
  if (state_) return;
  state_ = std::make_shared<State>(std::move(executor), poll_);
  MutexLock state_lock(state_->mu);
  Arm(state_, first_delay);
}

void PollTimer::Stop() {
  std::shared_ptr<State> state;
  {
    MutexLock lock(mu_);
    state = std::move(state_);
  }
  if (!state) return;
  MutexLock state_lock(state->mu);  // waits for a poll in progress
  state->poll = nullptr;
  state->timer.cancel();
}

// Called with state->mu held (by Start and by the handler).
void PollTimer::Arm(const std::shared_ptr<State>& state,
                    std::chrono::milliseconds delay) NO_THREAD_SAFETY_ANALYSIS {
  state->timer.expires_after(delay);
  state->timer.async_wait([state](const boost::system::error_code& ec) {
    MutexLock lock(state->mu);
    if (ec || !state->poll) return;
    std::chrono::milliseconds next{1000};
    try {
      next = state->poll();
    } catch (const std::exception& e) {
      log::error("poll failed", {{"error", e.what()}});
    }
    Arm(state, next);
  });
}

}  // namespace aw::server
