// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// `tether::Client`: the one object for the common case. It owns the parts a
// dependency needs (a connection pool, a circuit breaker wired to the pool
// and to every stream and caller it makes, logging and metrics observers)
// and makes server streams, bidi streams and unary callers on them.
#ifndef TETHER_CLIENT_H_
#define TETHER_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "tether/circuit_breaker.h"
#include "tether/clock.h"
#include "tether/connection_pool.h"
#include "tether/logging.h"
#include "tether/metrics.h"
#include "tether/reconnecting_bidi_stream.h"
#include "tether/reconnecting_stream.h"
#include "tether/stream_options.h"
#include "tether/unary_call.h"

namespace tether {

// Everything a `Client` needs, with defaults that suit a dependency rolled
// out several times a day. Each part keeps its own options struct (see
// their headers for each field's meaning, default and valid range).
struct ClientOptions {
  // Where the connections go and how (`target` or `addresses`,
  // credentials, keepalive, health checks...). `pool.breaker` must stay
  // empty: the client gives the pool its own breaker. `pool.observer` is
  // kept and runs next to the client's logging and metrics. Required:
  // `pool.target` or `pool.addresses`. Unlike a `ConnectionPoolOptions()`,
  // `pool.health_check` is on: a server that turns NOT_SERVING before it
  // goes away (a Kubernetes preStop hook) moves its streams before its
  // GOAWAY, and a server without the health service answers UNIMPLEMENTED,
  // which counts as serving; the cost is one Watch call per connection.
  ConnectionPoolOptions pool = HealthChecked();

  // The dependency's circuit breaker, shared by the pool, every stream and
  // every unary caller the client makes. Default: `CircuitBreakerOptions()`
  // with `name` set to the pool's label (see `Client::target_label`) when
  // left "default". `breaker.observer` is kept and runs next to the
  // client's logging and metrics.
  CircuitBreakerOptions breaker;
  // False: no breaker at all (streams retry on their budget alone). Default
  // true.
  bool use_breaker = true;

  // Bounds retries after failures (not drains) across every stream and
  // unary caller the client makes, so that a failure on every call at once
  // is not multiplied by their retries. Default null: the client makes one
  // from `RetryBudgetOptions()` (10 retries a second, 100 at once, plus 20%
  // of recent first tries), named after the pool's label. Give several
  // clients the same budget to bound the whole process. A stream's or
  // caller's own `retry_budget`, when set, is kept.
  std::shared_ptr<RetryBudget> retry_budget;

  // Options of every stream the client makes, unless a stream brings its
  // own (`StreamSettings::options`). `streams.breaker` must stay empty (the
  // client sets it); `streams.observer` is kept and runs next to the
  // client's. Default: `ReconnectingStreamOptions()`.
  ReconnectingStreamOptions streams;

  // Options of every unary caller. `unary.breaker` must stay empty (the
  // client sets it). Default: `UnaryCallOptions()`.
  UnaryCallOptions unary;

  // Log lines for the pool, the breaker and every stream. Default:
  // `LoggingOptions()` (INFO and above to stderr, rate-limited); nullopt:
  // no logging.
  absl::optional<LoggingOptions> logging = LoggingOptions();

  // Where metrics go (`InMemoryMetricsSink`, `PrometheusMetricsSink`, your
  // own). Default null: no metrics.
  std::shared_ptr<MetricsSink> metrics;

  // Time and timers for every part whose own `clock` is empty. Default
  // null: `SystemClock()`. Tests pass a `fakes::FakeClock`.
  std::shared_ptr<Clock> clock;

  // Where streams and callers pick their connections instead of a pool
  // made from `pool`. Default null: the client makes a `ConnectionPool`.
  // Unit tests pass a `fakes::FakeConnectionSource` (then `pool` is not
  // used and `Client::pool()` is null).
  std::shared_ptr<ConnectionSource> connections;

 private:
  static ConnectionPoolOptions HealthChecked() {
    ConnectionPoolOptions o;
    o.health_check = true;
    return o;
  }
};

// What one stream adds to the client's defaults.
struct StreamSettings {
  // Names the stream's method in metrics (`grpc.method`), e.g.
  // "ledger.v1.Ledger/WatchAccount", and the stream in log lines
  // ("stream <method>#<n>: ...", n counting the client's streams from 1).
  // Default "": labelled "unnamed".
  std::string method;
  // Replaces `ClientOptions::streams` for this stream (same rules: leave
  // `breaker` empty). Default nullopt: the client's.
  absl::optional<ReconnectingStreamOptions> options;
};

// The one object for a dependency: a drain-aware `ConnectionPool`, a
// `CircuitBreaker` given to the pool (so an outage that ends turns it
// half-open at once) and to every stream and unary caller made here,
// a `LoggingObserver` and the metrics observers, all from one
// `ClientOptions`. The parts stay usable on their own; `pool()` and
// `breaker()` hand them out for anything the client does not make.
//
//   tether::ClientOptions options;
//   options.pool.target = "ledger.internal:443";
//   auto client = tether::Client::Create(options);
//   if (!client.ok()) return client.status();
//   auto watch = (*client)->Start(spec, on_event, on_done);
//
// Thread safety: every method may be called from any thread concurrently.
// Lifetime: streams and callers keep the pool and the breaker alive, so the
// client may be destroyed before them.
class Client {
 public:
  // INVALID_ARGUMENT naming the field for invalid options (the parts'
  // validation, plus the fields the client sets itself).
  static absl::StatusOr<std::unique_ptr<Client>> Create(ClientOptions options);

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // A server stream with callbacks (see `ReconnectingStream::Start`).
  template <class Request, class Response>
  absl::StatusOr<std::unique_ptr<ReconnectingStream<Request, Response>>> Start(
      StreamSpec<Request, Response> spec,
      typename ReconnectingStream<Request, Response>::MessageCallback
          on_message,
      typename ReconnectingStream<Request, Response>::DoneCallback on_done,
      StreamSettings settings = {}) {
    absl::StatusOr<ReconnectingStreamOptions> options =
        OptionsFor(settings, StreamKind::kServerStream);
    if (!options.ok()) return options.status();
    return ReconnectingStream<Request, Response>::Start(
        connections_, std::move(spec), *std::move(options),
        std::move(on_message), std::move(on_done));
  }

  // A server stream with a blocking reader (see `ReconnectingStream::Open`).
  template <class Request, class Response>
  absl::StatusOr<std::unique_ptr<ReconnectingStream<Request, Response>>> Open(
      StreamSpec<Request, Response> spec, StreamSettings settings = {}) {
    absl::StatusOr<ReconnectingStreamOptions> options =
        OptionsFor(settings, StreamKind::kServerStream);
    if (!options.ok()) return options.status();
    return ReconnectingStream<Request, Response>::Open(
        connections_, std::move(spec), *std::move(options));
  }

  // A bidi stream with callbacks (see `ReconnectingBidiStream::Start`).
  template <class Request, class Response>
  absl::StatusOr<std::unique_ptr<ReconnectingBidiStream<Request, Response>>>
  Start(
      BidiStreamSpec<Request, Response> spec,
      typename ReconnectingBidiStream<Request, Response>::MessageCallback
          on_message,
      typename ReconnectingBidiStream<Request, Response>::DoneCallback on_done,
      StreamSettings settings = {}) {
    absl::StatusOr<ReconnectingStreamOptions> options =
        OptionsFor(settings, StreamKind::kBidi);
    if (!options.ok()) return options.status();
    return ReconnectingBidiStream<Request, Response>::Start(
        connections_, std::move(spec), *std::move(options),
        std::move(on_message), std::move(on_done));
  }

  // A bidi stream with a blocking reader.
  template <class Request, class Response>
  absl::StatusOr<std::unique_ptr<ReconnectingBidiStream<Request, Response>>>
  Open(BidiStreamSpec<Request, Response> spec, StreamSettings settings = {}) {
    absl::StatusOr<ReconnectingStreamOptions> options =
        OptionsFor(settings, StreamKind::kBidi);
    if (!options.ok()) return options.status();
    return ReconnectingBidiStream<Request, Response>::Open(
        connections_, std::move(spec), *std::move(options));
  }

  // A unary caller for the generated method `start` (see `StartWith`), with
  // `ClientOptions::unary` and the client's breaker.
  template <class Request, class Response>
  absl::StatusOr<std::unique_ptr<UnaryCaller<Request, Response>>> Unary(
      typename UnaryCaller<Request, Response>::StartFn start) {
    return UnaryCaller<Request, Response>::Create(
        connections_, std::move(start), unary_options_);
  }

  // The same through `factory` (a `fakes::FakeUnaryTransport` in tests).
  template <class Request, class Response>
  absl::StatusOr<std::unique_ptr<UnaryCaller<Request, Response>>> Unary(
      std::shared_ptr<UnaryAttemptFactory<Request, Response>> factory) {
    return UnaryCaller<Request, Response>::Create(
        connections_, std::move(factory), unary_options_);
  }

  // The parts, for what the client does not make itself. `pool()` is null
  // when `ClientOptions::connections` was given; `connections()` is what
  // streams and callers pick from (the pool, or that source).
  const std::shared_ptr<ConnectionPool>& pool() const { return pool_; }
  const std::shared_ptr<ConnectionSource>& connections() const {
    return connections_;
  }
  // Null when `use_breaker` is false.
  const std::shared_ptr<CircuitBreaker>& breaker() const { return breaker_; }
  const std::shared_ptr<RetryBudget>& retry_budget() const {
    return retry_budget_;
  }
  // `ClientOptions::streams` as given: a start for a stream's own options
  // (`StreamSettings::options`), e.g. to add an observer of its own.
  const ReconnectingStreamOptions& stream_options() const {
    return stream_options_;
  }
  // The `grpc.target` metric label and the breaker's default name:
  // `PoolLabel(ClientOptions::pool)` (also when `ClientOptions::connections`
  // replaces the pool).
  const std::string& target_label() const { return target_label_; }

 private:
  Client() = default;

  // The client's stream options for `settings`: the breaker, the clock and
  // the observers (logging, metrics, the user's) filled in.
  absl::StatusOr<ReconnectingStreamOptions> OptionsFor(
      const StreamSettings& settings, StreamKind kind) const;

  ReconnectingStreamOptions stream_options_;
  UnaryCallOptions unary_options_;
  std::shared_ptr<MetricsSink> metrics_;
  std::shared_ptr<LoggingObserver> log_;
  std::shared_ptr<Clock> clock_;
  std::string target_label_;
  std::shared_ptr<CircuitBreaker> breaker_;
  std::shared_ptr<RetryBudget> retry_budget_;
  std::shared_ptr<ConnectionPool> pool_;
  std::shared_ptr<ConnectionSource> connections_;
  // Numbers the streams in their log names.
  mutable std::atomic<std::uint64_t> streams_made_{0};
};

}  // namespace tether

#endif  // TETHER_CLIENT_H_
