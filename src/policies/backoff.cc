// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/backoff.h"

#include <algorithm>
#include <cmath>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"

namespace tether {

absl::Status Validate(const ExponentialBackoffOptions& o) {
  if (o.initial_delay <= absl::ZeroDuration() ||
      o.initial_delay == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("backoff initial_delay must be finite and > 0, got ",
                     absl::FormatDuration(o.initial_delay)));
  }
  if (o.max_delay < o.initial_delay ||
      o.max_delay == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("backoff max_delay must be finite and >= initial_delay (",
                     absl::FormatDuration(o.initial_delay), "), got ",
                     absl::FormatDuration(o.max_delay)));
  }
  if (!(o.multiplier >= 1.0) || !std::isfinite(o.multiplier)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backoff multiplier must be finite and >= 1.0, got ", o.multiplier));
  }
  if (o.jitter == Jitter::kProportional &&
      !(o.jitter_fraction >= 0.0 && o.jitter_fraction <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backoff jitter_fraction must be in [0, 1], got ", o.jitter_fraction));
  }
  return absl::OkStatus();
}

ExponentialBackoffOptions GrpcConnectionBackoffOptions() {
  ExponentialBackoffOptions o;
  o.initial_delay = absl::Seconds(1);
  o.max_delay = absl::Seconds(120);
  o.multiplier = 1.6;
  o.jitter = Jitter::kProportional;
  o.jitter_fraction = 0.2;
  return o;
}

absl::StatusOr<std::unique_ptr<ExponentialBackoff>> ExponentialBackoff::Create(
    const ExponentialBackoffOptions& options) {
  absl::Status s = Validate(options);
  if (!s.ok()) return s;
  return std::unique_ptr<ExponentialBackoff>(new ExponentialBackoff(options));
}

std::unique_ptr<BackoffPolicy> ExponentialBackoff::Clone() const {
  return std::unique_ptr<BackoffPolicy>(new ExponentialBackoff(options_));
}

absl::Duration ExponentialBackoff::OnFailure(absl::BitGenRef gen) {
  const double initial = absl::ToDoubleSeconds(options_.initial_delay);
  const double cap = absl::ToDoubleSeconds(options_.max_delay);
  // Grow in floating point and stop growing at the cap, so a long outage can
  // neither overflow nor make the schedule jump.
  double d = initial * std::pow(options_.multiplier, failures_);
  if (!(d < cap)) {
    d = cap;
  } else {
    ++failures_;
  }
  switch (options_.jitter) {
    case Jitter::kNone:
      break;
    case Jitter::kFull:
      d = absl::Uniform(absl::IntervalClosedOpen, gen, 0.0, d);
      break;
    case Jitter::kProportional: {
      const double f = options_.jitter_fraction;
      if (f > 0) d = absl::Uniform(gen, d * (1 - f), d * (1 + f));
      break;
    }
  }
  return absl::Seconds(d);
}

}  // namespace tether
