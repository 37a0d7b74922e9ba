// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_TESTING_FAKE_CLOCK_H_
#define TETHER_TESTING_FAKE_CLOCK_H_

#include <cstddef>
#include <functional>
#include <mutex>
#include <utility>

#include "absl/time/time.h"
#include "tether/clock.h"
#include "tether/internal/timer_queue.h"

namespace tether {
namespace fakes {

// A `Clock` that moves only when a test says so.
//
// `AdvanceBy` moves time forward and runs every timer that falls due, in due
// order, on the calling thread, each with `Now()` equal to its due time.
// Timers scheduled by a callback for a time within the advance also run.
// Nothing ever sleeps.
//
// Thread safety: all methods may be called concurrently; callbacks run
// without the clock's lock held, so they may schedule and cancel timers.
//
//   tether::fakes::FakeClock clock;
//   clock.RunAfter(absl::Seconds(1), [&] { fired = true; });
//   clock.AdvanceBy(absl::Seconds(1));  // fired == true
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch() + absl::Hours(1))
      : now_(start) {}

  absl::Time Now() override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }

  TimerId RunAfter(absl::Duration delay, std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (delay < absl::ZeroDuration()) delay = absl::ZeroDuration();
    return timers_.Add(now_ + delay, std::move(fn));
  }

  bool Cancel(TimerId id) override {
    std::function<void()> dropped;  // destroyed with no lock held
    std::lock_guard<std::mutex> lock(mu_);
    return timers_.Cancel(id, &dropped);
  }

  // Moves time forward by `d` (>= 0), running due timers in order.
  void AdvanceBy(absl::Duration d) { AdvanceTo(Now() + d); }

  // Moves time forward to `t`, running due timers in order. Does nothing to
  // the time if `t` is in the past, but still runs timers due now.
  void AdvanceTo(absl::Time t) {
    for (;;) {
      std::function<void()> fn;
      {
        std::lock_guard<std::mutex> lock(mu_);
        absl::Time due;
        if (!timers_.TakeDue(t, &due, &fn)) {
          if (t > now_) now_ = t;
          return;
        }
        if (due > now_) now_ = due;
      }
      fn();
    }
  }

  // Runs the timers that are due now (zero-delay timers), without moving time.
  void RunDue() { AdvanceBy(absl::ZeroDuration()); }

  // How many timers are waiting.
  std::size_t PendingTimers() {
    std::lock_guard<std::mutex> lock(mu_);
    return timers_.size();
  }

  // The due time of the earliest waiting timer, or InfiniteFuture.
  absl::Time NextDue() {
    std::lock_guard<std::mutex> lock(mu_);
    return timers_.NextDue();
  }

  // Advances to the earliest waiting timer and runs everything due then.
  // Returns false when no timer was waiting.
  bool AdvanceToNextTimer() {
    absl::Time next = NextDue();
    if (next == absl::InfiniteFuture()) return false;
    AdvanceTo(next);
    return true;
  }

 private:
  std::mutex mu_;
  absl::Time now_;
  internal::TimerQueue timers_;
};

}  // namespace fakes

#ifdef TETHER_DEPRECATED_TESTING_NAMESPACE
// Deprecated: the fakes' old namespace, `tether::testing`. Only on request,
// since any `tether::testing` hides gMock's `::testing` from code inside
// namespace tether (`testing::Return` would then name tether's).
namespace testing = fakes;
#endif
}  // namespace tether

#endif  // TETHER_TESTING_FAKE_CLOCK_H_
