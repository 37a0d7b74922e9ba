// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// SystemClock() with timers too far out to represent as a std::chrono wait.
// The only unit test on the real clock: it waits on events with a generous
// deadline and never sleeps.
#include "tether/clock.h"

#include <time.h>

#include <atomic>
#include <memory>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace tether {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(30);

absl::Duration ProcessCpuTime() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return absl::DurationFromTimespec(ts);
}

TEST(SystemClockTest, FarOffTimersNeitherFireNorBlockNorSpin) {
  Clock& clock = SystemClock();
  auto far_fired = std::make_shared<std::atomic<int>>(0);
  // 300 years overflows int64 nanoseconds (about 292 years); infinite is
  // InfiniteFuture once added to Now().
  const Clock::TimerId centuries = clock.RunAfter(
      absl::Hours(24 * 365 * 300), [far_fired] { ++*far_fired; });
  const Clock::TimerId never =
      clock.RunAfter(absl::InfiniteDuration(), [far_fired] { ++*far_fired; });

  auto first = std::make_shared<absl::Notification>();
  clock.RunAfter(absl::Milliseconds(1), [first] { first->Notify(); });
  ASSERT_TRUE(first->WaitForNotificationWithTimeout(kDeadline));

  // Only the far-off timers are left: the clock thread must wait, not spin
  // on a wait that overflowed to "already due", and still serve a new one.
  const absl::Duration cpu_before = ProcessCpuTime();
  const absl::Time wall_before = clock.Now();
  auto second = std::make_shared<absl::Notification>();
  clock.RunAfter(absl::Milliseconds(200), [second] { second->Notify(); });
  ASSERT_TRUE(second->WaitForNotificationWithTimeout(kDeadline));
  const absl::Duration wall = clock.Now() - wall_before;
  const absl::Duration cpu = ProcessCpuTime() - cpu_before;
  EXPECT_GE(wall, absl::Milliseconds(200));
  EXPECT_LT(cpu, wall / 2) << "the timer thread seems to spin";

  EXPECT_EQ(far_fired->load(), 0);
  EXPECT_TRUE(clock.Cancel(centuries));  // still cancellable
  EXPECT_TRUE(clock.Cancel(never));
  EXPECT_FALSE(clock.Cancel(never));  // and only once
}

TEST(SystemClockTest, NegativeAndZeroDelaysRunSoonOnTheClockThread) {
  Clock& clock = SystemClock();
  auto done = std::make_shared<absl::Notification>();
  auto count = std::make_shared<std::atomic<int>>(0);
  clock.RunAfter(-absl::InfiniteDuration(), [count] { ++*count; });
  clock.RunAfter(absl::ZeroDuration(), [count, done] {
    ++*count;
    done->Notify();
  });
  ASSERT_TRUE(done->WaitForNotificationWithTimeout(kDeadline));
  EXPECT_EQ(count->load(), 2);  // ordered by due time: the first ran first
}

}  // namespace
}  // namespace tether
