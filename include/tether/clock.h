// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_CLOCK_H_
#define TETHER_CLOCK_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/time/time.h"

namespace tether {

// The source of time and timers for everything in tether that waits.
//
// Policies and streams never read the system clock or sleep directly: they ask
// a `Clock`. Production code uses `SystemClock()`; tests use
// `tether::fakes::FakeClock`, which advances only when told to and fires due
// timers on the thread that advances it, so no test ever sleeps.
//
// Thread safety: every method may be called from any thread concurrently.
// Timer callbacks run on a thread owned by the clock (for `SystemClock()`, one
// dedicated thread), never inside `RunAfter` itself, and never while the clock
// holds a lock a callback could need, so a callback may call `RunAfter` or
// `Cancel` again.
class Clock {
 public:
  using TimerId = std::uint64_t;

  virtual ~Clock() = default;

  // The current time. Monotonic: it never goes backwards.
  virtual absl::Time Now() = 0;

  // Runs `fn` once, no earlier than `delay` from now. A zero or negative delay
  // runs it as soon as possible, but still on the clock's own thread. Returns
  // an id for `Cancel`; ids are never 0 and never reused.
  virtual TimerId RunAfter(absl::Duration delay, std::function<void()> fn) = 0;

  // Cancels a timer. Returns true when the callback will not run; false when
  // it already ran, is running now, or `id` is unknown.
  virtual bool Cancel(TimerId id) = 0;
};

// The production clock: `std::chrono::steady_clock` for time, one background
// thread for timers. Created on first use and never destroyed.
Clock& SystemClock();

}  // namespace tether

#endif  // TETHER_CLOCK_H_
