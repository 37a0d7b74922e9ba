// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "price_ticker.h"

#include <utility>

namespace ticker {

absl::StatusOr<std::unique_ptr<PriceTicker>> PriceTicker::Start(
    tether::Target target, QuoteService service, Options options) {
  if (options.symbol.empty()) {
    return absl::InvalidArgumentError("PriceTicker: symbol is empty");
  }
  if (static_cast<bool>(service.start) == static_cast<bool>(service.attempts)) {
    return absl::InvalidArgumentError(
        "PriceTicker: set exactly one of QuoteService.start and "
        "QuoteService.attempts");
  }
  std::unique_ptr<PriceTicker> ticker(new PriceTicker(options.stream.breaker));

  tether::StreamSpec<QuoteRequest, Quote> spec;
  spec.start = std::move(service.start);
  spec.attempt_factory = std::move(service.attempts);
  spec.request.symbol = options.symbol;
  spec.sequence_of = [](const Quote& q) -> absl::optional<std::uint64_t> {
    if (q.seq == 0) return absl::nullopt;
    return q.seq;
  };
  spec.resume_after = [](QuoteRequest& r, std::uint64_t seq) {
    r.after_seq = seq;
  };

  PriceTicker* self = ticker.get();
  auto stream = tether::ReconnectingStream<QuoteRequest, Quote>::Start(
      std::move(target), std::move(spec), std::move(options.stream),
      [self](Quote&& q) { self->OnQuote(std::move(q)); },
      [self](const absl::Status& s) { self->OnDone(s); });
  if (!stream.ok()) return stream.status();
  std::lock_guard<std::mutex> lock(ticker->mu_);
  ticker->stream_ = *std::move(stream);
  return ticker;
}

PriceTicker::PriceTicker(std::shared_ptr<tether::CircuitBreaker> breaker)
    : breaker_(std::move(breaker)) {
  if (breaker_) {
    listener_id_ = breaker_->AddListener(
        [this](tether::BreakerState, tether::BreakerState to) {
          OnBreaker(to);
        });
    OnBreaker(breaker_->state());
  }
}

PriceTicker::~PriceTicker() {
  if (breaker_) breaker_->RemoveListener(listener_id_);
  std::unique_ptr<tether::ReconnectingStream<QuoteRequest, Quote>> stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stream = std::move(stream_);
  }
  stream.reset();  // cancels and waits for the callbacks
}

PriceTicker::Snapshot PriceTicker::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

void PriceTicker::OnQuote(Quote&& quote) {
  std::lock_guard<std::mutex> lock(mu_);
  state_.price_cents = quote.price_cents;
  state_.total_volume += quote.volume;
  ++state_.quotes;
  state_.last_seq = quote.seq;
}

void PriceTicker::OnDone(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (status.ok()) {
    state_.health = TickerHealth::kClosed;
  } else {
    state_.health = TickerHealth::kFailed;
    state_.failure = status;
  }
}

void PriceTicker::OnBreaker(tether::BreakerState to) {
  std::lock_guard<std::mutex> lock(mu_);
  breaker_open_ = to == tether::BreakerState::kOpen ||
                  to == tether::BreakerState::kForcedOpen ||
                  to == tether::BreakerState::kHalfOpen;
  if (state_.health == TickerHealth::kLive ||
      state_.health == TickerHealth::kDegraded) {
    state_.health =
        breaker_open_ ? TickerHealth::kDegraded : TickerHealth::kLive;
  }
}

}  // namespace ticker
