// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: the options a running stream reads, held once for every stream
// made from equal options.
#ifndef TETHER_SRC_STREAMS_STREAM_SETTINGS_H_
#define TETHER_SRC_STREAMS_STREAM_SETTINGS_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tether/classification.h"
#include "tether/clock.h"
#include "tether/internal/breaker_gate.h"
#include "tether/internal/reopen_budget.h"
#include "tether/internal/visibility.h"
#include "tether/observer.h"
#include "tether/resync_pool.h"
#include "tether/retry_budget.h"
#include "tether/stream_options.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

// What a stream reads from its options after it starts: the durations and
// flags of its rules, and the observer, clock, classifier, breaker, budgets
// and resync pool it uses. Immutable.
//
// A process with 100,000 streams usually opens them from a few option
// sets, and about 330 bytes of each stream would repeat one of them. So
// `Share` hands streams whose options are equal one object: the same
// durations and flags, and the same objects (the same observer, clock,
// breaker, budget, pool and backoff schedule, by address; the same
// classifier when it is a plain function, as the default is). Options that
// differ in anything, or carry a classifier that is a lambda or a functor
// (which cannot be compared), get their own. A small cache of the
// settings made last (`kCached`, held weakly) finds the equal ones: O(1)
// per stream, and no settings outlive their last stream.
//
//   auto settings = StreamSettings::Share(options);  // options validated
//   absl::Duration settle = settings->settle_time;
struct StreamSettings {
  // The settings of streams made with `options` (validated): the ones
  // already made for equal options while a stream still holds them, else
  // new ones. Fills in the defaults (clock, classifier, backoff, resync
  // pool) first. Thread-safe.
  static std::shared_ptr<const StreamSettings> Share(
      const ReconnectingStreamOptions& options);
  static constexpr int kCached = 16;

  // The settings `options` give, not shared (`Share` compares these).
  static StreamSettings From(const ReconnectingStreamOptions& options);

  // Equal options: every field the same, objects by address, classifiers
  // only when both are the same plain function.
  bool SameAs(const StreamSettings& other) const;

  std::shared_ptr<StreamObserver> observer;  // may be null
  std::shared_ptr<Clock> clock;
  Classifier classifier;
  bool migrate_on_drain = true;
  bool fail_fast_on_open_breaker = false;
  bool hold_fallback = true;
  absl::Duration handoff_timeout;
  absl::Duration migration_jitter;
  absl::Duration resync_jitter;
  absl::Duration settle_time;
  absl::Duration stall_timeout;  // zero: off
  absl::Duration open_timeout;
  absl::Duration max_time;  // max_time_without_progress
  absl::Duration recovery_jitter;
  std::shared_ptr<ResyncPool> resync_pool;
  BreakerGate breaker;  // thread-safe
  ReopenBudget::Policy budget;
  std::shared_ptr<RetryBudget> retry_budget;  // may be null
};

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_STREAMS_STREAM_SETTINGS_H_
