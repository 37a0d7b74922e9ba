// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/connection_pool.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "connections/grpc_connection_driver.h"
#include "connections/pool_core.h"

namespace tether {

// The public facade: validates the options and wires a `PoolCore` (the
// logic, pool_core.cc) to a `GrpcConnectionDriver` (the gRPC side,
// grpc_connection_driver.cc).

namespace {

// Longest `ConnectionPoolOptions::label` (a metrics label value).
constexpr std::size_t kMaxLabel = 256;

std::vector<Endpoint> AsEndpoints(const std::vector<std::string>& addresses) {
  std::vector<Endpoint> out;
  out.reserve(addresses.size());
  for (const std::string& a : addresses) out.push_back({a, ""});
  return out;
}

// What a pool's endpoint source talks to: the core, held weakly (the
// source may outlive the pool by a call in flight).
class CoreSink final : public EndpointSource::Sink {
 public:
  explicit CoreSink(std::weak_ptr<internal::PoolCore> core)
      : core_(std::move(core)) {}
  void OnEndpoints(std::vector<Endpoint> endpoints) override {
    auto core = core_.lock();
    if (core == nullptr) return;
    absl::Status s =
        endpoints.empty()
            ? absl::NotFoundError("endpoint source answered with no endpoint")
            : ValidateEndpoints(endpoints);
    if (!s.ok()) {
      core->OnEndpointsError(s);
      return;
    }
    core->SetEndpoints(endpoints, internal::PoolCore::Removal::kConfirmed);
  }
  void OnEndpointsError(const absl::Status& status) override {
    if (auto core = core_.lock()) core->OnEndpointsError(status);
  }

 private:
  const std::weak_ptr<internal::PoolCore> core_;
};

}  // namespace

absl::Status Validate(const ConnectionPoolOptions& o) {
  const int sources = (o.target.empty() ? 0 : 1) +
                      (o.addresses.empty() ? 0 : 1) +
                      (o.endpoints == nullptr ? 0 : 1);
  if (sources != 1) {
    return absl::InvalidArgumentError(
        "connection pool needs exactly one of target, addresses and "
        "endpoints");
  }
  if (!o.addresses.empty()) {
    absl::Status s = ValidateEndpoints(AsEndpoints(o.addresses));
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("connection pool addresses: ", s.message()));
    }
  }
  for (const auto& f : o.interceptor_factories) {
    if (f == nullptr) {
      return absl::InvalidArgumentError(
          "connection pool interceptor_factories must not contain null");
    }
  }
  if (o.max_connections < 1 || o.max_connections > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("connection pool max_connections must be in [1, 1024], "
                     "got ",
                     o.max_connections));
  }
  if (o.standby_connections < 0 || o.standby_connections > 64 ||
      o.standby_connections >= o.max_connections) {
    return absl::InvalidArgumentError(absl::StrCat(
        "connection pool standby_connections must be in [0, 64] and below "
        "max_connections (",
        o.max_connections, "), got ", o.standby_connections));
  }
  if (o.max_streams_per_connection < 0 ||
      o.max_streams_per_connection >
          ConnectionPoolOptions::kMaxStreamsPerConnection) {
    return absl::InvalidArgumentError(absl::StrCat(
        "connection pool max_streams_per_connection must be in [0, ",
        ConnectionPoolOptions::kMaxStreamsPerConnection, "] (0: no cap), got ",
        o.max_streams_per_connection));
  }
  if (o.idle_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "connection pool idle_timeout must be > 0 (or infinite), got ",
        absl::FormatDuration(o.idle_timeout)));
  }
  // gRPC takes keepalive in int milliseconds (24.8 days at most); a day is
  // far beyond any useful ping interval and reads as what it is.
  const absl::Duration max_keepalive = absl::Hours(24);
  if (o.keepalive_time != absl::InfiniteDuration() &&
      (o.keepalive_time < absl::Seconds(10) ||
       o.keepalive_time > max_keepalive)) {
    return absl::InvalidArgumentError(
        absl::StrCat("connection pool keepalive_time must be in [10s, 24h] "
                     "or infinite, got ",
                     absl::FormatDuration(o.keepalive_time)));
  }
  if (o.keepalive_timeout <= absl::ZeroDuration() ||
      o.keepalive_timeout > max_keepalive) {
    return absl::InvalidArgumentError(
        absl::StrCat("connection pool keepalive_timeout must be in (0, 24h], "
                     "got ",
                     absl::FormatDuration(o.keepalive_timeout)));
  }
  if (o.probe_initial_backoff < absl::Milliseconds(1) ||
      o.probe_initial_backoff > o.probe_max_backoff) {
    return absl::InvalidArgumentError(
        absl::StrCat("connection pool probe_initial_backoff must be in [1ms, "
                     "probe_max_backoff (",
                     absl::FormatDuration(o.probe_max_backoff), ")], got ",
                     absl::FormatDuration(o.probe_initial_backoff)));
  }
  if (o.probe_max_backoff > absl::Hours(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "connection pool probe_max_backoff must be in [probe_initial_backoff, "
        "1h], got ",
        absl::FormatDuration(o.probe_max_backoff)));
  }
  if (o.suspect_after_ends < 1 || o.suspect_after_ends > 10000) {
    return absl::InvalidArgumentError(
        absl::StrCat("connection pool suspect_after_ends must be in [1, "
                     "10000], got ",
                     o.suspect_after_ends));
  }
  if (o.suspect_end_window <= absl::ZeroDuration() ||
      o.suspect_end_window > absl::Hours(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("connection pool suspect_end_window must be in (0, 1h], "
                     "got ",
                     absl::FormatDuration(o.suspect_end_window)));
  }
  if (o.suspect_probation != absl::InfiniteDuration() &&
      (o.suspect_probation <= absl::ZeroDuration() ||
       o.suspect_probation > absl::Hours(24))) {
    return absl::InvalidArgumentError(
        absl::StrCat("connection pool suspect_probation must be in (0, 24h] "
                     "or infinite, got ",
                     absl::FormatDuration(o.suspect_probation)));
  }
  if (o.label.size() > kMaxLabel) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConnectionPoolOptions.label must be at most ", kMaxLabel,
                     " characters, got ", o.label.size()));
  }
  switch (o.balancing) {
    case EndpointBalancing::kDetect:
    case EndpointBalancing::kPerConnection:
    case EndpointBalancing::kPerCall:
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "connection pool balancing must be kDetect, kPerConnection or "
          "kPerCall, got ",
          static_cast<int>(o.balancing)));
  }
  return absl::OkStatus();
}

std::string PoolLabel(const ConnectionPoolOptions& o) {
  if (!o.label.empty()) return o.label;
  if (!o.target.empty()) return o.target;
  if (!o.addresses.empty()) return AddressListLabel(o.addresses);
  if (o.endpoints != nullptr) return o.endpoints->Label();
  return "";
}

absl::StatusOr<std::shared_ptr<ConnectionPool>> ConnectionPool::Create(
    ConnectionPoolOptions options) {
  absl::Status s = Validate(options);
  if (!s.ok()) return s;
  std::shared_ptr<ConnectionPool> pool(new ConnectionPool());
  pool->label_ = PoolLabel(options);
  pool->driver_ = internal::GrpcConnectionDriver::Create(options);
  pool->core_ = internal::PoolCore::Create(options, pool->driver_.get());
  pool->driver_->SetCore(pool->core_);
  pool->source_ = options.endpoints;
  if (pool->source_ != nullptr) {
    std::weak_ptr<EndpointSource> source = pool->source_;
    pool->core_->SetRefreshHook([source] {
      if (auto s = source.lock()) s->Refresh();
    });
  }
  pool->core_->Start();
  if (pool->source_ != nullptr) {
    pool->source_->Start(std::make_shared<CoreSink>(pool->core_));
  }
  return pool;
}

ConnectionPool::~ConnectionPool() {
  if (source_ != nullptr) source_->Stop();
  if (core_ != nullptr) core_->Shutdown();
  if (driver_ != nullptr) driver_->Shutdown();
}

absl::StatusOr<ConnectionPick> ConnectionPool::Pick(
    std::weak_ptr<DrainListener> listener) {
  return core_->Pick(std::move(listener));
}

void ConnectionPool::Release(std::uint64_t connection_id,
                             const std::weak_ptr<DrainListener>& listener) {
  core_->Release(connection_id, listener);
}

void ConnectionPool::ReportDrainEnd(std::uint64_t connection_id,
                                    const absl::Status& status) {
  core_->ReportDrainEnd(connection_id, status);
}

void ConnectionPool::ReportUnannouncedEnd(std::uint64_t connection_id,
                                          const EndReport& report) {
  core_->ReportUnannouncedEnd(connection_id, report);
}

void ConnectionPool::NotifyWhenAvailable(
    std::weak_ptr<DrainListener> listener) {
  core_->NotifyWhenAvailable(std::move(listener));
}

bool ConnectionPool::IsConnected(std::uint64_t connection_id) {
  return core_->IsConnected(connection_id);
}

absl::optional<double> ConnectionPool::SpreadShare(
    std::uint64_t connection_id) {
  return core_->SpreadShare(connection_id);
}

absl::optional<double> ConnectionPool::ReopenShare(
    std::uint64_t connection_id) {
  return core_->ReopenShare(connection_id);
}

ConnectionPoolStats ConnectionPool::Stats() const { return core_->Stats(); }

absl::Status ConnectionPool::SetEndpoints(std::vector<Endpoint> endpoints) {
  absl::Status s = ValidateEndpoints(endpoints);
  if (!s.ok()) return s;
  core_->SetEndpoints(endpoints, internal::PoolCore::Removal::kAtOnce);
  return absl::OkStatus();
}

std::vector<EndpointStats> ConnectionPool::Endpoints() const {
  return core_->Endpoints();
}

}  // namespace tether
