// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/stream_options.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "policies/out_of_range.h"

namespace tether {

ReconnectingStreamOptions::ReconnectingStreamOptions() = default;
ReconnectingStreamOptions::~ReconnectingStreamOptions() = default;
ReconnectingStreamOptions::ReconnectingStreamOptions(
    const ReconnectingStreamOptions&) = default;
ReconnectingStreamOptions::ReconnectingStreamOptions(
    ReconnectingStreamOptions&&) noexcept = default;
ReconnectingStreamOptions& ReconnectingStreamOptions::operator=(
    const ReconnectingStreamOptions&) = default;
ReconnectingStreamOptions& ReconnectingStreamOptions::operator=(
    ReconnectingStreamOptions&&) noexcept = default;

namespace {

// A spread window (`migration_jitter`, `resync_jitter`): in [0, max].
struct Window {
  absl::string_view field;
  absl::Duration value;
  absl::Duration max;

  absl::Status Check() const {
    if (value >= absl::ZeroDuration() && value <= max) return absl::OkStatus();
    return internal::OutOfRange(
        "ReconnectingStreamOptions", field, absl::FormatDuration(value),
        absl::StrCat("in [0, ", absl::FormatDuration(max), "]"));
  }
};

}  // namespace

absl::Status Validate(const ReconnectingStreamOptions& o) {
  if (o.reopen_after_progress_jitter < absl::ZeroDuration() ||
      o.reopen_after_progress_jitter == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReconnectingStreamOptions.reopen_after_progress_jitter "
                     "must be finite and >= 0, got ",
                     absl::FormatDuration(o.reopen_after_progress_jitter)));
  }
  if (o.max_attempts_without_progress < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReconnectingStreamOptions.max_attempts_without_progress "
                     "must be >= 1, got ",
                     o.max_attempts_without_progress));
  }
  if (o.max_time_without_progress <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReconnectingStreamOptions.max_time_without_progress must "
                     "be > 0 (or InfiniteDuration), got ",
                     absl::FormatDuration(o.max_time_without_progress)));
  }
  if (o.migration_handoff_timeout <= absl::ZeroDuration() ||
      o.migration_handoff_timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReconnectingStreamOptions.migration_handoff_timeout must "
                     "be finite and > 0, got ",
                     absl::FormatDuration(o.migration_handoff_timeout)));
  }
  for (const Window& window :
       {Window{"migration_jitter", o.migration_jitter,
               ReconnectingStreamOptions::kMaxMigrationJitter},
        Window{"resync_jitter", o.resync_jitter,
               ReconnectingStreamOptions::kMaxResyncJitter}}) {
    absl::Status valid = window.Check();
    if (!valid.ok()) return valid;
  }
  if (o.attempt_settle_time <= absl::ZeroDuration() ||
      o.attempt_settle_time > absl::Hours(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReconnectingStreamOptions.attempt_settle_time must be > "
                     "0 and <= 1h, got ",
                     absl::FormatDuration(o.attempt_settle_time)));
  }
  if (o.stall_timeout != absl::ZeroDuration() &&
      (o.stall_timeout < absl::Milliseconds(1) ||
       o.stall_timeout > absl::Hours(24))) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReconnectingStreamOptions.stall_timeout must be 0 (off) "
                     "or in [1ms, 24h], got ",
                     absl::FormatDuration(o.stall_timeout)));
  }
  if (o.attempt_open_timeout <= absl::ZeroDuration() ||
      o.attempt_open_timeout > absl::Hours(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReconnectingStreamOptions.attempt_open_timeout must be > "
                     "0 and <= 1h, got ",
                     absl::FormatDuration(o.attempt_open_timeout)));
  }
  if (o.recovery_jitter < absl::ZeroDuration() ||
      o.recovery_jitter > absl::Seconds(10)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReconnectingStreamOptions.recovery_jitter must be in [0, 10s], got ",
        absl::FormatDuration(o.recovery_jitter)));
  }
  if (o.max_outbox < 1 || o.max_outbox > (std::size_t{1} << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReconnectingStreamOptions.max_outbox must be in [1, 1048576], got ",
        o.max_outbox));
  }
  if (o.max_buffered_messages < 1) {
    return absl::InvalidArgumentError(
        "ReconnectingStreamOptions.max_buffered_messages must be >= 1, got 0");
  }
  return absl::OkStatus();
}

}  // namespace tether
