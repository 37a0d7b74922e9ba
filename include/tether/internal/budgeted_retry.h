// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: one stream's or caller's use of a shared `RetryBudget`.
#ifndef TETHER_INTERNAL_BUDGETED_RETRY_H_
#define TETHER_INTERNAL_BUDGETED_RETRY_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tether/retry_budget.h"

namespace tether {
namespace internal {

// What a stream (or a unary caller) does with the process's retry budget:
// a first try earns, a retry after a failure takes, and a place held in the
// queue goes back if the retry never happens.
//
// `Take` turns the delay the caller's own backoff chose into the delay the
// budget allows: the longer of the two, or a give-up when the budget's wait
// would end past `give_up_at` (the caller's time bound, as with a pushback
// that would outlast it). While a wait is held, `not_before()` says when the
// retry may start, so that nothing wakes the caller early; `Release` hands
// an unused place back.
//
//   absl::StatusOr<absl::Duration> delay = budget.OnFailure(...);
//   delay = retry.Take(std::move(delay), now, give_up_at, last);
//
// A plain value: not thread-safe (its owner calls it under its lock); the
// budget it calls is thread-safe and calls nothing back. Without a budget
// every method does nothing and `Take` returns the delay unchanged. The
// budget is borrowed: its owner holds it for as long as this lives (a
// stream's settings, a unary call).
class BudgetedRetry {
 public:
  explicit BudgetedRetry(RetryBudget* budget) : budget_(budget) {}

  void OnFirstTry() {
    if (budget_) budget_->RecordFirstTry();
  }

  absl::StatusOr<absl::Duration> Take(absl::StatusOr<absl::Duration> delay,
                                      absl::Time now, absl::Time give_up_at,
                                      const absl::Status& last);

  // The earliest the retry taken last may start (InfinitePast: any time).
  absl::Time not_before() const { return not_before_; }
  // The budget's wait that the last `Take` added beyond the caller's own
  // delay (zero when the budget did not hold it back).
  absl::Duration added_wait() const { return added_wait_; }

  // The caller will not make the retry it waits for (it ended, or started
  // early for another reason): a place still ahead of `now` goes back.
  void Release(absl::Time now);

 private:
  RetryBudget* const budget_;  // may be null
  absl::Time not_before_ = absl::InfinitePast();
  absl::Duration added_wait_;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_BUDGETED_RETRY_H_
