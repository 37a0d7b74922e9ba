// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// TimerSlot on its own, under the fake clock, on one thread: arming
// replaces, cancelling is idempotent, a stale firing is never claimed.
#include "time/timer_slot.h"

#include <functional>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tether/testing/fake_clock.h"

namespace tether {
namespace internal {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A clock whose `Cancel` always loses the race: the callback still runs, as
// when the real clock's thread has already taken it when `Cancel` is called.
class LateCancelClock final : public Clock {
 public:
  absl::Time Now() override { return inner_.Now(); }
  TimerId RunAfter(absl::Duration delay, std::function<void()> fn) override {
    return inner_.RunAfter(delay, std::move(fn));
  }
  bool Cancel(TimerId /*id*/) override { return false; }
  void AdvanceBy(absl::Duration d) { inner_.AdvanceBy(d); }

 private:
  fakes::FakeClock inner_;
};

// Records which of its armings were claimed when they fired.
template <class C>
struct Owner {
  C clock;
  TimerSlot slot;
  std::vector<int> claimed;
  void Arm(absl::Duration delay, int tag) {
    slot.Arm(clock, delay, [this, tag](TimerSlot::Shot shot) {
      if (slot.Claim(shot)) claimed.push_back(tag);
    });
  }
};

TEST(TimerSlotTest, FiresOnceAfterTheDelay) {
  Owner<fakes::FakeClock> o;
  o.Arm(absl::Seconds(2), 1);
  EXPECT_TRUE(o.slot.armed());
  o.clock.AdvanceBy(absl::Seconds(1));
  EXPECT_THAT(o.claimed, IsEmpty());
  o.clock.AdvanceBy(absl::Seconds(1));
  EXPECT_THAT(o.claimed, ElementsAre(1));
  EXPECT_FALSE(o.slot.armed());
  o.clock.AdvanceBy(absl::Hours(1));
  EXPECT_THAT(o.claimed, ElementsAre(1));
}

TEST(TimerSlotTest, ArmingReplacesThePendingFiring) {
  Owner<fakes::FakeClock> o;
  o.Arm(absl::Seconds(1), 1);
  o.Arm(absl::Seconds(3), 2);
  EXPECT_EQ(o.clock.PendingTimers(), 1u);  // the first one is cancelled
  o.clock.AdvanceBy(absl::Seconds(5));
  EXPECT_THAT(o.claimed, ElementsAre(2));
}

TEST(TimerSlotTest, CancelIsIdempotent) {
  Owner<fakes::FakeClock> o;
  o.slot.Cancel(o.clock);  // never armed
  o.Arm(absl::Seconds(1), 1);
  o.slot.Cancel(o.clock);
  o.slot.Cancel(o.clock);
  EXPECT_FALSE(o.slot.armed());
  EXPECT_EQ(o.clock.PendingTimers(), 0u);
  o.clock.AdvanceBy(absl::Seconds(2));
  EXPECT_THAT(o.claimed, IsEmpty());
  o.Arm(absl::Seconds(1), 2);  // usable again
  o.clock.AdvanceBy(absl::Seconds(1));
  EXPECT_THAT(o.claimed, ElementsAre(2));
}

TEST(TimerSlotTest, AFiringThatLostTheCancelRaceIsStale) {
  Owner<LateCancelClock> o;
  o.Arm(absl::Seconds(1), 1);
  o.slot.Cancel(o.clock);  // the clock runs it anyway
  o.clock.AdvanceBy(absl::Seconds(1));
  EXPECT_THAT(o.claimed, IsEmpty());
}

TEST(TimerSlotTest, AReplacedFiringThatStillRunsIsStale) {
  Owner<LateCancelClock> o;
  o.Arm(absl::Seconds(1), 1);
  o.Arm(absl::Seconds(2), 2);  // the first firing still comes
  o.clock.AdvanceBy(absl::Seconds(1));
  EXPECT_THAT(o.claimed, IsEmpty());
  EXPECT_TRUE(o.slot.armed());
  o.clock.AdvanceBy(absl::Seconds(1));
  EXPECT_THAT(o.claimed, ElementsAre(2));
}

TEST(TimerSlotTest, ExtremeDelays) {
  Owner<fakes::FakeClock> o;
  o.Arm(-absl::Seconds(5), 1);  // in the past: as soon as possible
  o.clock.RunDue();
  EXPECT_THAT(o.claimed, ElementsAre(1));
  o.Arm(absl::Hours(24 * 365 * 100), 2);  // a century: pending, cancellable
  o.clock.AdvanceBy(absl::Hours(24));
  EXPECT_TRUE(o.slot.armed());
  o.slot.Cancel(o.clock);
  EXPECT_EQ(o.clock.PendingTimers(), 0u);
  EXPECT_THAT(o.claimed, ElementsAre(1));
}

}  // namespace
}  // namespace internal
}  // namespace tether
