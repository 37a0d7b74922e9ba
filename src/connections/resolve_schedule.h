// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// When a resolving endpoint source looks up its name again.
#ifndef TETHER_SRC_CONNECTIONS_RESOLVE_SCHEDULE_H_
#define TETHER_SRC_CONNECTIONS_RESOLVE_SCHEDULE_H_

#include <algorithm>

#include "absl/time/time.h"
#include "tether/internal/visibility.h"
#include "tether/resolved_endpoints.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

// The resolution schedule of one name, as a plain value (no clock, no
// thread: the caller passes `now` and arms its timer for the time returned).
//
// - After an answer: again after `resolve_interval`, or after the answer's
//   shortest TTL when that is shorter (a TTL of 0, "do not cache", tells
//   nothing and is ignored), and after `min_resolve_interval` when the
//   answer dropped an address of the previous one (the pool confirms a
//   removal on the next answer: the flap rule).
// - After an error: again after `min_resolve_interval`, doubling with each
//   error in a row up to `resolve_interval`.
// - A refresh (the pool saw a drain, a failed connect, an unannounced end)
//   brings the next resolution forward to now, but never closer than
//   `min_resolve_interval` to the start of the last one.
// - Never sooner than `min_resolve_interval` after the last start.
class ResolveSchedule {
 public:
  explicit ResolveSchedule(const ResolverOptions& options)
      : options_(options) {}

  // A resolution starts at `now`.
  void Started(absl::Time now) { last_start_ = now; }

  // It answered; `shortest_ttl` is InfiniteDuration when none was reported.
  absl::Time Answered(absl::Time now, absl::Duration shortest_ttl,
                      bool dropped_some) {
    errors_ = 0;
    absl::Duration wait = options_.resolve_interval;
    if (options_.honor_ttl && shortest_ttl > absl::ZeroDuration()) {
      wait = std::min(wait, shortest_ttl);
    }
    if (dropped_some) wait = options_.min_resolve_interval;
    return Bound(now + wait);
  }

  // It failed.
  absl::Time Failed(absl::Time now) {
    absl::Duration wait = options_.min_resolve_interval;
    for (int i = 0; i < errors_ && wait < options_.resolve_interval; ++i) {
      wait *= 2;
    }
    errors_ = std::min(errors_ + 1, 64);
    return Bound(now + std::min(wait, options_.resolve_interval));
  }

  // A refresh at `now` with the next resolution planned at `planned`: when
  // it should be now.
  absl::Time Refreshed(absl::Time now, absl::Time planned) const {
    return std::min(planned, Bound(now));
  }

 private:
  absl::Time Bound(absl::Time t) const {
    return std::max(t, last_start_ + options_.min_resolve_interval);
  }

  const ResolverOptions options_;
  absl::Time last_start_ = absl::InfinitePast();
  int errors_ = 0;  // in a row
};

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_CONNECTIONS_RESOLVE_SCHEDULE_H_
