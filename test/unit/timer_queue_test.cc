// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// TimerQueue: due order, cancel by id, and the stale entries a cancel
// leaves behind.
#include "tether/internal/timer_queue.h"

#include <functional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether {
namespace internal {
namespace {

using ::testing::ElementsAre;

const absl::Time kT0 = absl::UnixEpoch() + absl::Hours(1);

// Takes every timer due at or before `t` and runs it, checking that due
// times never go backwards.
void RunDue(TimerQueue& q, absl::Time t) {
  absl::Time due;
  std::function<void()> fn;
  absl::Time last = absl::InfinitePast();
  while (q.TakeDue(t, &due, &fn)) {
    EXPECT_GE(due, last);
    last = due;
    fn();
  }
}

TEST(TimerQueueTest, RunsInDueOrderAndEqualDueTimesInTheOrderAdded) {
  TimerQueue q;
  std::vector<int> ran;
  auto add = [&](absl::Duration at, int tag) {
    return q.Add(kT0 + at, [&ran, tag] { ran.push_back(tag); });
  };
  add(absl::Seconds(3), 3);
  add(absl::Seconds(1), 1);
  add(absl::Seconds(2), 20);
  add(absl::Seconds(2), 21);
  add(absl::Seconds(2), 22);
  add(absl::ZeroDuration(), 0);
  EXPECT_EQ(q.size(), 6u);
  EXPECT_EQ(q.NextDue(), kT0);
  RunDue(q, kT0 + absl::Seconds(2));
  EXPECT_THAT(ran, ElementsAre(0, 1, 20, 21, 22));
  EXPECT_EQ(q.NextDue(), kT0 + absl::Seconds(3));
  RunDue(q, absl::InfiniteFuture());
  EXPECT_THAT(ran, ElementsAre(0, 1, 20, 21, 22, 3));
  EXPECT_EQ(q.size(), 0u);
  EXPECT_EQ(q.NextDue(), absl::InfiniteFuture());
}

TEST(TimerQueueTest, ACancelledTimerNeverRunsAndCancelsOnce) {
  TimerQueue q;
  int ran = 0;
  const TimerQueue::TimerId first = q.Add(kT0, [&] { ran += 1; });
  const TimerQueue::TimerId second =
      q.Add(kT0 + absl::Seconds(1), [&] { ran += 10; });
  EXPECT_NE(first, 0u);
  EXPECT_NE(first, second);
  std::function<void()> dropped;
  EXPECT_TRUE(q.Cancel(first, &dropped));
  ASSERT_TRUE(dropped);  // handed back, not run
  EXPECT_EQ(ran, 0);
  EXPECT_FALSE(q.Cancel(first));
  EXPECT_FALSE(q.Cancel(12345));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.NextDue(), kT0 + absl::Seconds(1));  // the stale top skipped
  RunDue(q, absl::InfiniteFuture());
  EXPECT_EQ(ran, 10);
  EXPECT_FALSE(q.Cancel(second));  // ran already
}

TEST(TimerQueueTest, ManyCancelsKeepTheOrderOfTheRest) {
  // Far more cancels than live timers: the stale entries are dropped along
  // the way and never disturb the order of what is left.
  TimerQueue q;
  std::vector<int> ran;
  std::vector<TimerQueue::TimerId> ids;
  for (int i = 0; i < 10000; ++i) {
    ids.push_back(q.Add(kT0 + absl::Milliseconds((i * 7919) % 10007),
                        [&ran, i] { ran.push_back(i); }));
  }
  for (int i = 0; i < 10000; ++i) {
    if (i % 100 != 0) {
      EXPECT_TRUE(q.Cancel(ids[static_cast<std::size_t>(i)]));
    }
  }
  EXPECT_EQ(q.size(), 100u);
  RunDue(q, absl::InfiniteFuture());
  ASSERT_EQ(ran.size(), 100u);
  for (std::size_t k = 1; k < ran.size(); ++k) {
    EXPECT_LT((ran[k - 1] * 7919) % 10007, (ran[k] * 7919) % 10007);
  }
}

TEST(TimerQueueTest, TheRoomOfACrowdThatWentIsGivenBack) {
  // 20,000 timers (a crowd of opening streams), then all but 10 cancelled
  // or run: the queue holds room for about what is left, not the crowd, and
  // the timers left still run in due order.
  TimerQueue q;
  std::vector<int> ran;
  std::vector<TimerQueue::TimerId> ids;
  for (int i = 0; i < 20000; ++i) {
    ids.push_back(
        q.Add(kT0 + absl::Milliseconds(i), [&ran, i] { ran.push_back(i); }));
  }
  EXPECT_GE(q.room(), 20000u);
  RunDue(q, kT0 + absl::Milliseconds(4999));  // 5,000 run
  for (int i = 5000; i < 19990; ++i) {
    EXPECT_TRUE(q.Cancel(ids[static_cast<std::size_t>(i)]));
  }
  EXPECT_EQ(q.size(), 10u);
  EXPECT_LE(q.room(), TimerQueue::kKeptRoom);
  RunDue(q, absl::InfiniteFuture());
  ASSERT_EQ(ran.size(), 5010u);
  for (std::size_t k = 0; k < ran.size(); ++k) {
    EXPECT_EQ(ran[k], k < 5000 ? static_cast<int>(k)
                               : 19990 + static_cast<int>(k - 5000));
  }
  // It grows again for the next crowd.
  for (int i = 0; i < 3000; ++i) q.Add(kT0, [] {});
  EXPECT_EQ(q.size(), 3000u);
  EXPECT_GE(q.room(), 3000u);
}

TEST(TimerQueueTest, InfiniteAndFarDueTimesWaitAndStayCancellable) {
  TimerQueue q;
  int ran = 0;
  const TimerQueue::TimerId never =
      q.Add(absl::InfiniteFuture(), [&] { ++ran; });
  q.Add(absl::InfinitePast(), [&] { ran += 100; });
  EXPECT_EQ(q.NextDue(), absl::InfinitePast());
  RunDue(q, kT0);
  EXPECT_EQ(ran, 100);
  EXPECT_EQ(q.NextDue(), absl::InfiniteFuture());
  RunDue(q, kT0 + absl::Hours(24 * 365 * 300));
  EXPECT_EQ(ran, 100);
  EXPECT_TRUE(q.Cancel(never));
  EXPECT_EQ(q.size(), 0u);
}

}  // namespace
}  // namespace internal
}  // namespace tether
