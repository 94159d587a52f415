// Mutex, MutexLock, CondVar: std::mutex and std::condition_variable_any with clang thread-safety
// capabilities (util/thread_annotations.h), in the style of LevelDB's port::Mutex / port::CondVar.
//
// Promise: the same behaviour as the std types they wrap (no extra state, no extra cost beyond an
// inline call), plus compile-time checking under clang -Wthread-safety: a field declared
// `int n GUARDED_BY(mu_);` may be touched only where `mu_` is held, through MutexLock (scoped) or
// Lock()/Unlock(). CondVar waits on a held Mutex: the wait releases it while asleep and holds it
// again on return, as std::condition_variable does; a predicate passed to a wait runs with the
// mutex held, so a lambda predicate reading guarded fields is written `[&]() REQUIRES(mu_) {...}`.
// A wait with a std::stop_token also wakes when stop is requested (condition_variable_any).
// SharedMutex / ReaderMutexLock wrap std::shared_mutex the same way.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <stop_token>

#include "util/thread_annotations.h"

namespace aw {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // Tells the analysis the caller holds the mutex where it cannot see it (no run-time check).
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` from construction to destruction; Unlock()/Lock() release and retake it in between
// (the destructor releases it only if held).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    held_ = false;
    mu_.Unlock();
  }
  void Lock() ACQUIRE() {
    mu_.Lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// A condition variable used with one Mutex at a time. Every wait requires the mutex held.
// The waits are not analysed inside (they hand the held std::mutex to the standard library and
// take it back, which the analysis cannot follow); their callers are.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

  // Sleeps until signalled (or spuriously woken).
  void Wait(Mutex& mu) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    Adopted lock(mu);
    cv_.wait(lock.lk);
  }
  // Sleeps until pred() is true.
  template <typename Pred>
  void Wait(Mutex& mu, Pred pred) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    Adopted lock(mu);
    cv_.wait(lock.lk, std::move(pred));
  }
  // Sleeps until pred() is true or stop is requested; returns pred().
  template <typename Pred>
  bool Wait(Mutex& mu, std::stop_token stop, Pred pred) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    Adopted lock(mu);
    return cv_.wait(lock.lk, std::move(stop), std::move(pred));
  }
  // Sleeps until pred() is true or `deadline` passes; returns pred().
  template <typename Clock, typename Duration, typename Pred>
  bool WaitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline, Pred pred)
      REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    Adopted lock(mu);
    return cv_.wait_until(lock.lk, deadline, std::move(pred));
  }
  // The same, also woken when stop is requested.
  template <typename Clock, typename Duration, typename Pred>
  bool WaitUntil(Mutex& mu, std::stop_token stop,
                 const std::chrono::time_point<Clock, Duration>& deadline, Pred pred)
      REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    Adopted lock(mu);
    return cv_.wait_until(lock.lk, std::move(stop), deadline, std::move(pred));
  }
  // Sleeps until pred() is true or `timeout` has passed; returns pred().
  template <typename Rep, typename Period, typename Pred>
  bool WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout, Pred pred)
      REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    Adopted lock(mu);
    return cv_.wait_for(lock.lk, timeout, std::move(pred));
  }
  // The same, also woken when stop is requested.
  template <typename Rep, typename Period, typename Pred>
  bool WaitFor(Mutex& mu, std::stop_token stop, const std::chrono::duration<Rep, Period>& timeout,
               Pred pred) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    Adopted lock(mu);
    return cv_.wait_for(lock.lk, std::move(stop), timeout, std::move(pred));
  }

 private:
  // A unique_lock over the already-held std::mutex that leaves it held when it goes away.
  struct Adopted {
    explicit Adopted(Mutex& mu) : lk(mu.mu_, std::adopt_lock) {}
    ~Adopted() { lk.release(); }
    std::unique_lock<std::mutex> lk;
  };
  std::condition_variable_any cv_;
};

class CAPABILITY("shared mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  void LockShared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void UnlockShared() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds `mu` exclusively for its lifetime.
class SCOPED_CAPABILITY WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~WriterMutexLock() RELEASE() { mu_.Unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex& mu_;
};

// Holds `mu` shared for its lifetime.
class SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex& mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_.LockShared(); }
  ~ReaderMutexLock() RELEASE() { mu_.UnlockShared(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex& mu_;
};

}  // namespace aw
