// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: how a stream talks to an optional `CircuitBreaker`.
#ifndef TETHER_INTERNAL_BREAKER_GATE_H_
#define TETHER_INTERNAL_BREAKER_GATE_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tether/classification.h"
#include "tether/clock.h"

namespace tether {

class CircuitBreaker;

namespace internal {

// Wraps a stream's breaker, which may be absent (then every call is allowed
// and nothing is recorded). Keeps the breaker's header out of the stream's.
class BreakerGate {
 public:
  enum Outcome { kSuccess, kFailure, kIgnored };

  // A permit taken before an attempt; recorded exactly once.
  class Ticket {
   public:
    Ticket(Ticket&&) noexcept;
    Ticket& operator=(Ticket&&) noexcept;
    ~Ticket();

   private:
    friend class BreakerGate;
    struct Impl;
    explicit Ticket(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
  };

  BreakerGate(std::shared_ptr<CircuitBreaker> breaker,
              std::shared_ptr<Clock> clock);

  bool enabled() const { return breaker_ != nullptr; }

  // A permit, or UNAVAILABLE naming the open breaker and its last failure.
  absl::StatusOr<Ticket> Acquire();

  void Record(Ticket ticket, Outcome outcome, const absl::Status& cause);

  // How long a refused stream waits before asking again.
  absl::Duration RetryDelay() const;

  // What an attempt that ended before its first message tells the breaker:
  // the client's own cancels, OK ends, drains and permanent errors (the
  // server answered) are ignored; transient errors, and drains that are
  // really a failure to connect at all, are failures.
  static Outcome Classify(const absl::Status& status, EndClass cls,
                          bool by_client);

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
