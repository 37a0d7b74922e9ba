// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: the mutex and condition variable of tether's own state, with lock
// annotations.
#ifndef TETHER_INTERNAL_MUTEX_H_
#define TETHER_INTERNAL_MUTEX_H_

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

namespace tether {
namespace internal {

namespace mutex_detail {
inline int& Held() {
  static thread_local int held = 0;
  return held;
}
}  // namespace mutex_detail

// How many tether `Mutex`es the calling thread holds now. Tether calls user
// code (observers, callbacks, sinks) and may call a `Clock` with or without
// its locks held; a test double that runs other work re-entrantly (the
// simulator's clock, standing for another thread) may do so only where this
// is 0, since running tether code under one of its own locks would deadlock.
inline int LocksHeldByThisThread() { return mutex_detail::Held(); }

// A `std::mutex` for tether's own state, checked by clang's
// `-Wthread-safety` (use `ABSL_GUARDED_BY(mu_)` on the fields it guards and
// `ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)` on `...Locked` methods).
//
// Why not `absl::Mutex`: a system abseil built without `NDEBUG` (Debian's
// is) runs its deadlock detection on every `Lock`, under one process-wide
// spin lock: every lock of every stream, on every thread, would queue there
// (about a sixth of the simulator's instructions). And a system
// abseil not built with TSan hides its happens-before edges from TSan. A
// `std::mutex` has neither problem; lock-order inversions are still caught,
// by TSan's own deadlock detector in the TSan build.
//
// Thread safety: like `std::mutex`. Not re-entrant.
class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_.lock();
    ++mutex_detail::Held();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    --mutex_detail::Held();
    mu_.unlock();
  }
  // BasicLockable spelling, for `std::condition_variable_any`.
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { Lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { Unlock(); }
  // Tells the analysis that it is held (no run-time check).
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a `Mutex` for a scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable for a `Mutex`. Waits may wake spuriously: wait in a
// loop on the condition. Timed waits measure on `steady_clock`.
class CondVar {
 public:
  // Releases `mu`, waits for a signal, re-acquires `mu`.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> held(mu->mu_, std::adopt_lock);
    cv_.wait(held);
    held.release();
  }
  // As `Wait`, for at most `timeout` (which may be infinite). True when the
  // timeout expired. A wait longer than a day wakes after a day (as a
  // spurious wake-up), so no wait converts a huge duration to `std::chrono`.
  bool WaitWithTimeout(Mutex* mu, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const bool capped = timeout > kLongestWait;
    const absl::Duration wait =
        std::max(absl::ZeroDuration(), capped ? kLongestWait : timeout);
    std::unique_lock<std::mutex> held(mu->mu_, std::adopt_lock);
    const bool timed_out = cv_.wait_for(held, absl::ToChronoNanoseconds(
                                                  wait)) ==
                           std::cv_status::timeout;
    held.release();
    return timed_out && !capped;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  static constexpr absl::Duration kLongestWait = absl::Hours(24);
  std::condition_variable cv_;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_MUTEX_H_
