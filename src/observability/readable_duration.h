// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: durations in log lines and error messages, as a person reads them.
#ifndef TETHER_SRC_OBSERVABILITY_READABLE_DURATION_H_
#define TETHER_SRC_OBSERVABILITY_READABLE_DURATION_H_

#include <string>

#include "absl/time/time.h"

#include "tether/internal/visibility.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

// Whole microseconds below 1 ms, whole milliseconds below 10 s, tenths of a
// second above ("662us", "1.234s", "12.3s", "6m0s"); "inf" for an infinite
// duration. Truncated, never rounded up (a wait never reads longer than it
// is).
std::string ReadableDuration(absl::Duration d);

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_OBSERVABILITY_READABLE_DURATION_H_
