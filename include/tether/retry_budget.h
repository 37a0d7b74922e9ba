// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// A retry budget shared by every stream and unary caller of a process (or of
// a group of them): it bounds how often they retry after failures, so that a
// failure everywhere at once (a bad deploy answering INTERNAL to every call)
// does not multiply into a retry storm at the servers.
#ifndef TETHER_RETRY_BUDGET_H_
#define TETHER_RETRY_BUDGET_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tether/clock.h"
#include "tether/internal/mutex.h"

namespace tether {

struct RetryBudgetOptions {
  // Names the budget in error messages and logs. Default "default"; must not
  // be empty.
  std::string name = "default";
  // Retries allowed per first try made in the last `window` (a stream's
  // first attempt, a unary call's first attempt), on top of the floor.
  // Default 0.2; in [0, 1000].
  double retry_ratio = 0.2;
  // Retries allowed per second whatever the first tries: the floor that
  // keeps a quiet process able to retry. Default 10; in [0.01, 1000000].
  double min_retries_per_second = 10;
  // How long a first try earns its share of retries, and how many seconds of
  // the floor may be saved up for a burst (`min_retries_per_second * window`
  // retries at once, at least 1). Default 10 s; in [100 ms, 1 h].
  absl::Duration window = absl::Seconds(10);
  // Default: the real clock.
  std::shared_ptr<Clock> clock;
};

// OK, or INVALID_ARGUMENT naming the first field that is out of range, its
// value and the valid range.
absl::Status Validate(const RetryBudgetOptions& options);

// A snapshot of a budget's counters (totals since it was made).
struct RetryBudgetCounts {
  std::uint64_t first_tries = 0;  // `RecordFirstTry` calls
  std::uint64_t retries = 0;      // `TakeRetry` calls
  std::uint64_t waited = 0;       // of those, retries told to wait
  std::uint64_t given_back = 0;   // `GiveBack` calls
  // Retries that may start now without waiting (negative: that many are
  // already promised to callers that wait).
  double available = 0;
};

// Bounds failure-caused retries across many callers, as Finagle's and
// Linkerd's retry budgets and gRFC A6's retry throttle do: retries may be
// `retry_ratio` of the first tries of the last `window`, plus
// `min_retries_per_second`.
//
// A caller about to retry after a failure calls `TakeRetry()` and waits the
// duration it returns (zero when a retry is available now). A caller told to
// wait holds its place: the budget has promised it the retry at that time,
// and the callers after it wait longer. A caller that stops waiting (it gave
// up, or was cancelled) calls `GiveBack()`.
//
// The bound: in any span of T seconds at most
// `min_retries_per_second * (T + window) + retry_ratio * F` retries begin,
// where F is the number of first tries in that span and the `window` before
// it. Moves after a drain, a stall or a resync are not retries: tether's
// streams spend nothing on them, and nothing on reopens after an attempt
// that delivered.
//
// Thread safety: every method may be called concurrently from any thread.
// The budget calls nothing outside itself, so it may be called under the
// caller's own locks.
//
//   auto budget = tether::RetryBudget::Create({}).value();
//   options.retry_budget = budget;  // every stream and caller that shares it
class RetryBudget final {
 public:
  static absl::StatusOr<std::shared_ptr<RetryBudget>> Create(
      RetryBudgetOptions options);

  // A first try: earns `retry_ratio` retries for the next `window`.
  void RecordFirstTry();
  // Takes one retry; returns how long the caller must wait before it starts
  // (zero: at once).
  absl::Duration TakeRetry();
  // A caller told to wait will not retry after all: its retry goes back.
  void GiveBack();

  RetryBudgetCounts Counts() const;
  const RetryBudgetOptions& options() const { return options_; }

 private:
  // The ratio's earnings are kept in `kBuckets` slices of the window.
  static constexpr int kBuckets = 10;

  // One slice of the window: what the first tries in it earned, and what
  // retries took from it.
  struct Slice {
    std::int64_t index = -1;  // of the slice of time it holds
    double earned = 0;
    double spent = 0;
  };

  explicit RetryBudget(RetryBudgetOptions options);
  // The floor's tokens at `now`, and refilling them up to `now`.
  double FloorAtLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RefillLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::int64_t SliceAt(absl::Time now) const;
  // What the first tries of the window before `now` left to take (may be
  // negative when the floor paid for retries beyond it).
  double EarnedLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The slice that holds `now`, emptied if it held an older one.
  Slice& CurrentLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RetryBudgetOptions options_;
  const double capacity_;  // the floor's burst
  const absl::Duration slice_;
  const absl::Time start_;
  mutable internal::Mutex mu_;
  double floor_tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time refilled_at_ ABSL_GUARDED_BY(mu_);
  Slice slices_[kBuckets] ABSL_GUARDED_BY(mu_);
  RetryBudgetCounts counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tether

#endif  // TETHER_RETRY_BUDGET_H_
