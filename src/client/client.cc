// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/client.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tether {
namespace {

// The observers of one part: the client's (logging, metrics) and the
// user's own, in that order; null when there is none.
template <class Observer>
std::shared_ptr<Observer> Combined(
    std::vector<std::shared_ptr<Observer>> observers) {
  std::vector<std::shared_ptr<Observer>> present;
  for (auto& o : observers) {
    if (o) present.push_back(std::move(o));
  }
  if (present.empty()) return nullptr;
  if (present.size() == 1) return present.front();
  return CombineObservers(std::move(present));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  if (options.pool.breaker) {
    return absl::InvalidArgumentError(
        "ClientOptions.pool.breaker must be empty: the client gives the pool "
        "its own breaker (configure it with ClientOptions.breaker)");
  }
  if (options.streams.breaker) {
    return absl::InvalidArgumentError(
        "ClientOptions.streams.breaker must be empty: the client gives every "
        "stream its own breaker (configure it with ClientOptions.breaker)");
  }
  if (options.unary.breaker) {
    return absl::InvalidArgumentError(
        "ClientOptions.unary.breaker must be empty: the client gives every "
        "unary caller its own breaker (configure it with "
        "ClientOptions.breaker)");
  }
  if (absl::Status s = Validate(options.streams); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ClientOptions.streams: ", s.message()));
  }
  if (!options.connections) {
    // Before anything starts: a pool that cannot be made leaves nothing
    // behind (no breaker timers, no logging observer).
    if (absl::Status s = Validate(options.pool); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ClientOptions.pool: ", s.message()));
    }
  }
  if (absl::Status s = Validate(options.unary); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ClientOptions.unary: ", s.message()));
  }

  std::unique_ptr<Client> client(new Client());
  client->clock_ = options.clock;
  client->metrics_ = std::move(options.metrics);
  // The label of the pool's metrics and the breaker's default name.
  client->target_label_ = PoolLabel(options.pool);

  if (options.logging.has_value()) {
    if (!options.logging->clock) options.logging->clock = options.clock;
    absl::StatusOr<std::shared_ptr<LoggingObserver>> log =
        LoggingObserver::Create(*std::move(options.logging));
    if (!log.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ClientOptions.logging: ", log.status().message()));
    }
    client->log_ = *std::move(log);
  }

  if (options.use_breaker) {
    if (options.breaker.name == CircuitBreakerOptions().name &&
        !client->target_label_.empty()) {
      options.breaker.name = client->target_label_;
    }
    options.breaker.observer = Combined<BreakerObserver>(
        {client->log_,
         client->metrics_ ? MakeMetricsBreakerObserver(client->metrics_)
                          : nullptr,
         std::move(options.breaker.observer)});
    absl::StatusOr<std::shared_ptr<CircuitBreaker>> breaker =
        CircuitBreaker::Create(std::move(options.breaker), options.clock);
    if (!breaker.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ClientOptions.breaker: ", breaker.status().message()));
    }
    client->breaker_ = *std::move(breaker);
  }

  if (options.connections) {
    client->connections_ = std::move(options.connections);
  } else {
    options.pool.breaker = client->breaker_;
    if (!options.pool.clock) options.pool.clock = options.clock;
    options.pool.observer = Combined<ConnectionObserver>(
        {client->log_,
         client->metrics_ ? MakeMetricsConnectionObserver(client->metrics_)
                          : nullptr,
         std::move(options.pool.observer)});
    absl::StatusOr<std::shared_ptr<ConnectionPool>> pool =
        ConnectionPool::Create(std::move(options.pool));
    if (!pool.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ClientOptions.pool: ", pool.status().message()));
    }
    client->pool_ = *std::move(pool);
    client->connections_ = client->pool_;
  }

  client->retry_budget_ = std::move(options.retry_budget);
  if (!client->retry_budget_) {
    RetryBudgetOptions budget;
    if (!client->target_label_.empty()) budget.name = client->target_label_;
    budget.clock = options.clock;
    client->retry_budget_ = RetryBudget::Create(std::move(budget)).value();
  }
  client->unary_options_ = std::move(options.unary);
  client->unary_options_.breaker = client->breaker_;
  if (!client->unary_options_.retry_budget) {
    client->unary_options_.retry_budget = client->retry_budget_;
  }
  if (!options.streams.retry_budget) {
    options.streams.retry_budget = client->retry_budget_;
  }
  if (!client->unary_options_.clock) {
    client->unary_options_.clock = options.clock;
  }
  client->stream_options_ = std::move(options.streams);
  return client;
}

Client::~Client() = default;

absl::StatusOr<ReconnectingStreamOptions> Client::OptionsFor(
    const StreamSettings& settings, StreamKind kind) const {
  ReconnectingStreamOptions options =
      settings.options.value_or(stream_options_);
  if (settings.options.has_value()) {
    if (options.breaker) {
      return absl::InvalidArgumentError(
          "StreamSettings.options.breaker must be empty: the client gives "
          "every stream its own breaker");
    }
    if (absl::Status s = Validate(options); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("StreamSettings.options: ", s.message()));
    }
  }
  options.breaker = breaker_;
  if (!options.retry_budget) options.retry_budget = retry_budget_;
  if (!options.clock) options.clock = clock_;
  const std::string method =
      settings.method.empty() ? "unnamed" : settings.method;
  options.observer = Combined<StreamObserver>(
      {log_ ? log_->ForStream(absl::StrCat(method, "#", ++streams_made_))
            : nullptr,
       metrics_ ? MakeMetricsObserver(metrics_, method, target_label_,
                                      options.clock, kind)
                : nullptr,
       std::move(options.observer)});
  return options;
}

}  // namespace tether
