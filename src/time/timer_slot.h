// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Internal: one timer that its owner arms, re-arms and cancels under its own
// lock, with stale firings ignored by construction.
#ifndef TETHER_SRC_TIME_TIMER_SLOT_H_
#define TETHER_SRC_TIME_TIMER_SLOT_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>

#include "absl/time/time.h"
#include "tether/clock.h"
#include "tether/internal/visibility.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

// The rule: a slot has at most one pending firing. `Arm` replaces it (the
// one pending is cancelled), `Cancel` is idempotent, and a firing that was
// replaced or cancelled while already on its way (the clock's `Cancel` lost
// the race) is stale: `Claim` returns false for it, so the owner never acts
// on it. Each arming gets a new `Shot`, which the firing hands back.
//
// Threads: none of its own. The slot is guarded by its owner's lock: `Arm`,
// `Cancel` and `Claim` are called with that lock held (the clock never runs
// a callback inside `RunAfter` or `Cancel`, so that is safe). The firing
// runs on the clock's thread and must take the owner's lock before `Claim`.
//
//   // under mu_:
//   slot_.Arm(*clock_, delay, [weak](TimerSlot::Shot shot) {
//     if (auto self = weak.lock()) self->OnTimer(shot);
//   });
//   void OnTimer(TimerSlot::Shot shot) {
//     MutexLock lock(&mu_);
//     if (!slot_.Claim(shot)) return;  // replaced or cancelled meanwhile
//     ...
//   }
//
// 16 bytes and no clock pointer (the owner passes its clock): a stream keeps
// several of these per attempt.
class TimerSlot {
 public:
  // Which arming a firing belongs to.
  using Shot = std::uint64_t;

  TimerSlot() = default;
  TimerSlot(const TimerSlot&) = delete;
  TimerSlot& operator=(const TimerSlot&) = delete;

  // Cancels the pending firing if any, then runs `fire(shot)` after `delay`
  // (negative: as zero) on the clock's thread.
  void Arm(Clock& clock, absl::Duration delay, std::function<void(Shot)> fire) {
    Cancel(clock);
    const Shot shot = ++generation_;
    id_ = clock.RunAfter(std::max(delay, absl::ZeroDuration()),
                         [fire = std::move(fire), shot] { fire(shot); });
  }

  // No firing of any earlier arming will be claimed. Idempotent.
  void Cancel(Clock& clock) {
    if (id_ != 0) clock.Cancel(id_);
    id_ = 0;
    ++generation_;  // a firing already on its way is stale now
  }

  // From a firing, under the owner's lock: true (and the slot is disarmed)
  // when `shot` is the arming in place; false when it was replaced or
  // cancelled since.
  bool Claim(Shot shot) {
    if (id_ == 0 || shot != generation_) return false;
    id_ = 0;
    return true;
  }

  // Whether a firing is pending.
  bool armed() const { return id_ != 0; }

 private:
  Clock::TimerId id_ = 0;
  Shot generation_ = 0;
};

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_TIME_TIMER_SLOT_H_
