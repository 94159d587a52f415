#include "server/handshake_gate.h"

#include <utility>

namespace aw::server {

bool HandshakeGate::Enter(Resume resume) {
  MutexLock lock(mu_);
  if (active_ < limit_) {
    ++active_;
    return true;
  }
  waiting_.push_back(std::move(resume));
  return false;
}

void HandshakeGate::Leave() {
  for (;;) {
    Resume next;
    {
      MutexLock lock(mu_);
      if (waiting_.empty()) {
        if (active_ > 0) --active_;
        return;
      }
      next = std::move(waiting_.front());
      waiting_.pop_front();
    }
    // The slot stays counted as held while it is handed over.
    if (next && next()) return;
  }
}

size_t HandshakeGate::Active() const {
  MutexLock lock(mu_);
  return active_;
}

size_t HandshakeGate::Waiting() const {
  MutexLock lock(mu_);
  return waiting_.size();
}

}  // namespace aw::server
