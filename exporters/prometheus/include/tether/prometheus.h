// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_PROMETHEUS_H_
#define TETHER_PROMETHEUS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "prometheus/registry.h"
#include "tether/metrics.h"

namespace tether {

// The Prometheus name of a metric: dots become underscores, counters end in
// `_total` and histograms in seconds in `_seconds`
// ("tether.client.attempt.started" -> "tether_client_attempt_started_total").
// Attribute keys likewise ("grpc.method" -> "grpc_method").
std::string PrometheusName(MetricId metric);
std::string PrometheusLabelName(absl::string_view key);

// A `MetricsSink` that keeps tether's metrics in a `prometheus::Registry`
// (prometheus-cpp); expose the registry with prometheus-cpp's `Exposer`
// (pull) or push it with its `Gateway`. Target `tether::prometheus`.
//
// Every metric's family is registered at `Create` (prometheus-cpp lists a
// family in a scrape once it has a series). Counters become Prometheus
// counters, up-down counters gauges, histograms histograms with the
// descriptor's buckets.
//
// Thread safety: all methods may be called concurrently (prometheus-cpp's
// families and metrics are thread-safe). The sink keeps the registry alive.
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   auto sink = tether::PrometheusMetricsSink::Create(registry);
//   prometheus::Exposer exposer("127.0.0.1:9464");
//   exposer.RegisterCollectable(registry);
//   stream_options.observer =
//       tether::MakeMetricsObserver(sink, "ledger.Ledger/Watch", target);
class PrometheusMetricsSink final : public MetricsSink {
 public:
  static std::shared_ptr<PrometheusMetricsSink> Create(
      std::shared_ptr<prometheus::Registry> registry);
  ~PrometheusMetricsSink() override;

  void Add(MetricId metric, absl::Span<const absl::string_view> labels,
           double delta) override;
  void Record(MetricId metric, absl::Span<const absl::string_view> labels,
              double value) override;

  const std::shared_ptr<prometheus::Registry>& registry() const {
    return registry_;
  }

 private:
  struct Families;
  explicit PrometheusMetricsSink(std::shared_ptr<prometheus::Registry> r);

  const std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> families_;
};

}  // namespace tether

#endif  // TETHER_PROMETHEUS_H_
