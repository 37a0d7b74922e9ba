// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "streams/end_decision.h"

#include "absl/strings/str_cat.h"

namespace tether {
namespace internal {

EndDecision DecideEnd(const EndFacts& f) {
  using Action = EndDecision::Action;
  EndDecision d;
  if (f.finishing) return d;
  if (!f.callback_error.ok() && !f.by_client) {
    d.action = Action::kEnd;
    d.status = f.callback_error;
    return d;
  }
  if (f.cls == EndClass::kResync && !f.by_client &&
      f.role != EndFacts::Role::kRetiring) {
    d.action = Action::kResync;
    return d;
  }
  if (f.role == EndFacts::Role::kRetiring) return d;
  d.report_unannounced =
      f.cls == EndClass::kDrain && !f.announced_drain && !f.by_client;
  if (f.role == EndFacts::Role::kFallback) {
    d.action = Action::kDropFallback;
    return d;
  }
  if (f.by_client) {
    // Only an ending stream cancels its current attempt; be safe anyway.
    d.action = Action::kReopen;
    d.after_progress = true;
    d.use_pushback = false;
    d.unless_starting = false;
    return d;
  }
  if (f.cls == EndClass::kOk) {
    d.action = Action::kEnd;
    d.status = absl::OkStatus();
    return d;
  }
  if (f.cls == EndClass::kPermanent || f.pushback_stop) {
    d.action = Action::kEnd;
    d.status = f.status;
    return d;
  }
  d.spends_retry = f.cls == EndClass::kTransient && !f.progressed;
  if (f.has_fallback) {
    d.action = Action::kFallBack;
    return d;
  }
  d.action = Action::kReopen;
  d.after_progress = f.progressed;
  d.at_once = f.spread_wait && f.cls == EndClass::kDrain;
  return d;
}

absl::StatusOr<absl::Duration> WithPushback(
    absl::StatusOr<absl::Duration> delay, bool pushback_present,
    absl::Duration pushback, absl::Time now, bool failing,
    absl::Time failing_since, absl::Duration max_time) {
  if (!delay.ok() || !pushback_present) return delay;
  const absl::Time since = failing ? failing_since : now;
  if (max_time != absl::InfiniteDuration() &&
      now + pushback > since + max_time) {
    return absl::UnavailableError(absl::StrCat(
        "tether: the server asked to retry in ", absl::FormatDuration(pushback),
        " (grpc-retry-pushback-ms), past max_time_without_progress"));
  }
  return pushback;
}

}  // namespace internal
}  // namespace tether
