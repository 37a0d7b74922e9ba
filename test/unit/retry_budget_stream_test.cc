// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Streams sharing a retry budget: failures everywhere at once are bounded by
// it, drains spend nothing, and a place held in it goes back with the
// stream.
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "test/unit/stream_fixture.h"
#include "tether/backoff.h"
#include "tether/retry_budget.h"

namespace tether {
namespace stream_test {
namespace {

class RetryBudgetStreamTest : public StreamFixture {
 protected:
  RetryBudgetStreamTest() {
    RetryBudgetOptions o;
    o.retry_ratio = 0;
    o.min_retries_per_second = 2;
    o.window = absl::Seconds(1);  // two retries at once, then two a second
    o.clock = clock_;
    budget_ = RetryBudget::Create(o).value();
    options_.retry_budget = budget_;
    ExponentialBackoffOptions backoff;
    backoff.initial_delay = absl::Milliseconds(10);
    backoff.max_delay = absl::Milliseconds(40);
    backoff.jitter = Jitter::kNone;
    options_.backoff = ExponentialBackoff::Create(backoff).value();
    options_.max_attempts_without_progress = 1000;
    options_.max_time_without_progress = absl::Minutes(10);
  }

  // Every attempt from now on ends with `status` at once.
  void EveryAttemptEnds(const absl::Status& status, int attempts) {
    for (int i = 0; i < attempts; ++i) {
      transport_->Expect(Transport::Script().Finish(status));
    }
  }
  // Runs the clock for `span` in steps of 5 ms.
  void Run(absl::Duration span) {
    for (absl::Duration t; t < span; t += absl::Milliseconds(5)) {
      clock_->AdvanceBy(absl::Milliseconds(5));
    }
  }

  std::shared_ptr<RetryBudget> budget_;
};

TEST_F(RetryBudgetStreamTest, FailuresEverywhereAreBoundedByTheBudget) {
  const int kStreams = 20;
  EveryAttemptEnds(absl::InternalError("bad deploy"), 2000);
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < kStreams; ++i) streams.push_back(Start(SeqSpec()));
  Run(absl::Seconds(10));
  const int retries =
      static_cast<int>(events_->started().size()) - kStreams;
  // The bound: 2/s over 10 s plus the 2 saved up. Without the budget each
  // stream would retry every 40 ms: about 5,000 attempts.
  EXPECT_LE(retries, 22);
  EXPECT_GE(retries, 18);
  RetryBudgetCounts c = budget_->Counts();
  EXPECT_GT(c.waited, 0u);
  EXPECT_EQ(c.first_tries, static_cast<std::uint64_t>(kStreams));
  EXPECT_TRUE(done().empty());  // they wait; none ended
}

TEST_F(RetryBudgetStreamTest, DrainsSpendNothing) {
  // UNAVAILABLE is a drain: the rollout's reopens are not retries.
  EveryAttemptEnds(absl::UnavailableError("server is draining"), 200);
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < 5; ++i) streams.push_back(Start(SeqSpec()));
  Run(absl::Seconds(2));
  EXPECT_GT(events_->started().size(), 50u);
  EXPECT_EQ(budget_->Counts().retries, 0u);
}

TEST_F(RetryBudgetStreamTest, AWaitIsNotCutShortByARecoveredConnection) {
  EveryAttemptEnds(absl::InternalError("bad deploy"), 10);
  auto a = Start(SeqSpec());
  auto b = Start(SeqSpec());
  auto c = Start(SeqSpec());
  clock_->RunDue();
  // Two retries went at once; the third stream waits 0.5 s for its place.
  ASSERT_EQ(budget_->Counts().waited, 1u);
  Run(absl::Milliseconds(100));  // the other two failed again and wait too
  const std::size_t before = events_->started().size();
  ASSERT_EQ(budget_->Counts().waited, 3u);
  source_->Recover();  // a usable connection: wakes waiting streams early
  clock_->RunDue();
  EXPECT_EQ(events_->started().size(), before);
  Run(absl::Milliseconds(450));
  EXPECT_GT(events_->started().size(), before);
}

TEST_F(RetryBudgetStreamTest, AStreamThatEndsWhileWaitingGivesItsPlaceBack) {
  EveryAttemptEnds(absl::InternalError("bad deploy"), 3);
  auto a = Start(SeqSpec());
  auto b = Start(SeqSpec());
  auto c = Start(SeqSpec());
  clock_->RunDue();
  ASSERT_EQ(budget_->Counts().waited, 1u);
  c.reset();  // cancels the stream that waits
  clock_->RunDue();
  EXPECT_EQ(budget_->Counts().given_back, 1u);
  EXPECT_DOUBLE_EQ(budget_->Counts().available, 0);
}

TEST_F(RetryBudgetStreamTest, AWaitPastTheTimeBoundEndsTheStreamAtOnce) {
  options_.max_time_without_progress = absl::Milliseconds(300);
  EveryAttemptEnds(absl::InternalError("bad deploy"), 3);
  auto a = Start(SeqSpec());
  auto b = Start(SeqSpec());
  auto c = Start(SeqSpec());
  clock_->RunDue();
  // The third stream's place is 0.5 s away, past its 300 ms bound.
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kInternal);
  EXPECT_NE(done()[0].message().find("retry budget"), std::string::npos)
      << done()[0];
  EXPECT_EQ(budget_->Counts().given_back, 1u);
}

}  // namespace
}  // namespace stream_test
}  // namespace tether
