#include "runtime/lifeline.h"

#include <algorithm>

#include "runtime/io_thread.h"

namespace aw::runtime {

bool Lifeline::State::Enter() {
  MutexLock lock(mu);
  if (ended) return false;
  running.push_back(std::this_thread::get_id());
  return true;
}

void Lifeline::State::Leave() {
  {
    MutexLock lock(mu);
    running.erase(std::find(running.begin(), running.end(), std::this_thread::get_id()));
  }
  cv.SignalAll();
}

void Lifeline::End() {
  State& s = *state_;
  MutexLock lock(s.mu);
  s.ended = true;
  if (std::find(s.running.begin(), s.running.end(), std::this_thread::get_id()) !=
      s.running.end()) {
    DieBrokenContract(
        "Lifeline::End (a component's destruction) called from inside one of its guarded "
        "callbacks: it waits for them and would never return");
  }
  s.cv.Wait(s.mu, [&s]() REQUIRES(s.mu) { return s.running.empty(); });
}

}  // namespace aw::runtime
