// HandshakeGate: at most `limit` TLS handshakes in progress at once on a listener; the others
// wait their turn in arrival order.
//
// Why: a handshake in progress holds OpenSSL's handshake state and record buffers (tens of KiB),
// freed when it ends; 1,000 clients connecting at once would otherwise hold it 1,000 times over,
// and the heap keeps that peak long after. Handshakes are CPU-bound on a few io threads, so
// running more of them at once does not make them finish sooner.
//
// Promise (thread-safe):
//   - Enter(resume) grants a slot at once (returns true; `resume` is dropped) while fewer than
//     `limit` are held; otherwise it queues `resume` and returns false;
//   - Leave() gives the slot back. If someone is waiting, the slot passes to the oldest waiter:
//     its `resume` is called (outside the gate's lock, on the caller's thread) and returns true
//     when it took the slot, false when its connection is gone (then the next waiter is tried);
//   - `resume` must not block and must not call Enter or Leave itself (post the work instead).
#pragma once

#include <cstddef>
#include <deque>
#include <functional>

#include "util/io/mutex.h"

namespace aw::server {

class HandshakeGate {
 public:
  using Resume = std::function<bool()>;

  explicit HandshakeGate(size_t limit) : limit_(limit == 0 ? 1 : limit) {}
  HandshakeGate(const HandshakeGate&) = delete;
  HandshakeGate& operator=(const HandshakeGate&) = delete;

  bool Enter(Resume resume) EXCLUDES(mu_);
  void Leave() EXCLUDES(mu_);  // runs a waiting Resume without mu_ held

  size_t Active() const EXCLUDES(mu_);
  size_t Waiting() const EXCLUDES(mu_);

 private:
  const size_t limit_;
  mutable Mutex mu_;
  size_t active_ GUARDED_BY(mu_) = 0;
  std::deque<Resume> waiting_ GUARDED_BY(mu_);
};

}  // namespace aw::server
