// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// tether::prometheus end to end: streams on a pool behind a Service-like
// proxy record into a prometheus::Registry served by prometheus-cpp's
// Exposer on 127.0.0.1; the test scrapes /metrics with curl (a real HTTP
// client) before, during and after a graceful rollout between two real gRPC
// servers, and checks that the counters move as they should. Every wait is on
// a condition with a generous deadline.
#include <array>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"
#include "support/fault_proxy.h"
#include "test/integration/stream_test_util.h"
#include "test/support/test_server.h"
#include "tether/circuit_breaker.h"
#include "tether/connection_pool.h"
#include "tether/metrics.h"
#include "tether/prometheus.h"
#include "tether/reconnecting_bidi_stream.h"
#include "tether/testing/fake_bidi_transport.h"
#include "tether/testing/fake_clock.h"

namespace tether {
namespace testsupport {
namespace {

using ::tether::support::FaultProxy;

constexpr absl::Duration kWait = absl::Seconds(30);
constexpr int kStreams = 4;
constexpr char kMethod[] = "tether.test.SeqStream/Watch";
constexpr char kBidiMethod[] = "tether.test.Chat/Chat";

// One scrape: "name{labels}" -> value, as prometheus' text format lists it.
class Scrape {
 public:
  // Runs curl on `url`; an empty scrape (and a test failure) if curl fails.
  static Scrape Get(const std::string& url) {
    Scrape s;
    const std::string cmd =
        absl::StrCat("curl -sS --fail --max-time 10 '", url, "'");
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) {
      ADD_FAILURE() << "cannot run curl";
      return s;
    }
    std::array<char, 4096> buf;
    std::size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) {
      s.text.append(buf.data(), n);
    }
    const int rc = pclose(p);
    if (rc != 0) ADD_FAILURE() << cmd << " exited with " << rc;
    for (absl::string_view line : absl::StrSplit(s.text, '\n')) {
      if (line.empty() || line[0] == '#') continue;
      const std::size_t sp = line.rfind(' ');
      double v = 0;
      if (sp == absl::string_view::npos ||
          !absl::SimpleAtod(line.substr(sp + 1), &v)) {
        continue;
      }
      s.series[std::string(line.substr(0, sp))] = v;
    }
    return s;
  }

  // The sum of every series of `name` whose labels contain each of `has`
  // (e.g. `tether_reason="migration"`).
  double Sum(absl::string_view name,
             const std::vector<std::string>& has = {}) const {
    double total = 0;
    for (const auto& [key, v] : series) {
      const absl::string_view k = key;
      if (k.substr(0, k.find('{')) != name) continue;
      bool all = true;
      for (const std::string& h : has) all = all && k.find(h) != k.npos;
      if (all) total += v;
    }
    return total;
  }
  bool Has(absl::string_view text) const {
    return this->text.find(std::string(text)) != std::string::npos;
  }

  std::string text;
  std::map<std::string, double> series;
};

// A sink whose registry is served at `url` (empty if the exposer found no
// port) on 127.0.0.1.
struct Endpoint {
  Endpoint() {
    exposer.RegisterCollectable(registry);
    if (exposer.GetListeningPorts().size() == 1) {
      url = absl::StrCat("http://127.0.0.1:", exposer.GetListeningPorts()[0],
                         "/metrics");
    }
  }
  std::shared_ptr<prometheus::Registry> registry =
      std::make_shared<prometheus::Registry>();
  std::shared_ptr<PrometheusMetricsSink> sink =
      PrometheusMetricsSink::Create(registry);
  prometheus::Exposer exposer{"127.0.0.1:0"};
  std::string url;
};

std::unique_ptr<TestServer> StartServer(const std::string& name) {
  TestServerOptions o;
  o.name = name;
  auto server = std::make_unique<TestServer>(o);
  absl::Status s = server->Start();
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? std::move(server) : nullptr;
}

TEST(PrometheusScrape, CountersMoveDuringARollout) {
  auto a = StartServer("A");
  auto b = StartServer("B");
  ASSERT_TRUE(a && b);
  FaultProxy proxy;
  ASSERT_TRUE(proxy.Start().ok());
  ASSERT_TRUE(proxy.SetBackend(a->address()).ok());

  Endpoint metrics;
  ASSERT_FALSE(metrics.url.empty());
  const std::shared_ptr<PrometheusMetricsSink>& sink = metrics.sink;
  const std::string& url = metrics.url;

  // The endpoint answers before anything ran (prometheus-cpp lists a family
  // only once it has a series).
  Scrape empty = Scrape::Get(url);
  EXPECT_TRUE(empty.Has("exposer_scrapes_total")) << empty.text;
  EXPECT_FALSE(empty.Has("tether_client_attempt_started_total"));

  CircuitBreakerOptions bo;
  bo.name = "seq";
  bo.observer = MakeMetricsBreakerObserver(sink);
  auto breaker = CircuitBreaker::Create(bo).value();

  ConnectionPoolOptions po;
  po.target = proxy.address();
  po.observer = MakeMetricsConnectionObserver(sink);
  auto pool = ConnectionPool::Create(std::move(po)).value();

  std::vector<std::unique_ptr<Collector>> collectors;
  std::vector<std::unique_ptr<SeqStream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    collectors.push_back(std::make_unique<Collector>());
    ReconnectingStreamOptions so;
    so.breaker = breaker;
    so.observer = MakeMetricsObserver(sink, kMethod, proxy.address());
    auto s = SeqStream::Start(pool, WatchSpec(absl::StrCat("k", i)), so,
                              collectors.back()->MessageFn(),
                              collectors.back()->DoneFn());
    ASSERT_TRUE(s.ok()) << s.status();
    streams.push_back(*std::move(s));
  }
  for (auto& c : collectors) ASSERT_TRUE(c->WaitForMoreFrom("A", 3, kWait));

  const std::string method = absl::StrCat("grpc_method=\"", kMethod, "\"");
  Scrape before = Scrape::Get(url);
  EXPECT_TRUE(before.Has("# TYPE tether_client_attempt_started_total counter"))
      << before.text;
  EXPECT_TRUE(before.Has("# TYPE tether_client_streams_open gauge"));
  EXPECT_EQ(before.Sum("tether_client_streams_open", {method}), kStreams);
  EXPECT_EQ(before.Sum("tether_client_attempt_started_total",
                       {method, "tether_reason=\"first\""}),
            kStreams);
  EXPECT_EQ(before.Sum("tether_client_migrations_total"), 0);
  EXPECT_EQ(before.Sum("tether_client_attempt_time_to_first_message_seconds_"
                       "count"),
            kStreams);
  EXPECT_GE(before.Sum("tether_client_connections", {"tether_state=\"ready\""}),
            1);
  EXPECT_GE(
      before.Sum("tether_client_breaker_calls_total",
                 {"tether_breaker=\"seq\"", "tether_outcome=\"success\""}),
      kStreams);
  EXPECT_EQ(before.Sum("tether_client_breaker_state",
                       {"tether_breaker=\"seq\"", "tether_state=\"closed\""}),
            1);
  const double opened_before =
      before.Sum("tether_client_connections_opened_total");

  // The rollout: new connections go to B; A sends GOAWAY and drains.
  ASSERT_TRUE(proxy.SetBackend(b->address()).ok());
  a->ShutdownAsync(absl::Seconds(5));
  for (auto& c : collectors) ASSERT_TRUE(c->WaitForMoreFrom("B", 3, kWait));
  ASSERT_TRUE(a->WaitForStopped(kWait));

  // The old attempts' ends are recorded as their cancels complete: wait for
  // them (bounded) rather than for a fixed time.
  Scrape during;
  const absl::Time deadline = absl::Now() + kWait;
  do {
    during = Scrape::Get(url);
    if (during.Sum("tether_client_attempt_duration_seconds_count",
                   {method, "tether_end=\"cancelled\""}) >= kStreams) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  } while (absl::Now() < deadline);
  EXPECT_TRUE(
      during.Has("# TYPE tether_client_attempt_duration_seconds "
                 "histogram"));
  EXPECT_EQ(during.Sum("tether_client_streams_open", {method}), kStreams);
  EXPECT_GE(during.Sum("tether_client_migrations_total", {method}), kStreams)
      << during.text;
  EXPECT_GE(during.Sum("tether_client_attempt_started_total",
                       {method, "tether_reason=\"migration\""}),
            kStreams);
  EXPECT_GE(during.Sum("tether_client_attempt_duration_seconds_count",
                       {method, "grpc_status=\"CANCELLED\"",
                        "tether_end=\"cancelled\""}),
            kStreams);
  EXPECT_GT(during.Sum("tether_client_connections_opened_total"),
            opened_before);
  EXPECT_GE(during.Sum("tether_client_connections", {"tether_state=\"ready\""}),
            1);
  EXPECT_EQ(during.Sum("tether_client_gaps_total"), 0);
  EXPECT_EQ(during.Sum("tether_client_streams_gave_up_total"), 0);
  // A drain is not a failure: the breaker stays closed.
  EXPECT_EQ(during.Sum("tether_client_breaker_transitions_total"), 0);
  for (auto& c : collectors) EXPECT_EQ(c->out_of_order(), 0);
  EXPECT_TRUE(
      during.Has("# TYPE tether_client_messages_delivered_total counter"));
  EXPECT_GE(during.Sum("tether_client_messages_delivered_total",
                       {method, "tether_kind=\"server_stream\""}),
            6 * kStreams);

  // Streams released: the gauge goes back to zero once their calls end,
  // each stream's duration is recorded as cancelled (the app let go), and
  // the delivered counter holds exactly what the app received.
  streams.clear();
  Scrape after;
  const absl::Time deadline2 = absl::Now() + kWait;
  do {
    after = Scrape::Get(url);
    if (after.Sum("tether_client_streams_open", {method}) == 0) break;
    absl::SleepFor(absl::Milliseconds(20));
  } while (absl::Now() < deadline2);
  EXPECT_EQ(after.Sum("tether_client_streams_open", {method}), 0);
  EXPECT_TRUE(
      after.Has("# TYPE tether_client_stream_duration_seconds histogram"));
  EXPECT_EQ(
      after.Sum("tether_client_stream_duration_seconds_count",
                {method, "tether_kind=\"server_stream\"",
                 "grpc_status=\"CANCELLED\"", "tether_end=\"cancelled\""}),
      kStreams);
  double received = 0;
  for (auto& c : collectors) received += c->count();
  EXPECT_EQ(after.Sum("tether_client_messages_delivered_total", {method}),
            received);
  pool.reset();
}

// The bidi series (outbox depth, refused writes) from a bidi stream on fake
// attempts: a full outbox is reached deterministically, and the series go
// through the same sink and exposer.
TEST(PrometheusScrape, BidiOutboxAndRefusedWrites) {
  using Bidi = ReconnectingBidiStream<std::string, std::string>;
  Endpoint metrics;
  ASSERT_FALSE(metrics.url.empty());
  const std::shared_ptr<PrometheusMetricsSink>& sink = metrics.sink;
  const std::string& url = metrics.url;

  auto clock = std::make_shared<fakes::FakeClock>();
  auto source = std::make_shared<fakes::FakeConnectionSource>();
  auto transport =
      std::make_shared<fakes::FakeBidiTransport<std::string, std::string>>(
          source, clock);
  Bidi::Spec spec;
  spec.attempt_factory = transport;
  spec.open_requests = [](const ResumeState&) {
    return std::vector<std::string>{"open"};
  };
  spec.acknowledges = [](const std::string& w, const std::string& r) {
    return r == "ack " + w;
  };
  ReconnectingStreamOptions o;
  o.clock = clock;
  o.max_outbox = 3;
  o.observer =
      MakeMetricsObserver(sink, kBidiMethod, "fake", clock, StreamKind::kBidi);
  auto stream = Bidi::Start(
      source, std::move(spec), o, [](std::string&&) {},
      [](const absl::Status&) {});
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (const char* w : {"a", "b", "c"}) ASSERT_TRUE((*stream)->Write(w).ok());
  EXPECT_EQ((*stream)->Write("d").code(), absl::StatusCode::kResourceExhausted);
  transport->attempt(0)->Send("ack a");

  const std::string method = absl::StrCat("grpc_method=\"", kBidiMethod, "\"");
  Scrape s = Scrape::Get(url);
  EXPECT_TRUE(s.Has("# TYPE tether_client_outbox_depth gauge")) << s.text;
  EXPECT_EQ(s.Sum("tether_client_outbox_depth", {method}), 2);
  EXPECT_TRUE(s.Has("# TYPE tether_client_writes_refused_total counter"));
  EXPECT_EQ(s.Sum("tether_client_writes_refused_total", {method}), 1);
  EXPECT_EQ(s.Sum("tether_client_messages_delivered_total",
                  {method, "tether_kind=\"bidi\""}),
            1);

  (*stream)->Cancel();
  clock->RunDue();
  Scrape ended = Scrape::Get(url);
  EXPECT_EQ(ended.Sum("tether_client_outbox_depth", {method}), 0);
  EXPECT_EQ(
      ended.Sum("tether_client_stream_duration_seconds_count",
                {method, "tether_kind=\"bidi\"", "tether_end=\"cancelled\""}),
      1);
}

}  // namespace
}  // namespace testsupport
}  // namespace tether
