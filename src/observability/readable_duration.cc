// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "observability/readable_duration.h"

namespace tether {
namespace internal {

std::string ReadableDuration(absl::Duration d) {
  if (d == absl::InfiniteDuration() || d == -absl::InfiniteDuration()) {
    return absl::FormatDuration(d);
  }
  absl::Duration unit = absl::Milliseconds(100);
  if (absl::AbsDuration(d) < absl::Milliseconds(1)) {
    unit = absl::Microseconds(1);
  } else if (absl::AbsDuration(d) < absl::Seconds(10)) {
    unit = absl::Milliseconds(1);
  }
  return absl::FormatDuration(absl::Trunc(d, unit));
}

}  // namespace internal
}  // namespace tether
