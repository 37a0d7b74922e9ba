// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// An example application class built on tether: it follows the price of one
// stock symbol over a server stream that survives server rollouts. Its test,
// price_ticker_test.cc, shows how to unit-test such a class with
// tether::tether_mocks, with no server and no real time.
#ifndef TETHER_EXAMPLES_TESTING_PRICE_TICKER_H_
#define TETHER_EXAMPLES_TESTING_PRICE_TICKER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tether/circuit_breaker.h"
#include "tether/reconnecting_stream.h"
#include "tether/stream_options.h"
#include "tether/transport.h"

namespace ticker {

// The messages of the quote service. A real service would use generated
// protobuf messages; `ReconnectingStream` works with any movable types.
struct QuoteRequest {
  std::string symbol;
  // Resume after this sequence number; 0 starts from the current price.
  std::uint64_t after_seq = 0;
};

struct Quote {
  std::uint64_t seq = 0;  // 1, 2, ... per symbol; never 0
  std::string symbol;
  std::int64_t price_cents = 0;
  std::int64_t volume = 0;  // shares traded since the previous quote
};

// How the ticker reaches the quote service. Set exactly one field.
struct QuoteService {
  // Production: starts one call on the generated stub, e.g.
  //   [](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext* ctx,
  //      const QuoteRequest* req, grpc::ClientReadReactor<Quote>* r) {
  //     Quotes::NewStub(ch)->async()->Follow(ctx, req, r);
  //   }
  std::function<void(const std::shared_ptr<grpc::Channel>&,
                     grpc::ClientContext*, const QuoteRequest*,
                     grpc::ClientReadReactor<Quote>*)>
      start;
  // Tests: a `tether::fakes::FakeTransport<QuoteRequest, Quote>`.
  std::shared_ptr<tether::AttemptFactory<QuoteRequest, Quote>> attempts;
};

enum class TickerHealth {
  kLive,      // following the price
  kDegraded,  // the service's breaker is open: the price may be stale
  kClosed,    // the server ended the feed (market closed)
  kFailed,    // the feed ended with an error; see `Snapshot::failure`
};

// Follows the price and traded volume of one symbol.
//
// Every quote is applied exactly once and in order, across reconnects (tether
// resumes after the last applied quote and drops repeats), so the running
// volume is exact. When `options.stream.breaker` is set, the ticker reports
// `kDegraded` while that breaker is open, whoever tripped it.
//
// Thread safety: `snapshot()` may be called from any thread. Quotes arrive
// on gRPC's (or the test's) threads. Destroying the ticker stops the feed and
// waits for its callbacks.
//
//   auto t = PriceTicker::Start(pool, {.start = ...}, {"ACME", {}}).value();
//   Display(t->snapshot().price_cents);
class PriceTicker {
 public:
  struct Options {
    // The symbol to follow. Required, non-empty.
    std::string symbol;
    // Passed to the stream (clock, breaker, observer, budgets). Default: the
    // stream's defaults.
    tether::ReconnectingStreamOptions stream;
  };

  struct Snapshot {
    TickerHealth health = TickerHealth::kLive;
    std::int64_t price_cents = 0;
    std::int64_t total_volume = 0;
    std::uint64_t quotes = 0;    // quotes applied
    std::uint64_t last_seq = 0;  // of the last applied quote
    absl::Status failure;        // with kFailed
  };

  // INVALID_ARGUMENT for an empty symbol or a service with neither or both
  // fields set, or whatever the stream rejects.
  static absl::StatusOr<std::unique_ptr<PriceTicker>> Start(
      tether::Target target, QuoteService service, Options options);

  ~PriceTicker();
  PriceTicker(const PriceTicker&) = delete;
  PriceTicker& operator=(const PriceTicker&) = delete;

  Snapshot snapshot() const;

 private:
  explicit PriceTicker(std::shared_ptr<tether::CircuitBreaker> breaker);

  void OnQuote(Quote&& quote);
  void OnDone(const absl::Status& status);
  void OnBreaker(tether::BreakerState to);

  const std::shared_ptr<tether::CircuitBreaker> breaker_;
  std::uint64_t listener_id_ = 0;
  mutable std::mutex mu_;
  Snapshot state_;
  bool breaker_open_ = false;
  std::unique_ptr<tether::ReconnectingStream<QuoteRequest, Quote>> stream_;
};

}  // namespace ticker

#endif  // TETHER_EXAMPLES_TESTING_PRICE_TICKER_H_
