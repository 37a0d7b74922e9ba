// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/retry_budget.h"

#include <atomic>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tether/testing/fake_clock.h"

namespace tether {
namespace {

class RetryBudgetTest : public ::testing::Test {
 protected:
  std::shared_ptr<RetryBudget> Make(double ratio, double per_second,
                                    absl::Duration window) {
    RetryBudgetOptions o;
    o.retry_ratio = ratio;
    o.min_retries_per_second = per_second;
    o.window = window;
    o.clock = clock_;
    return RetryBudget::Create(o).value();
  }
  // Retries that start without waiting, taken one after another.
  static int TakeFree(RetryBudget& b, int most) {
    int n = 0;
    while (n < most && b.TakeRetry() == absl::ZeroDuration()) ++n;
    return n;
  }

  std::shared_ptr<fakes::FakeClock> clock_ =
      std::make_shared<fakes::FakeClock>();
};

TEST_F(RetryBudgetTest, TheFloorAllowsOneWindowOfRetriesAtOnceThenItsRate) {
  auto budget = Make(0, 10, absl::Seconds(2));
  // 10 per second saved up for 2 s: 20 at once, the 21st waits 0.1 s.
  EXPECT_EQ(TakeFree(*budget, 100), 20);
  // That 21st was promised the token due in 0.1 s; the next waits 0.2 s.
  EXPECT_EQ(budget->TakeRetry(), absl::Milliseconds(200));
  clock_->AdvanceBy(absl::Seconds(1));
  // 10 tokens refilled, 2 of them promised already.
  EXPECT_EQ(TakeFree(*budget, 100), 8);
}

TEST_F(RetryBudgetTest, FirstTriesEarnTheirRatioForOneWindow) {
  auto budget = Make(0.5, 0.01, absl::Seconds(10));
  EXPECT_EQ(TakeFree(*budget, 100), 1);  // the floor's burst is at least 1
  for (int i = 0; i < 20; ++i) budget->RecordFirstTry();
  EXPECT_EQ(TakeFree(*budget, 100), 10);  // half of the 20 first tries
  for (int i = 0; i < 20; ++i) budget->RecordFirstTry();
  clock_->AdvanceBy(absl::Seconds(11));  // those earnings left the window
  // Only the floor refilled meanwhile (0.11 of a token, owed: it waits).
  EXPECT_GT(budget->TakeRetry(), absl::ZeroDuration());
}

TEST_F(RetryBudgetTest, AWaitingCallerHoldsItsPlaceUntilItGivesItBack) {
  auto budget = Make(0, 1, absl::Seconds(1));
  ASSERT_EQ(budget->TakeRetry(), absl::ZeroDuration());
  EXPECT_EQ(budget->TakeRetry(), absl::Seconds(1));
  EXPECT_EQ(budget->TakeRetry(), absl::Seconds(2));
  budget->GiveBack();  // the second waiter gave up
  EXPECT_EQ(budget->TakeRetry(), absl::Seconds(2));
  RetryBudgetCounts c = budget->Counts();
  EXPECT_EQ(c.retries, 4u);
  EXPECT_EQ(c.waited, 3u);
  EXPECT_EQ(c.given_back, 1u);
  EXPECT_DOUBLE_EQ(c.available, -2);
}

TEST_F(RetryBudgetTest, RetriesOverASpanStayWithinTheStatedBound) {
  // In any T seconds: at most rate * (T + window) + ratio * first tries.
  const double rate = 5;
  const absl::Duration window = absl::Seconds(4);
  auto budget = Make(0.1, rate, window);
  int started = 0;
  int first_tries = 0;
  const absl::Duration span = absl::Seconds(60);
  for (absl::Duration t; t < span; t += absl::Milliseconds(10)) {
    for (int i = 0; i < 3; ++i) {
      budget->RecordFirstTry();
      ++first_tries;
    }
    // Everyone asks; only retries that may start now count as started (the
    // others give their place back, as a caller past its bound does).
    for (int i = 0; i < 5; ++i) {
      if (budget->TakeRetry() == absl::ZeroDuration()) {
        ++started;
      } else {
        budget->GiveBack();
      }
    }
    clock_->AdvanceBy(absl::Milliseconds(10));
  }
  const double bound = rate * absl::ToDoubleSeconds(span + window) +
                       0.1 * first_tries;
  EXPECT_LE(started, bound);
  EXPECT_GT(started, 0.8 * bound);  // and the budget is not stingier either
}

TEST_F(RetryBudgetTest, ExtremeOptionsAreRefusedOrHeld) {
  RetryBudgetOptions o;
  o.clock = clock_;
  o.name = "";
  EXPECT_EQ(RetryBudget::Create(o).status().message(),
            "RetryBudgetOptions.name must not be empty");
  o.name = "b";
  o.retry_ratio = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(RetryBudget::Create(o).ok());
  o.retry_ratio = 1001;
  EXPECT_FALSE(RetryBudget::Create(o).ok());
  o.retry_ratio = 1000;
  o.min_retries_per_second = 0;
  EXPECT_EQ(RetryBudget::Create(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.min_retries_per_second = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(RetryBudget::Create(o).ok());
  o.min_retries_per_second = 1000000;
  o.window = absl::InfiniteDuration();
  EXPECT_FALSE(RetryBudget::Create(o).ok());
  o.window = absl::Milliseconds(99);
  EXPECT_FALSE(RetryBudget::Create(o).ok());

  // The largest budget: 3.6e9 saved-up retries, nothing overflows.
  o.window = absl::Hours(1);
  auto big = RetryBudget::Create(o).value();
  EXPECT_EQ(TakeFree(*big, 1000), 1000);
  for (int i = 0; i < 1000; ++i) big->RecordFirstTry();
  EXPECT_EQ(TakeFree(*big, 1000), 1000);
  // The smallest: one retry per 100 s; 100,000 waiters get finite places.
  o.retry_ratio = 0;
  o.min_retries_per_second = 0.01;
  o.window = absl::Milliseconds(100);
  auto small = RetryBudget::Create(o).value();
  absl::Duration last;
  for (int i = 0; i < 100000; ++i) last = small->TakeRetry();
  EXPECT_EQ(absl::Trunc(last, absl::Seconds(1)), absl::Seconds(9999900));
}

TEST_F(RetryBudgetTest, ConcurrentCallersShareOneCount) {
  auto budget = Make(0, 1, absl::Seconds(100));  // 100 free retries
  std::vector<std::thread> threads;
  std::atomic<int> free{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        if (budget->TakeRetry() == absl::ZeroDuration()) ++free;
        budget->RecordFirstTry();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(free.load(), 100);
  EXPECT_EQ(budget->Counts().retries, 200u);
  EXPECT_EQ(budget->Counts().first_tries, 200u);
}

}  // namespace
}  // namespace tether
