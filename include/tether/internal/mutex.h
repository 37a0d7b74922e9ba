// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: absl::Mutex that ThreadSanitizer can see, with lock annotations.
#ifndef TETHER_INTERNAL_MUTEX_H_
#define TETHER_INTERNAL_MUTEX_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tether/internal/tsan.h"

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

// An `absl::Mutex` for tether's own state, checked by clang's
// `-Wthread-safety` (use `ABSL_GUARDED_BY(mu_)` on the fields it guards and
// `ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)` on `...Locked` methods).
//
// Why not `absl::Mutex` itself: Debian's libabsl is not built with TSan, so
// TSan sees no happens-before edge through `absl::Mutex::Lock`/`Unlock` and
// reports every guarded field as a race. This wrapper adds the edges
// (a release before unlocking, an acquire after locking, on the mutex's
// address); without TSan it is exactly an `absl::Mutex`.
//
// Thread safety: like `absl::Mutex`. Not re-entrant.
class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_.Lock();
    TakeOver(this);
    ++mutex_detail::Held();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    --mutex_detail::Held();
    HandOff(this);
    mu_.Unlock();
  }
  // BasicLockable spelling, for `std::condition_variable_any`.
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { Lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { Unlock(); }
  // Tells the analysis (and, in debug builds, checks) that it is held.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() { mu_.AssertHeld(); }

 private:
  friend class CondVar;
  absl::Mutex mu_;
};

// Holds a `Mutex` for a scope, like `absl::MutexLock`.
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

// An `absl::CondVar` for a `Mutex`. Waits may wake spuriously: wait in a loop
// on the condition. Note: in abseil 20220623 a timed wait measures its
// timeout on the realtime clock (a wall-clock step lengthens or shortens
// it); code that waits on `steady_clock` uses `std::condition_variable_any`
// with the `Mutex` instead.
class CondVar {
 public:
  // Releases `mu`, waits for a signal, re-acquires `mu`.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    HandOff(mu);
    cv_.Wait(&mu->mu_);
    TakeOver(mu);
  }
  // As `Wait`, for at most `timeout` (which may be infinite). True when the
  // timeout expired.
  bool WaitWithTimeout(Mutex* mu, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    HandOff(mu);
    const bool expired = cv_.WaitWithTimeout(&mu->mu_, timeout);
    TakeOver(mu);
    return expired;
  }
  void Signal() { cv_.Signal(); }
  void SignalAll() { cv_.SignalAll(); }

 private:
  absl::CondVar cv_;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_MUTEX_H_
