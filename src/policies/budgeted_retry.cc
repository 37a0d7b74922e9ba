// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/budgeted_retry.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "tether/internal/reopen_budget.h"

namespace tether {
namespace internal {

absl::StatusOr<absl::Duration> BudgetedRetry::Take(
    absl::StatusOr<absl::Duration> delay, absl::Time now,
    absl::Time give_up_at, const absl::Status& last) {
  added_wait_ = absl::ZeroDuration();
  if (!budget_ || !delay.ok()) return delay;
  const absl::Duration wait = budget_->TakeRetry();
  if (wait <= *delay) {
    not_before_ = absl::InfinitePast();
    return delay;
  }
  if (now + wait > give_up_at) {
    budget_->GiveBack();
    return ReopenBudget::GaveUpWith(
        last, absl::StrCat("the retry budget \"", budget_->options().name,
                           "\" had no retry before the time bound (next in ",
                           absl::FormatDuration(wait), ")"));
  }
  added_wait_ = wait - *delay;
  not_before_ = now + wait;
  return wait;
}

void BudgetedRetry::Release(absl::Time now) {
  if (budget_ && not_before_ > now) budget_->GiveBack();
  not_before_ = absl::InfinitePast();
}

}  // namespace internal
}  // namespace tether
