// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include <cstddef>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "tether/prometheus.h"

namespace tether {

std::string PrometheusLabelName(absl::string_view key) {
  return absl::StrReplaceAll(key, {{".", "_"}});
}

std::string PrometheusName(MetricId metric) {
  const MetricDescriptor& d = Describe(metric);
  std::string name = PrometheusLabelName(d.name);
  if (d.kind == MetricKind::kCounter) return name + "_total";
  if (d.unit == "s") return name + "_seconds";
  return name;
}

// One family per metric, indexed by MetricId; exactly one pointer is set.
struct PrometheusMetricsSink::Families {
  struct Entry {
    prometheus::Family<prometheus::Counter>* counter = nullptr;
    prometheus::Family<prometheus::Gauge>* gauge = nullptr;
    prometheus::Family<prometheus::Histogram>* histogram = nullptr;
    std::vector<std::string> keys;
    prometheus::Histogram::BucketBoundaries buckets;
  };
  std::vector<Entry> entries;
};

namespace {

prometheus::Labels ToLabels(const std::vector<std::string>& keys,
                            absl::Span<const absl::string_view> values) {
  prometheus::Labels labels;
  for (std::size_t i = 0; i < keys.size() && i < values.size(); ++i) {
    labels.emplace(keys[i], std::string(values[i]));
  }
  return labels;
}

}  // namespace

std::shared_ptr<PrometheusMetricsSink> PrometheusMetricsSink::Create(
    std::shared_ptr<prometheus::Registry> registry) {
  if (!registry) registry = std::make_shared<prometheus::Registry>();
  return std::shared_ptr<PrometheusMetricsSink>(
      new PrometheusMetricsSink(std::move(registry)));
}

PrometheusMetricsSink::PrometheusMetricsSink(
    std::shared_ptr<prometheus::Registry> r)
    : registry_(std::move(r)), families_(std::make_unique<Families>()) {
  for (const MetricDescriptor& d : AllMetrics()) {
    Families::Entry e;
    for (absl::string_view k : d.label_keys) {
      e.keys.push_back(PrometheusLabelName(k));
    }
    const std::string name = PrometheusName(d.id);
    const std::string help =
        absl::StrCat(d.description, " (", d.name, ", unit ", d.unit, ")");
    switch (d.kind) {
      case MetricKind::kCounter:
        e.counter = &prometheus::BuildCounter().Name(name).Help(help).Register(
            *registry_);
        break;
      case MetricKind::kUpDownCounter:
        e.gauge = &prometheus::BuildGauge().Name(name).Help(help).Register(
            *registry_);
        break;
      case MetricKind::kHistogram:
        e.histogram =
            &prometheus::BuildHistogram().Name(name).Help(help).Register(
                *registry_);
        e.buckets.assign(d.buckets.begin(), d.buckets.end());
        break;
    }
    families_->entries.push_back(std::move(e));
  }
}

PrometheusMetricsSink::~PrometheusMetricsSink() = default;

void PrometheusMetricsSink::Add(MetricId metric,
                                absl::Span<const absl::string_view> labels,
                                double delta) {
  const auto i = static_cast<std::size_t>(metric);
  if (i >= families_->entries.size()) return;
  Families::Entry& e = families_->entries[i];
  if (e.counter != nullptr) {
    if (delta > 0) e.counter->Add(ToLabels(e.keys, labels)).Increment(delta);
  } else if (e.gauge != nullptr) {
    e.gauge->Add(ToLabels(e.keys, labels)).Increment(delta);
  }
}

void PrometheusMetricsSink::Record(MetricId metric,
                                   absl::Span<const absl::string_view> labels,
                                   double value) {
  const auto i = static_cast<std::size_t>(metric);
  if (i >= families_->entries.size()) return;
  Families::Entry& e = families_->entries[i];
  if (e.histogram == nullptr) return;
  e.histogram->Add(ToLabels(e.keys, labels), e.buckets).Observe(value);
}

}  // namespace tether
