// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/breaker_gate.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace tether {
namespace internal {

struct BreakerGate::Ticket::Impl {};

BreakerGate::Ticket::Ticket(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
BreakerGate::Ticket::Ticket(Ticket&&) noexcept = default;
BreakerGate::Ticket& BreakerGate::Ticket::operator=(Ticket&&) noexcept =
    default;
BreakerGate::Ticket::~Ticket() = default;

BreakerGate::BreakerGate(std::shared_ptr<CircuitBreaker> breaker,
                         std::shared_ptr<Clock> clock)
    : breaker_(std::move(breaker)), clock_(std::move(clock)) {}

absl::StatusOr<BreakerGate::Ticket> BreakerGate::Acquire() {
  return Ticket(std::make_unique<Ticket::Impl>());
}

void BreakerGate::Record(Ticket, Outcome, const absl::Status&) {}

absl::Duration BreakerGate::RetryDelay() const { return absl::Seconds(1); }

BreakerGate::Outcome BreakerGate::Classify(const absl::Status& status,
                                           EndClass cls, bool by_client) {
  if (by_client) return kIgnored;
  switch (cls) {
    case EndClass::kOk:
    case EndClass::kPermanent:
      return kIgnored;
    case EndClass::kDrain:
      return IsConnectFailure(status) ? kFailure : kIgnored;
    case EndClass::kTransient:
      return kFailure;
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
