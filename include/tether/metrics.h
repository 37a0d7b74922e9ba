// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_METRICS_H_
#define TETHER_METRICS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tether/circuit_breaker.h"
#include "tether/clock.h"
#include "tether/connection_pool.h"
#include "tether/internal/mutex.h"
#include "tether/observer.h"

namespace tether {

// The metrics tether records, named in the style of gRPC's own metrics (gRFC
// A66: `grpc.client.attempt.started`, ...). gRPC 1.51 (Debian 12) records
// none of A66's metrics itself, so tether records the attempt metrics of its
// streams under its own prefix, with A66's attribute names (`grpc.method`,
// `grpc.target`, `grpc.status`).
enum class MetricId {
  kAttemptStarted,             // counter
  kAttemptDuration,            // histogram, seconds
  kAttemptTimeToFirstMessage,  // histogram, seconds
  kStreamsOpen,                // up-down counter
  kMigrations,                 // counter
  kDuplicatesDropped,          // counter
  kGaps,                       // counter
  kStalls,                     // counter
  kResyncs,                    // counter
  kStreamsGaveUp,              // counter
  kBreakerState,               // up-down counter (0 or 1 per state)
  kBreakerTransitions,         // counter
  kBreakerCalls,               // counter
  kConnections,                // up-down counter
  kConnectionsOpened,          // counter
  kEndpoints,                  // up-down counter
  kEndpointErrors,             // counter
  kMessagesDelivered,          // counter
  kOutboxDepth,                // up-down counter
  kWritesRefused,              // counter
  kStreamDuration,             // histogram, seconds
  kRetryBudgetWaits,           // counter
};

enum class MetricKind {
  kCounter,        // only grows (deltas are >= 0)
  kUpDownCounter,  // a gauge moved by deltas
  kHistogram,      // recorded values
};

// What a metric is, for exporters.
struct MetricDescriptor {
  MetricId id;
  MetricKind kind;
  absl::string_view name;         // "tether.client.attempt.started"
  absl::string_view unit;         // UCUM, as in A66: "{attempt}", "s"
  absl::string_view description;  // one line
  // The attribute keys, in the order a sink receives the values.
  std::vector<absl::string_view> label_keys;
  // Histograms only: bucket upper bounds (A66's latency buckets, extended to
  // one hour since a stream's attempts may last that long).
  std::vector<double> buckets;
};

// Every metric, in `MetricId` order.
const std::vector<MetricDescriptor>& AllMetrics();
const MetricDescriptor& Describe(MetricId id);

// Where the metrics go: the small interface an exporter implements
// (`tether::PrometheusMetricsSink` in target `tether::prometheus`, or your
// own for another system).
//
// `labels` holds one value per `Describe(metric).label_keys` entry, in order.
// Thread safety: called concurrently from gRPC's, the clock's and the pool's
// threads, never under a tether lock; implementations must be thread-safe
// and must not block.
class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  // Counters and up-down counters: adds `delta` (negative only for up-down
  // counters).
  virtual void Add(MetricId metric, absl::Span<const absl::string_view> labels,
                   double delta) = 0;
  // Histograms: records one value.
  virtual void Record(MetricId metric,
                      absl::Span<const absl::string_view> labels,
                      double value) = 0;
};

// A sink that keeps everything in memory; for tests and for reading values
// in-process. Thread-safe.
class InMemoryMetricsSink final : public MetricsSink {
 public:
  void Add(MetricId metric, absl::Span<const absl::string_view> labels,
           double delta) override;
  void Record(MetricId metric, absl::Span<const absl::string_view> labels,
              double value) override;

  // The current value of a counter or up-down counter; 0 if never touched.
  double Value(MetricId metric, const std::vector<std::string>& labels) const;
  // The sum over every label set of a counter or up-down counter.
  double Total(MetricId metric) const;
  // How many values a histogram recorded for `labels`, and over all labels.
  std::uint64_t Count(MetricId metric,
                      const std::vector<std::string>& labels) const;
  std::uint64_t TotalCount(MetricId metric) const;

 private:
  struct Series {
    double value = 0;  // counters: the value; histograms: the sum
    std::uint64_t count = 0;
  };
  using Key = std::pair<MetricId, std::vector<std::string>>;
  mutable internal::Mutex mu_;
  std::map<Key, Series> series_ ABSL_GUARDED_BY(mu_);
};

// Records one stream's events. Use one per stream (the stream holds it, and
// releasing it closes the stream in `tether.client.streams.open`):
//
//   auto sink = std::make_shared<tether::InMemoryMetricsSink>();
//   tether::ReconnectingStreamOptions options;
//   options.observer = tether::MakeMetricsObserver(
//       sink, "ledger.Ledger/Watch", pool->label());
//
// A stream counts as open from its first attempt until the stream is
// destroyed and its last gRPC call has finished (the moment the stream
// releases its observer). Its duration (`tether.client.stream.duration`)
// runs from its first attempt to its end, or to its release for a stream
// destroyed before its end (recorded as cancelled). `kind` labels
// `tether.client.messages.delivered` and the duration (`tether.kind`).
//
// Thread safety: as `StreamObserver`; the sink is called without locks.
class MetricsStreamObserver final : public StreamObserver {
 public:
  // `clock` times the attempts; null means `SystemClock()`.
  MetricsStreamObserver(std::shared_ptr<MetricsSink> sink, std::string method,
                        std::string target,
                        std::shared_ptr<Clock> clock = nullptr,
                        StreamKind kind = StreamKind::kServerStream);
  ~MetricsStreamObserver() override;

  void OnAttemptStarted(const AttemptInfo& info) override;
  void OnFirstMessage(const AttemptInfo& info,
                      absl::Duration since_start) override;
  void OnAttemptEnded(const AttemptInfo& info, const absl::Status& status,
                      EndClass classified, bool by_client) override;
  void OnDuplicateDropped(std::uint64_t seq,
                          std::uint64_t last_delivered) override;
  void OnGap(std::uint64_t expected, std::uint64_t got) override;
  void OnRetryBudgetWait(absl::Duration added) override;
  void OnGaveUp(const absl::Status& status) override;
  void OnStalled(const AttemptInfo& info, absl::Duration silent_for) override;

  // Counts the resync in `tether.client.resyncs`.
  void OnResync(const absl::Status& why, std::uint64_t resume_after) override;
  void OnMessageDelivered() override;
  void OnStreamEnded(const absl::Status& status, StreamEnd how) override;
  void OnOutboxChanged(std::int64_t delta) override;
  void OnWriteRefused() override;

 private:
  // Records the stream's duration and takes its outbox out of the gauge;
  // the first call only.
  void RecordEnd(const absl::Status& status, StreamEnd how);

  const std::shared_ptr<MetricsSink> sink_;
  const std::string method_;
  const std::string target_;
  const std::shared_ptr<Clock> clock_holder_;
  Clock* const clock_;
  const StreamKind kind_;
  internal::Mutex mu_;
  bool counted_open_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time opened_at_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  // Writes in this stream's outbox, as the gauge holds them.
  std::int64_t outbox_ ABSL_GUARDED_BY(mu_) = 0;
  // Start times of running attempts, by attempt number.
  std::map<std::uint64_t, absl::Time> started_ ABSL_GUARDED_BY(mu_);
};

std::shared_ptr<MetricsStreamObserver> MakeMetricsObserver(
    std::shared_ptr<MetricsSink> sink, std::string method, std::string target,
    std::shared_ptr<Clock> clock = nullptr,
    StreamKind kind = StreamKind::kServerStream);

// Records a pool's connections by state (`tether.client.connections`,
// attribute `tether.state`: connecting, ready, draining, suspect) and the
// connections opened, per address (`grpc.target`); its endpoints in the set
// (`tether.client.endpoints`) and its endpoint source's errors
// (`tether.client.endpoint.errors`). Set it as
// `ConnectionPoolOptions::observer`; one per pool. Thread-safe.
class MetricsConnectionObserver final : public ConnectionObserver {
 public:
  explicit MetricsConnectionObserver(std::shared_ptr<MetricsSink> sink);
  ~MetricsConnectionObserver() override;

  void OnConnectionOpened(std::uint64_t id, absl::string_view target) override;
  void OnConnectionReady(std::uint64_t id) override;
  void OnConnectionDraining(std::uint64_t id, absl::string_view why) override;
  void OnConnectionSuspect(std::uint64_t id,
                           const absl::Status& status) override;
  void OnConnectionRestored(std::uint64_t id) override;
  void OnConnectionRetired(std::uint64_t id) override;
  void OnEndpointAdded(absl::string_view address) override;
  void OnEndpointRemoved(absl::string_view address,
                         absl::string_view why) override;
  void OnEndpointsError(const absl::Status& status) override;

 private:
  struct Conn {
    std::string target;
    absl::string_view state;  // a literal
  };
  // Moves connection `id` to `state` (or forgets it for ""), and updates the
  // gauge after the lock.
  void Move(std::uint64_t id, absl::string_view state, bool only_if_suspect);

  const std::shared_ptr<MetricsSink> sink_;
  internal::Mutex mu_;
  std::map<std::uint64_t, Conn> conns_ ABSL_GUARDED_BY(mu_);
};

std::shared_ptr<MetricsConnectionObserver> MakeMetricsConnectionObserver(
    std::shared_ptr<MetricsSink> sink);

// Records breakers (`CircuitBreakerOptions::observer`): the state as one
// 0/1 series per state (`tether.client.breaker.state`), transitions, and
// calls by outcome (`success`, `failure`, `ignored`, `not_permitted`),
// labelled with the breaker's name (`tether.breaker`). One observer may serve
// many breakers. A breaker appears once it records its first event.
// Thread-safe.
class MetricsBreakerObserver final : public BreakerObserver {
 public:
  explicit MetricsBreakerObserver(std::shared_ptr<MetricsSink> sink);

  void OnStateChange(absl::string_view breaker, BreakerState from,
                     BreakerState to, const BreakerCounts& counts) override;
  void OnRecorded(absl::string_view breaker, Outcome outcome,
                  const BreakerCounts& counts) override;
  void OnNotPermitted(absl::string_view breaker,
                      const BreakerCounts& counts) override;

 private:
  // Makes `state` the breaker's current state in the gauge.
  void SetState(absl::string_view breaker, BreakerState state,
                bool only_if_unknown);

  const std::shared_ptr<MetricsSink> sink_;
  internal::Mutex mu_;
  std::map<std::string, BreakerState, std::less<>> states_ ABSL_GUARDED_BY(mu_);
};

std::shared_ptr<MetricsBreakerObserver> MakeMetricsBreakerObserver(
    std::shared_ptr<MetricsSink> sink);

// Observers that forward every event to each of `observers` in order (for
// metrics and logging on one stream, pool or breaker). Null entries are
// skipped.
std::shared_ptr<StreamObserver> CombineObservers(
    std::vector<std::shared_ptr<StreamObserver>> observers);
std::shared_ptr<ConnectionObserver> CombineObservers(
    std::vector<std::shared_ptr<ConnectionObserver>> observers);
std::shared_ptr<BreakerObserver> CombineObservers(
    std::vector<std::shared_ptr<BreakerObserver>> observers);

}  // namespace tether

#endif  // TETHER_METRICS_H_
