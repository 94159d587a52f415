// Lifeline: lets a component's asynchronous callbacks reach it only while it is alive, so a
// callback left in some io_context's queue when the component goes cannot touch freed memory.
//
// Promise:
//   - Guard(f) wraps `f` (a callback that uses the component): the wrapper holds the lifeline's
//     shared state, not the component; called, it runs `f` only if End() has not begun, and End()
//     waits for every `f` running. Called after End(), it does nothing. Guarded callbacks may run
//     inside one another (re-entrant), on any threads.
//   - End() (the component's destructor, first thing) marks the component gone and returns once no
//     guarded `f` runs. Idempotent. Called from inside a guarded `f` (it would wait for itself), it
//     aborts with a message naming the rule (runtime/io_thread.h) instead of hanging.
#pragma once

#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "util/io/mutex.h"

namespace aw::runtime {

class Lifeline {
 public:
  struct State {
    Mutex mu;
    CondVar cv;
    bool ended GUARDED_BY(mu) = false;
    std::vector<std::thread::id> running GUARDED_BY(mu);  // one entry per guarded f in progress

    bool Enter() EXCLUDES(mu);
    void Leave() EXCLUDES(mu);
  };

  Lifeline() : state_(std::make_shared<State>()) {}
  ~Lifeline() { End(); }
  Lifeline(const Lifeline&) = delete;
  Lifeline& operator=(const Lifeline&) = delete;

  template <typename F>
  auto Guard(F f) const {
    return [state = state_, f = std::move(f)](auto&&... args) mutable {
      if (!state->Enter()) return;
      f(std::forward<decltype(args)>(args)...);
      state->Leave();
    };
  }
  void End();

 private:
  const std::shared_ptr<State> state_;
};

}  // namespace aw::runtime
