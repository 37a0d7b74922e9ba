// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/breaker_gate.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace tether {
namespace internal {

absl::Duration BreakerGate::RetryDelay() const {
  constexpr absl::Duration kProbeWait = absl::Milliseconds(200);
  // Half-open with every probe out: the probes' outcomes (close or reopen)
  // come at any moment and nobody tells a waiting stream, so ask again
  // shortly. Waiting for `open_until()` (the oldest probe's timeout, 30 s by
  // default) would leave it idle long after the breaker closed.
  if (breaker_->state() == BreakerState::kHalfOpen) return kProbeWait;
  absl::Time until = breaker_->open_until();
  absl::Time now = clock_->Now();
  if (until == absl::InfiniteFuture() || until == absl::InfinitePast() ||
      until <= now) {
    return kProbeWait;
  }
  return until - now;
}

Outcome BreakerGate::Classify(const absl::Status& status, EndClass cls,
                              bool by_client) {
  if (by_client) return kIgnored;
  switch (cls) {
    case EndClass::kOk:
    case EndClass::kPermanent:
      return kIgnored;
    case EndClass::kDrain:
      return IsConnectFailure(status) ? kFailure : kIgnored;
    case EndClass::kTransient:
      return kFailure;
    case EndClass::kResync:  // the stream asked for it: nothing failed
      return kIgnored;
  }
  return kIgnored;
}

bool BreakerGate::IsConnectFailure(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kUnavailable) return false;
  const std::string m = absl::AsciiStrToLower(status.message());
  return absl::StrContains(m, "failed to connect") ||
         absl::StrContains(m, "connection refused") ||
         absl::StrContains(m, "dns resolution failed") ||
         absl::StrContains(m, "no route to host") ||
         absl::StrContains(m, "connect failed");
}

}  // namespace internal
}  // namespace tether
