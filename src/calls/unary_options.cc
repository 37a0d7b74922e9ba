// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "absl/strings/str_cat.h"
#include "tether/internal/stream_random.h"
#include "tether/unary_call.h"
#include "time/system_clock.h"

namespace tether {

absl::Status Validate(const UnaryCallOptions& o) {
  if (o.max_attempts < 1 || o.max_attempts > 100) {
    return absl::InvalidArgumentError(absl::StrCat(
        "UnaryCallOptions.max_attempts must be in [1, 100], got ",
        o.max_attempts));
  }
  if (o.attempt_timeout <= absl::ZeroDuration() ||
      o.attempt_timeout > absl::Hours(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "UnaryCallOptions.attempt_timeout must be in (0, 1h], got ",
        absl::FormatDuration(o.attempt_timeout)));
  }
  if (o.overall_timeout <= absl::ZeroDuration() ||
      o.overall_timeout > absl::Hours(24)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "UnaryCallOptions.overall_timeout must be in (0, 24h], got ",
        absl::FormatDuration(o.overall_timeout)));
  }
  return absl::OkStatus();
}

namespace internal {

absl::StatusOr<UnarySetup> PrepareUnary(UnaryCallOptions& options) {
  UnarySetup setup;
  if (options.backoff) {
    setup.backoff = options.backoff->Clone();
  } else {
    auto made = ExponentialBackoff::Create(ExponentialBackoffOptions());
    if (!made.ok()) return made.status();
    setup.backoff = *std::move(made);
  }
  if (!options.clock) {
    options.clock = internal::SharedSystemClock();
  }
  if (!options.classifier) options.classifier = DefaultClassify;
  setup.seed = SeedOrEntropy(options.random_seed);
  return setup;
}

}  // namespace internal
}  // namespace tether
