// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/reopen_budget.h"

#include <algorithm>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "policies/spread_order.h"

namespace tether {
namespace internal {

ReopenBudget::ReopenBudget(std::shared_ptr<const Policy> policy)
    : policy_(std::move(policy)) {}

void ReopenBudget::OnProgress() {
  failing_ = false;
  failed_attempts_ = 0;
  if (backoff_used_) backoff_->Reset();
  backoff_used_ = false;
}

void ReopenBudget::StartFailing(absl::Time since) {
  if (failing_) return;
  failing_ = true;
  failing_since_ = since;
  failed_attempts_ = 0;
}

absl::Status ReopenBudget::GaveUpWith(const absl::Status& last,
                                      absl::string_view after) {
  const absl::StatusCode code = last.code() == absl::StatusCode::kOk
                                    ? absl::StatusCode::kUnavailable
                                    : last.code();
  return absl::Status(
      code,
      absl::StrCat(last.message(), " (tether: gave up after ", after, ")"));
}

absl::Status ReopenBudget::GaveUp(const absl::Status& last,
                                  absl::Duration elapsed,
                                  bool count_attempts) const {
  if (!count_attempts) {
    return GaveUpWith(
        last, absl::StrCat(absl::FormatDuration(elapsed), " without progress"));
  }
  return GaveUpWith(
      last, absl::StrCat(failed_attempts_, " attempts without progress in ",
                         absl::FormatDuration(elapsed)));
}

absl::StatusOr<absl::Duration> ReopenBudget::OnFailure(
    absl::Time now, absl::Time failing_since, const absl::Status& last,
    absl::BitGenRef gen) {
  StartFailing(std::min(failing_since, now));
  ++failed_attempts_;
  const absl::Duration elapsed = now - failing_since_;
  if (failed_attempts_ >= policy_->limits.max_attempts ||
      elapsed >= policy_->limits.max_time) {
    return GaveUp(last, elapsed, /*count_attempts=*/true);
  }
  if (!backoff_) backoff_ = policy_->schedule->Clone();
  absl::Duration delay = backoff_->OnFailure(gen);
  backoff_used_ = true;
  if (policy_->limits.max_time != absl::InfiniteDuration()) {
    delay = std::min(delay, policy_->limits.max_time - elapsed);
  }
  return std::max(delay, absl::ZeroDuration());
}

absl::StatusOr<absl::Duration> ReopenBudget::OnRefused(
    absl::Time now, absl::Duration breaker_wait, const absl::Status& refused) {
  StartFailing(now);
  const absl::Duration elapsed = now - failing_since_;
  if (elapsed >= policy_->limits.max_time) {
    return GaveUp(refused, elapsed, /*count_attempts=*/false);
  }
  absl::Duration delay = breaker_wait;
  if (policy_->limits.max_time != absl::InfiniteDuration()) {
    delay = std::min(delay, policy_->limits.max_time - elapsed);
  }
  return std::max(delay, absl::ZeroDuration());
}

absl::Duration ReopenBudget::AfterProgress(
    absl::BitGenRef gen, absl::optional<double> share) const {
  if (policy_->limits.progress_jitter <= absl::ZeroDuration()) {
    return absl::ZeroDuration();
  }
  if (share) return PointIn(policy_->limits.progress_jitter, *share);
  return absl::Seconds(
      absl::Uniform(absl::IntervalClosedOpen, gen, 0.0,
                    absl::ToDoubleSeconds(policy_->limits.progress_jitter)));
}

}  // namespace internal
}  // namespace tether
