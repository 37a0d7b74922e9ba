// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/clock.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "tether/internal/mutex.h"
#include "tether/internal/timer_queue.h"
#include "time/system_clock.h"

namespace tether {
namespace {

// The longest single wait of the timer thread. Far-off due times are reached
// by waking up and waiting again, so no wait ever converts a huge duration
// to `std::chrono` (which overflows past about 292 years of nanoseconds).
constexpr absl::Duration kMaxWait = absl::Hours(1);

// `SystemClock()`: `steady_clock` time, one thread, one `TimerQueue`. The
// thread waits for the earliest timer; a new timer wakes it only when it
// falls due before that one (streams arm timers on every attempt, mostly
// far off: a wake-up each would cost a context switch).
//
// A due time may be anything `absl::Time + Duration` gives, including
// `InfiniteFuture()` (a delay of `InfiniteDuration()`): such a timer never
// fires but can be cancelled. The thread waits until a `steady_clock`
// deadline (`std::condition_variable_any::wait_until`), at most `kMaxWait`
// at a time.
//
// Thread safety: all methods from any thread; callbacks run on the thread,
// with no lock held. Never destroyed (the thread is detached).
class SteadyClock final : public Clock {
 public:
  SteadyClock() {
    std::thread([this] { Loop(); }).detach();
  }

  absl::Time Now() override {
    const auto since_start =
        std::chrono::steady_clock::now().time_since_epoch();
    return absl::UnixEpoch() + absl::FromChrono(since_start);
  }

  TimerId RunAfter(absl::Duration delay, std::function<void()> fn) override {
    // absl::Time + Duration saturates: InfiniteDuration gives InfiniteFuture.
    const absl::Time due = Now() + std::max(delay, absl::ZeroDuration());
    TimerId id;
    bool earliest;
    {
      internal::MutexLock lock(&mu_);
      earliest = due < timers_.NextDue();
      id = timers_.Add(due, std::move(fn));
    }
    if (earliest) cv_.notify_one();
    return id;
  }

  bool Cancel(TimerId id) override {
    std::function<void()> drop;  // destroyed after the lock is released
    internal::MutexLock lock(&mu_);
    return timers_.Cancel(id, &drop);
  }

 private:
  void Loop() {
    mu_.Lock();
    for (;;) {
      const absl::Time next = timers_.NextDue();
      if (next == absl::InfiniteFuture()) {
        cv_.wait(mu_);  // nothing will ever fall due without a new timer
        continue;
      }
      const absl::Time now = Now();
      std::function<void()> fn;
      absl::Time due;
      if (!timers_.TakeDue(now, &due, &fn)) {
        const absl::Duration wait = std::min(next - now, kMaxWait);
        cv_.wait_for(mu_, absl::ToChronoNanoseconds(wait));
        continue;
      }
      mu_.Unlock();
      fn();
      fn = nullptr;  // its captures are released with no lock held too
      mu_.Lock();
    }
  }

  internal::Mutex mu_;
  // Waits on steady_clock; signalled when a timer is added that falls due
  // before every other.
  std::condition_variable_any cv_;
  internal::TimerQueue timers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

Clock& SystemClock() {
  static Clock* const clock = new SteadyClock();
  return *clock;
}

namespace internal {

const std::shared_ptr<Clock>& SharedSystemClock() {
  static const auto* const shared =
      new std::shared_ptr<Clock>(&SystemClock(), [](Clock*) {});
  return *shared;
}

}  // namespace internal

}  // namespace tether
