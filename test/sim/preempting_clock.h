// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Preemption points: a `Clock` whose every call may let other "threads" run
// first.
#ifndef TETHER_TEST_SIM_PREEMPTING_CLOCK_H_
#define TETHER_TEST_SIM_PREEMPTING_CLOCK_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tether/clock.h"
#include "tether/internal/mutex.h"
#include "test/sim/world.h"

namespace tether {
namespace sim {

// A `Clock` over the world's `FakeClock` whose calls are preemption points.
//
// The simulation runs on one thread, so the interleavings that real threads
// produce between two statements of library code never happen there. This
// clock makes them happen at the statements that call it: when library code
// calls `Now`, `RunAfter` or `Cancel` holding none of tether's locks, the
// seed may stall the calling "thread" there for up to `longest_stall` of
// simulated time, and everything that falls due meanwhile (other streams'
// events, the pool's, timers: the other threads' work) runs first,
// re-entrantly, before the call proceeds. Where a tether lock is held
// (`internal::LocksHeldByThisThread()`), nothing runs: another thread
// would block on that lock, and here it would deadlock.
//
// Its own source of randomness, seeded from the scenario, keeps runs
// replayable and leaves the world's draws as they were. It also counts the
// timers armed through it that have neither run nor been cancelled, so a
// run can check that a component released its timers.
class PreemptingClock final : public Clock {
 public:
  struct Options {
    // Chance that a call made with no tether lock held stalls. In [0, 1].
    double chance = 0;
    absl::Duration longest_stall = absl::Milliseconds(3);
    // Who calls the clock, for the trace ("the logger").
    std::string user = "a caller";
  };

  PreemptingClock(World& world, std::uint64_t seed, Options options)
      : world_(world), rng_(seed), options_(options) {}

  absl::Time Now() override {
    MaybeStall("Now");
    return world_.Now();
  }
  TimerId RunAfter(absl::Duration delay, std::function<void()> fn) override {
    MaybeStall("RunAfter");
    ++pending_;
    return world_.clock()->RunAfter(delay, [this, fn = std::move(fn)] {
      --pending_;
      fn();
    });
  }
  bool Cancel(TimerId id) override {
    MaybeStall("Cancel");
    const bool cancelled = world_.clock()->Cancel(id);
    if (cancelled) --pending_;
    return cancelled;
  }

  // Timers armed here that have neither run nor been cancelled.
  std::size_t pending() const { return pending_; }
  // How many calls stalled.
  std::uint64_t stalls() const { return stalls_; }

 private:
  // Stalls nested in another's stall are allowed (a thread preempted while
  // another is), up to this depth, so a run always moves on.
  static constexpr int kDeepest = 3;

  void MaybeStall(absl::string_view call) {
    if (options_.chance <= 0 || depth_ >= kDeepest ||
        internal::LocksHeldByThisThread() != 0 ||
        !rng_.Chance(options_.chance)) {
      return;
    }
    ++stalls_;
    ++depth_;
    const absl::Duration stall =
        rng_.Between(absl::Microseconds(1), options_.longest_stall);
    world_.Note(absl::StrCat(options_.user, " is preempted at Clock::", call,
                             " for ", absl::FormatDuration(stall)));
    world_.clock()->AdvanceBy(stall);
    world_.Note(absl::StrCat(options_.user, " resumes its Clock::", call));
    --depth_;
  }

  World& world_;
  Rng rng_;
  const Options options_;
  std::size_t pending_ = 0;
  std::uint64_t stalls_ = 0;
  int depth_ = 0;
};

}  // namespace sim
}  // namespace tether

#endif  // TETHER_TEST_SIM_PREEMPTING_CLOCK_H_
