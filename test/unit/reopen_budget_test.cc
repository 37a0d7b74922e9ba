// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// ReopenBudget on its own: delays, the two bounds, progress, refusals.
#include "tether/internal/reopen_budget.h"

#include <memory>
#include <string>

#include "absl/random/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tether/backoff.h"

namespace tether {
namespace internal {
namespace {

using ::testing::HasSubstr;

// A backoff that waits 1 s, 2 s, 3 s, ... and counts its resets.
class CountingBackoff final : public BackoffPolicy {
 public:
  explicit CountingBackoff(int* resets, int* clones = nullptr)
      : resets_(resets), clones_(clones) {}
  std::unique_ptr<BackoffPolicy> Clone() const override {
    if (clones_) ++*clones_;
    return std::make_unique<CountingBackoff>(resets_, clones_);
  }
  absl::Duration OnFailure(absl::BitGenRef) override {
    return absl::Seconds(++n_);
  }
  void Reset() override {
    n_ = 0;
    ++*resets_;
  }

 private:
  int* const resets_;
  int* const clones_;
  int n_ = 0;
};

std::shared_ptr<const ReopenBudget::Policy> PolicyOf(
    std::shared_ptr<const BackoffPolicy> schedule,
    ReopenBudget::Limits limits) {
  return std::make_shared<const ReopenBudget::Policy>(
      ReopenBudget::Policy{std::move(schedule), limits});
}

class ReopenBudgetTest : public ::testing::Test {
 protected:
  ReopenBudget Make(int max_attempts, absl::Duration max_time) {
    return ReopenBudget(PolicyOf(
        std::make_shared<CountingBackoff>(&resets_),
        ReopenBudget::Limits{max_attempts, max_time, absl::ZeroDuration()}));
  }
  const absl::Time t0_ = absl::UnixEpoch();
  const absl::Status last_ = absl::UnavailableError("down");
  absl::BitGen gen_;
  int resets_ = 0;
};

TEST_F(ReopenBudgetTest, FailuresFollowTheBackoffUntilTheAttemptBound) {
  ReopenBudget b = Make(3, absl::InfiniteDuration());
  EXPECT_FALSE(b.failing());
  EXPECT_EQ(*b.OnFailure(t0_, t0_, last_, gen_), absl::Seconds(1));
  EXPECT_TRUE(b.failing());
  EXPECT_EQ(b.failing_since(), t0_);
  EXPECT_EQ(*b.OnFailure(t0_ + absl::Seconds(1), t0_, last_, gen_),
            absl::Seconds(2));
  absl::StatusOr<absl::Duration> third =
      b.OnFailure(t0_ + absl::Seconds(3), t0_, last_, gen_);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(third.status().message()),
              HasSubstr("down (tether: gave up after 3 attempts"));
}

TEST_F(ReopenBudgetTest, TheTimeBoundCapsTheDelayAndEnds) {
  ReopenBudget b = Make(100, absl::Seconds(4));
  EXPECT_EQ(*b.OnFailure(t0_, t0_, last_, gen_), absl::Seconds(1));
  EXPECT_EQ(*b.OnFailure(t0_ + absl::Seconds(1), t0_, last_, gen_),
            absl::Seconds(2));
  // 3 s would pass the bound at 4 s: capped at what is left.
  EXPECT_EQ(*b.OnFailure(t0_ + absl::Seconds(3), t0_, last_, gen_),
            absl::Seconds(1));
  EXPECT_FALSE(b.OnFailure(t0_ + absl::Seconds(4), t0_, last_, gen_).ok());
}

TEST_F(ReopenBudgetTest, ProgressEndsTheFailingPeriodAndResetsTheBackoff) {
  ReopenBudget b = Make(2, absl::InfiniteDuration());
  ASSERT_TRUE(b.OnFailure(t0_, t0_, last_, gen_).ok());
  b.OnProgress();
  EXPECT_FALSE(b.failing());
  EXPECT_EQ(resets_, 1);
  EXPECT_EQ(b.failed_attempts(), 0);
  // A new failing period: one attempt again before the bound of 2.
  EXPECT_EQ(
      *b.OnFailure(t0_ + absl::Hours(1), t0_ + absl::Hours(1), last_, gen_),
      absl::Seconds(1));
  b.OnProgress();
  b.OnProgress();  // the backoff was not used since: no second reset
  EXPECT_EQ(resets_, 2);
}

TEST_F(ReopenBudgetTest, TheScheduleIsClonedAtTheFirstFailureOnly) {
  int clones = 0;
  ReopenBudget b(PolicyOf(
      std::make_shared<CountingBackoff>(&resets_, &clones),
      ReopenBudget::Limits{5, absl::InfiniteDuration(), absl::ZeroDuration()}));
  b.OnProgress();
  EXPECT_EQ(*b.OnRefused(t0_, absl::Seconds(1), last_), absl::Seconds(1));
  EXPECT_EQ(clones, 0);  // no failed attempt yet: no state of its own
  EXPECT_EQ(*b.OnFailure(t0_, t0_, last_, gen_), absl::Seconds(1));
  EXPECT_EQ(*b.OnFailure(t0_, t0_, last_, gen_), absl::Seconds(2));
  b.OnProgress();
  EXPECT_EQ(*b.OnFailure(t0_, t0_, last_, gen_), absl::Seconds(1));
  EXPECT_EQ(clones, 1);  // kept, and reset on progress
  EXPECT_EQ(resets_, 1);
}

TEST_F(ReopenBudgetTest, RefusalsSpendOnlyTime) {
  ReopenBudget b = Make(1, absl::Seconds(10));
  EXPECT_EQ(*b.OnRefused(t0_, absl::Seconds(3), last_), absl::Seconds(3));
  EXPECT_EQ(*b.OnRefused(t0_ + absl::Seconds(8), absl::Seconds(3), last_),
            absl::Seconds(2));
  absl::StatusOr<absl::Duration> end =
      b.OnRefused(t0_ + absl::Seconds(10), absl::Seconds(3), last_);
  ASSERT_FALSE(end.ok());
  EXPECT_THAT(std::string(end.status().message()),
              HasSubstr("gave up after 10s without progress"));
}

TEST_F(ReopenBudgetTest, GaveUpWithKeepsTheCodeExceptOk) {
  EXPECT_EQ(ReopenBudget::GaveUpWith(absl::OkStatus(), "x").code(),
            absl::StatusCode::kUnavailable);
  absl::Status s =
      ReopenBudget::GaveUpWith(absl::NotFoundError("gone"), "3 resyncs");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "gone (tether: gave up after 3 resyncs)");
}

TEST_F(ReopenBudgetTest, AfterProgressIsWithinTheJitter) {
  ReopenBudget none = Make(1, absl::Seconds(1));
  EXPECT_EQ(none.AfterProgress(gen_, absl::nullopt), absl::ZeroDuration());
  EXPECT_EQ(none.AfterProgress(gen_, 0.5), absl::ZeroDuration());
  ReopenBudget b(PolicyOf(
      std::make_shared<CountingBackoff>(&resets_),
      ReopenBudget::Limits{1, absl::Seconds(1), absl::Milliseconds(5)}));
  for (int i = 0; i < 100; ++i) {
    const absl::Duration d = b.AfterProgress(gen_, absl::nullopt);
    EXPECT_GE(d, absl::ZeroDuration());
    EXPECT_LT(d, absl::Milliseconds(5));
  }
}

TEST_F(ReopenBudgetTest, AfterProgressTakesTheSourcesShareOfTheJitter) {
  ReopenBudget b(PolicyOf(
      std::make_shared<CountingBackoff>(&resets_),
      ReopenBudget::Limits{1, absl::Seconds(1), absl::Milliseconds(8)}));
  EXPECT_EQ(b.AfterProgress(gen_, 0.0), absl::ZeroDuration());
  EXPECT_EQ(b.AfterProgress(gen_, 0.25), absl::Milliseconds(2));
  // A share outside [0, 1] is held to the window's ends.
  EXPECT_EQ(b.AfterProgress(gen_, -1.0), absl::ZeroDuration());
  EXPECT_EQ(b.AfterProgress(gen_, 7.0), absl::Milliseconds(8));
}

}  // namespace
}  // namespace internal
}  // namespace tether
