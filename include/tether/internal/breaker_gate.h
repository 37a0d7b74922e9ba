// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: how a stream talks to an optional `CircuitBreaker`.
#ifndef TETHER_INTERNAL_BREAKER_GATE_H_
#define TETHER_INTERNAL_BREAKER_GATE_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tether/circuit_breaker.h"
#include "tether/classification.h"
#include "tether/clock.h"

namespace tether {
namespace internal {

// Wraps a stream's breaker, which may be absent (then every call is allowed
// and nothing is recorded).
class BreakerGate {
 public:
  using Ticket = CircuitBreaker::Permit;
  static constexpr Outcome kSuccess = Outcome::kSuccess;
  static constexpr Outcome kFailure = Outcome::kFailure;
  static constexpr Outcome kIgnored = Outcome::kIgnored;

  BreakerGate() = default;  // no breaker
  BreakerGate(std::shared_ptr<CircuitBreaker> breaker,
              std::shared_ptr<Clock> clock)
      : breaker_(std::move(breaker)), clock_(std::move(clock)) {}

  bool enabled() const { return breaker_ != nullptr; }

  // The same breaker on the same clock.
  bool SameAs(const BreakerGate& other) const {
    return breaker_ == other.breaker_ && clock_ == other.clock_;
  }

  // A permit, or UNAVAILABLE naming the open breaker and its last failure.
  absl::StatusOr<Ticket> Acquire() const { return breaker_->TryAcquire(); }

  void Record(Ticket ticket, Outcome outcome, const absl::Status& cause) const {
    breaker_->Record(std::move(ticket), outcome, cause);
  }

  // How long a refused stream waits before asking again: until the break
  // ends, or (half-open with every probe out) a short while.
  absl::Duration RetryDelay() const;

  // What an attempt that ended before its first message tells the breaker:
  // the client's own cancels, OK ends, drains and permanent errors (the
  // server answered) are ignored; transient errors, and drains that are
  // really a failure to connect at all, are failures.
  static Outcome Classify(const absl::Status& status, EndClass cls,
                          bool by_client);

  // What a pick that failed tells the breaker: no connection could be made
  // at all is a failure; no usable connection for another reason (all
  // draining, the source shut down) is ignored.
  static Outcome ClassifyFailedPick(const absl::Status& status) {
    return IsConnectFailure(status) ? kFailure : kIgnored;
  }

  // UNAVAILABLE because no connection could be made (refused, unreachable,
  // name not resolved), as opposed to a connection going away.
  static bool IsConnectFailure(const absl::Status& status);

 private:
  std::shared_ptr<CircuitBreaker> breaker_;
  std::shared_ptr<Clock> clock_;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_BREAKER_GATE_H_
