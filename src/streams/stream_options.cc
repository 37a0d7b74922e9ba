// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/stream_options.h"

#include "absl/strings/str_cat.h"

namespace tether {

absl::Status Validate(const ReconnectingStreamOptions& o) {
  if (o.reopen_after_progress_jitter < absl::ZeroDuration() ||
      o.reopen_after_progress_jitter == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reopen_after_progress_jitter must be finite and >= 0, got ",
        absl::FormatDuration(o.reopen_after_progress_jitter)));
  }
  if (o.max_attempts_without_progress < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_attempts_without_progress must be >= 1, got ",
                     o.max_attempts_without_progress));
  }
  if (o.max_time_without_progress <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_time_without_progress must be > 0 (or InfiniteDuration), got ",
        absl::FormatDuration(o.max_time_without_progress)));
  }
  if (o.migration_handoff_timeout <= absl::ZeroDuration() ||
      o.migration_handoff_timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("migration_handoff_timeout must be finite and > 0, got ",
                     absl::FormatDuration(o.migration_handoff_timeout)));
  }
  if (o.migration_jitter < absl::ZeroDuration() ||
      o.migration_jitter == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("migration_jitter must be finite and >= 0, got ",
                     absl::FormatDuration(o.migration_jitter)));
  }
  if (o.max_buffered_messages < 1) {
    return absl::InvalidArgumentError(
        "max_buffered_messages must be >= 1, got 0");
  }
  return absl::OkStatus();
}

}  // namespace tether
