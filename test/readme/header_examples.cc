// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The usage examples in tether's public headers, as written there (keep them
// in sync): they must compile with Debian's abseil (20220623, no absl/log).
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "test/readme/readme_prelude.h"
#include "tether/client.h"
#include "tether/logging.h"
#include "tether/metrics.h"
#include "tether/reconnecting_stream.h"
#include "tether/resolved_endpoints.h"

// clang-format off: the examples are kept as the headers show them.
namespace {

using WatchRequest = WatchAccountRequest;
using Event = AccountEvent;
using Watch = tether::ReconnectingStream<WatchRequest, Event>;

// include/tether/reconnecting_stream.h, class comment.
[[maybe_unused]] void ReconnectingStreamExample(
    std::shared_ptr<grpc::Channel> channel, Watch::Spec spec) {
  auto stream = tether::ReconnectingStream<WatchRequest, Event>::Start(
      channel, spec, {},
      [](Event&& e) { Apply(e); },
      [](const absl::Status& s) {
        std::fprintf(stderr, "ended: %s\n", s.ToString().c_str());
      });
}

// include/tether/logging.h, class comment.
[[maybe_unused]] void LoggingExample(
    tether::ReconnectingStreamOptions& stream_options,
    tether::ConnectionPoolOptions& pool_options) {
  tether::LoggingOptions lo;
  lo.prefix = "ledger";
  auto log = tether::LoggingObserver::Create(lo).value();
  stream_options.observer = log;
  pool_options.observer = log;
}

// include/tether/metrics.h, MetricsStreamObserver.
[[maybe_unused]] void MetricsExample() {
  auto sink = std::make_shared<tether::InMemoryMetricsSink>();
  tether::ReconnectingStreamOptions options;
  options.observer = tether::MakeMetricsObserver(
      sink, "ledger.Ledger/Watch", "dns:///ledger:443");
}

// include/tether/client.h, class comment.
[[maybe_unused]] absl::Status ClientExample(
    Watch::Spec spec, Watch::MessageCallback on_event,
    Watch::DoneCallback on_done) {
  tether::ClientOptions options;
  options.pool.target = "ledger.internal:443";
  auto client = tether::Client::Create(options);
  if (!client.ok()) return client.status();
  auto watch = (*client)->Start(spec, on_event, on_done);
  return watch.status();
}

// include/tether/endpoints.h, EndpointSource's class comment: a source fed
// by your own discovery.
class MySource final : public tether::EndpointSource {
 public:
  void Start(std::shared_ptr<Sink> sink) override { sink_ = sink; }
  void Stop() override { sink_.reset(); }
  // on each update from discovery: sink_->OnEndpoints(list);
  void OnDiscovery(std::vector<tether::Endpoint> list) {
    sink_->OnEndpoints(std::move(list));
  }

 private:
  std::shared_ptr<Sink> sink_;
};

// include/tether/resolved_endpoints.h and docs/endpoints.md: a pool that
// follows a DNS name.
[[maybe_unused]] absl::Status ResolvedEndpointsExample() {
  auto source = tether::ResolvedEndpoints("dns:///ledger.prod.svc.cluster.local:7000");
  if (!source.ok()) return source.status();
  tether::ConnectionPoolOptions o;
  o.endpoints = *source;
  auto pool = tether::ConnectionPool::Create(std::move(o));
  if (!pool.ok()) return pool.status();
  o.endpoints = std::make_shared<MySource>();
  return absl::OkStatus();
}

}  // namespace
// clang-format on
