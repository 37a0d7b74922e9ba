// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: when a stream tries again, and when it gives up.
#ifndef TETHER_INTERNAL_REOPEN_BUDGET_H_
#define TETHER_INTERNAL_REOPEN_BUDGET_H_

#include <memory>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "tether/backoff.h"

namespace tether {
namespace internal {

// The reopen budget of one stream: how long to wait before the next attempt,
// and when to stop trying.
//
// It measures time spent *failing*: a failing period starts when an attempt
// that never became healthy started (or when a healthy one ended), and ends
// at the next delivered message or the next healthy attempt (`OnProgress`).
// A quiet but healthy stream is never "failing", however long it is silent.
// Within a failing period the stream gives up after `max_attempts` failed
// attempts or once `max_time` has passed, whichever comes first. The backoff
// paces the attempts and starts over (`Reset`) on progress: a clone of the
// stream's `schedule`, made at the stream's first failure, so that a stream
// that never failed holds no backoff state of its own (every stream of a
// process shares the default schedule, and streams with equal options share
// their `Policy`).
//
// A plain value: not thread-safe (the stream calls it under its lock); it
// calls only its own backoff policy.
class ReopenBudget {
 public:
  struct Limits {
    int max_attempts = 20;
    absl::Duration max_time = absl::Minutes(2);       // or infinite
    absl::Duration progress_jitter = absl::Milliseconds(5);
  };

  // What a budget follows; streams with equal options share one.
  struct Policy {
    std::shared_ptr<const BackoffPolicy> schedule;  // never null
    Limits limits;
  };

  // `policy` and its schedule are never null.
  explicit ReopenBudget(std::shared_ptr<const Policy> policy);

  // A message was delivered or an attempt proved healthy: the failing
  // period (if any) is over, and the backoff starts over.
  void OnProgress();

  // An attempt failed without progress; `failing_since` is when it started
  // failing. Returns the delay before the next attempt (never past the time
  // bound), or the status to end the stream with ("gave up after ...").
  absl::StatusOr<absl::Duration> OnFailure(absl::Time now,
                                           absl::Time failing_since,
                                           const absl::Status& last,
                                           absl::BitGenRef gen);

  // The breaker refused a permit (not an attempt: only the time bound
  // applies). Returns how long to wait (at most `breaker_wait`, never past
  // the time bound), or the status to end with.
  absl::StatusOr<absl::Duration> OnRefused(absl::Time now,
                                           absl::Duration breaker_wait,
                                           const absl::Status& refused);

  // The delay before reopening after an attempt that made progress: the
  // point at `share` of [0, progress_jitter) when given (a source's herd
  // spread), else a random one.
  absl::Duration AfterProgress(absl::BitGenRef gen,
                               absl::optional<double> share) const;

  // Whether a failing period is running, and since when.
  bool failing() const { return failing_; }
  absl::Time failing_since() const { return failing_since_; }
  int failed_attempts() const { return failed_attempts_; }
  int max_attempts() const { return policy_->limits.max_attempts; }

  // The status a stream that gives up ends with: `last`'s code (UNAVAILABLE
  // if it is OK) and message, then " (tether: gave up after <after>)".
  static absl::Status GaveUpWith(const absl::Status& last,
                                 absl::string_view after);

 private:
  void StartFailing(absl::Time since);
  absl::Status GaveUp(const absl::Status& last, absl::Duration elapsed,
                      bool count_attempts) const;

  const std::shared_ptr<const Policy> policy_;
  std::unique_ptr<BackoffPolicy> backoff_;  // from the first failure on
  bool failing_ = false;
  absl::Time failing_since_;
  int failed_attempts_ = 0;
  bool backoff_used_ = false;  // since its last Reset
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_REOPEN_BUDGET_H_
