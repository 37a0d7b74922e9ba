// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/retry_budget.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "policies/out_of_range.h"
#include "time/system_clock.h"

namespace tether {
namespace {

absl::Status OutOfRange(absl::string_view field, absl::string_view value,
                        absl::string_view range) {
  return internal::OutOfRange("RetryBudgetOptions", field, value, range);
}

}  // namespace

absl::Status Validate(const RetryBudgetOptions& o) {
  if (o.name.empty()) {
    return absl::InvalidArgumentError(
        "RetryBudgetOptions.name must not be empty");
  }
  // Written so that NaN fails every range.
  if (!(o.retry_ratio >= 0 && o.retry_ratio <= 1000)) {
    return OutOfRange("retry_ratio", absl::StrCat(o.retry_ratio),
                      "in [0, 1000]");
  }
  if (!(o.min_retries_per_second >= 0.01 &&
        o.min_retries_per_second <= 1000000)) {
    return OutOfRange("min_retries_per_second",
                      absl::StrCat(o.min_retries_per_second),
                      "in [0.01, 1000000] (a budget that never refills would "
                      "leave a waiting stream no way out)");
  }
  if (o.window < absl::Milliseconds(100) || o.window > absl::Hours(1)) {
    return OutOfRange("window", absl::FormatDuration(o.window),
                      "in [100ms, 1h]");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<RetryBudget>> RetryBudget::Create(
    RetryBudgetOptions options) {
  if (absl::Status s = Validate(options); !s.ok()) return s;
  if (!options.clock) {
    // SystemClock() is never destroyed: share it without owning it.
    options.clock = internal::SharedSystemClock();
  }
  return std::shared_ptr<RetryBudget>(new RetryBudget(std::move(options)));
}

RetryBudget::RetryBudget(RetryBudgetOptions options)
    : options_(std::move(options)),
      capacity_(std::max(1.0, options_.min_retries_per_second *
                                  absl::ToDoubleSeconds(options_.window))),
      slice_(options_.window / kBuckets),
      start_(options_.clock->Now()),
      floor_tokens_(capacity_),
      refilled_at_(start_) {}

double RetryBudget::FloorAtLocked(absl::Time now) const {
  if (now <= refilled_at_) return floor_tokens_;  // a clock that stood still
  return std::min(capacity_,
                  floor_tokens_ + options_.min_retries_per_second *
                                      absl::ToDoubleSeconds(now - refilled_at_));
}

void RetryBudget::RefillLocked(absl::Time now) {
  floor_tokens_ = FloorAtLocked(now);
  refilled_at_ = std::max(refilled_at_, now);
}

std::int64_t RetryBudget::SliceAt(absl::Time now) const {
  if (now <= start_) return 0;
  absl::Duration rest;
  return absl::IDivDuration(now - start_, slice_, &rest);
}

double RetryBudget::EarnedLocked(absl::Time now) const {
  const std::int64_t newest = SliceAt(now);
  double left = 0;
  for (const Slice& s : slices_) {
    if (s.index > newest - kBuckets) left += s.earned - s.spent;
  }
  return left;
}

RetryBudget::Slice& RetryBudget::CurrentLocked(absl::Time now) {
  const std::int64_t index = SliceAt(now);
  Slice& s = slices_[index % kBuckets];
  if (s.index != index) s = Slice{index, 0, 0};
  return s;
}

void RetryBudget::RecordFirstTry() {
  internal::MutexLock lock(&mu_);
  ++counts_.first_tries;
  CurrentLocked(options_.clock->Now()).earned += options_.retry_ratio;
}

absl::Duration RetryBudget::TakeRetry() {
  internal::MutexLock lock(&mu_);
  const absl::Time now = options_.clock->Now();
  ++counts_.retries;
  if (EarnedLocked(now) >= 1) {
    CurrentLocked(now).spent += 1;
    return absl::ZeroDuration();
  }
  RefillLocked(now);
  floor_tokens_ -= 1;
  if (floor_tokens_ >= 0) return absl::ZeroDuration();
  ++counts_.waited;
  return absl::Seconds(-floor_tokens_ / options_.min_retries_per_second);
}

void RetryBudget::GiveBack() {
  internal::MutexLock lock(&mu_);
  RefillLocked(options_.clock->Now());
  ++counts_.given_back;
  floor_tokens_ = std::min(capacity_, floor_tokens_ + 1);
}

RetryBudgetCounts RetryBudget::Counts() const {
  internal::MutexLock lock(&mu_);
  const absl::Time now = options_.clock->Now();
  RetryBudgetCounts c = counts_;
  c.available = FloorAtLocked(now) + std::max(0.0, EarnedLocked(now));
  return c;
}

}  // namespace tether
