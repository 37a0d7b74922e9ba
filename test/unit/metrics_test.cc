// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// The metrics observers: what each event records, a stream's metrics over a
// migration (fake transport, fake clock), the pool's connection gauge and
// the breaker's state gauge.
#include "tether/metrics.h"
#include "tether/resolved_endpoints.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/stream_fixture.h"
#include "tether/circuit_breaker.h"
#include "tether/connection_pool.h"
#include "tether/endpoints.h"
#include "tether/reconnecting_stream.h"
#include "tether/testing/fake_clock.h"
#include "tether/testing/fake_transport.h"

namespace tether {
namespace {

using ::testing::ElementsAre;

struct Req {
  std::uint64_t after = 0;
};
struct Resp {
  std::uint64_t seq = 0;
};
using Stream = ReconnectingStream<Req, Resp>;
using Transport = fakes::FakeTransport<Req, Resp>;

constexpr char kMethod[] = "pkg.Svc/Watch";
constexpr char kTarget[] = "dns:///svc:443";

TEST(MetricDescriptorsTest, NamesFollowA66AndAreUnique) {
  std::set<std::string> names;
  std::size_t i = 0;
  for (const MetricDescriptor& d : AllMetrics()) {
    EXPECT_EQ(static_cast<std::size_t>(d.id), i++) << d.name;
    EXPECT_EQ(d.name.substr(0, 14), "tether.client.") << d.name;
    EXPECT_TRUE(names.insert(std::string(d.name)).second) << d.name;
    EXPECT_FALSE(d.description.empty());
    EXPECT_EQ(d.kind == MetricKind::kHistogram, !d.buckets.empty()) << d.name;
  }
  EXPECT_EQ(Describe(MetricId::kAttemptDuration).label_keys,
            (std::vector<absl::string_view>{"grpc.method", "grpc.target",
                                            "grpc.status", "tether.end"}));
  EXPECT_EQ(Describe(MetricId::kResyncs).name, "tether.client.resyncs");
}

class StreamMetricsTest : public ::testing::Test {
 protected:
  StreamMetricsTest()
      : clock_(std::make_shared<fakes::FakeClock>()),
        source_(std::make_shared<fakes::FakeConnectionSource>()),
        transport_(std::make_shared<Transport>(source_, clock_)),
        sink_(std::make_shared<InMemoryMetricsSink>()) {
    options_.clock = clock_;
    options_.random_seed = 7;
    options_.reopen_after_progress_jitter = absl::ZeroDuration();
    options_.observer = MakeMetricsObserver(sink_, kMethod, kTarget, clock_);
  }
  void TearDown() override { clock_->RunDue(); }

  std::unique_ptr<Stream> StartStream() {
    Stream::Spec spec;
    spec.attempt_factory = transport_;
    spec.sequence_of = [](const Resp& r) -> absl::optional<std::uint64_t> {
      return r.seq;
    };
    spec.resume_after = [](Req& r, std::uint64_t seq) { r.after = seq; };
    auto s = Stream::Start(
        source_, std::move(spec), options_, [](Resp&&) {},
        [](const absl::Status&) {});
    EXPECT_TRUE(s.ok()) << s.status();
    options_.observer.reset();  // the stream holds the only reference
    return s.ok() ? *std::move(s) : nullptr;
  }

  double V(MetricId m, std::vector<std::string> labels) {
    return sink_->Value(m, labels);
  }

  std::shared_ptr<fakes::FakeClock> clock_;
  std::shared_ptr<fakes::FakeConnectionSource> source_;
  std::shared_ptr<Transport> transport_;
  std::shared_ptr<InMemoryMetricsSink> sink_;
  ReconnectingStreamOptions options_;
};

TEST_F(StreamMetricsTest, MigrationDuplicatesGapAndOpenStreams) {
  auto stream = StartStream();
  EXPECT_EQ(V(MetricId::kStreamsOpen, {kMethod, kTarget}), 1);
  EXPECT_EQ(V(MetricId::kAttemptStarted, {kMethod, kTarget, "first"}), 1);

  auto old = transport_->attempt(0);
  clock_->AdvanceBy(absl::Milliseconds(250));
  old->Send(Resp{1});
  EXPECT_EQ(
      sink_->Count(MetricId::kAttemptTimeToFirstMessage, {kMethod, kTarget}),
      1u);
  EXPECT_DOUBLE_EQ(
      sink_->Value(MetricId::kAttemptTimeToFirstMessage, {kMethod, kTarget}),
      0.25);
  source_->Drain(old->connection_id());
  auto fresh = transport_->attempt(1);
  EXPECT_EQ(V(MetricId::kAttemptStarted, {kMethod, kTarget, "migration"}), 1);
  EXPECT_EQ(V(MetricId::kMigrations, {kMethod, kTarget}), 1);
  clock_->AdvanceBy(absl::Seconds(1));
  fresh->Send(Resp{1});  // a duplicate; hands off: the old one is cancelled
  clock_->RunDue();      // the cancel completes
  EXPECT_EQ(V(MetricId::kDuplicatesDropped, {kMethod, kTarget}), 1);
  // The old attempt ran 1.25 s and ended CANCELLED by the client.
  EXPECT_EQ(sink_->Count(MetricId::kAttemptDuration,
                         {kMethod, kTarget, "CANCELLED", "cancelled"}),
            1u);
  EXPECT_DOUBLE_EQ(sink_->Value(MetricId::kAttemptDuration,
                                {kMethod, kTarget, "CANCELLED", "cancelled"}),
                   1.25);
  fresh->Send(Resp{5});  // skips 2..4
  EXPECT_EQ(V(MetricId::kGaps, {kMethod, kTarget}), 1);
  EXPECT_EQ(sink_->Total(MetricId::kStalls), 0);

  // Still one stream open; it closes when the stream is released.
  EXPECT_EQ(V(MetricId::kStreamsOpen, {kMethod, kTarget}), 1);
  stream.reset();
  clock_->RunDue();
  EXPECT_EQ(V(MetricId::kStreamsOpen, {kMethod, kTarget}), 0);
}

TEST_F(StreamMetricsTest, TransientEndIsTimedWithItsStatusAndClass) {
  transport_->Expect({{}, {}, absl::InternalError("boom")});
  auto stream = StartStream();
  EXPECT_EQ(sink_->Count(MetricId::kAttemptDuration,
                         {kMethod, kTarget, "INTERNAL", "transient"}),
            1u);
  clock_->AdvanceBy(absl::Seconds(20));  // the backoff
  EXPECT_EQ(V(MetricId::kAttemptStarted, {kMethod, kTarget, "reopen"}), 1);
}

TEST_F(StreamMetricsTest, DeliveredMessagesAndTheStreamsDurationByItsEnd) {
  transport_->Expect({{Resp{1}, Resp{2}, Resp{2}, Resp{3}},
                      {},
                      absl::UnavailableError("gone")});
  clock_->AdvanceBy(absl::Seconds(3));
  auto stream = StartStream();
  const std::vector<std::string> delivered = {kMethod, kTarget,
                                              "server_stream"};
  // 1, 2, 3 (the second 2 is a duplicate, not delivered).
  EXPECT_EQ(V(MetricId::kMessagesDelivered, delivered), 3);
  EXPECT_EQ(sink_->TotalCount(MetricId::kStreamDuration), 0u);
  clock_->RunDue();  // after progress the reopen is immediate
  auto second = transport_->attempt(1);
  ASSERT_NE(second, nullptr);
  second->Send(Resp{3});  // a duplicate
  second->Send(Resp{4});
  clock_->AdvanceBy(absl::Seconds(2));
  second->Finish(absl::OkStatus());
  EXPECT_EQ(V(MetricId::kMessagesDelivered, delivered), 4);
  const std::vector<std::string> finished = {kMethod, kTarget, "server_stream",
                                             "OK", "finished"};
  EXPECT_EQ(sink_->Count(MetricId::kStreamDuration, finished), 1u);
  EXPECT_DOUBLE_EQ(sink_->Value(MetricId::kStreamDuration, finished), 2.0);
  stream.reset();  // released after its end: recorded once
  EXPECT_EQ(sink_->TotalCount(MetricId::kStreamDuration), 1u);
}

TEST_F(StreamMetricsTest, AStreamCancelledOrDestroyedIsTimedAsCancelled) {
  auto stream = StartStream();
  clock_->AdvanceBy(absl::Milliseconds(1500));
  stream->Cancel();
  clock_->RunDue();
  const std::vector<std::string> cancelled = {kMethod, kTarget, "server_stream",
                                              "CANCELLED", "cancelled"};
  EXPECT_EQ(sink_->Count(MetricId::kStreamDuration, cancelled), 1u);
  EXPECT_DOUBLE_EQ(sink_->Value(MetricId::kStreamDuration, cancelled), 1.5);

  // Destroyed while running: the end never reaches the app (nor the
  // observer); the duration is recorded when the stream lets go.
  options_.observer = MakeMetricsObserver(sink_, kMethod, kTarget, clock_);
  auto second = StartStream();
  clock_->AdvanceBy(absl::Seconds(4));
  second.reset();
  clock_->RunDue();
  EXPECT_EQ(sink_->Count(MetricId::kStreamDuration, cancelled), 2u);
  EXPECT_DOUBLE_EQ(sink_->Value(MetricId::kStreamDuration, cancelled), 5.5);
}

TEST_F(StreamMetricsTest, AStreamThatGivesUpIsTimedAsGaveUp) {
  options_.max_attempts_without_progress = 1;
  transport_->Expect({{}, {}, absl::UnavailableError("down")});
  auto stream = StartStream();
  clock_->RunDue();
  EXPECT_EQ(sink_->Count(
                MetricId::kStreamDuration,
                {kMethod, kTarget, "server_stream", "UNAVAILABLE", "gave_up"}),
            1u);
  EXPECT_EQ(V(MetricId::kStreamsGaveUp, {kMethod, kTarget}), 1);
}

class BidiMetricsTest : public stream_test::StreamFixture {
 protected:
  BidiMetricsTest() : sink_(std::make_shared<InMemoryMetricsSink>()) {
    options_.observer =
        MakeMetricsObserver(sink_, kMethod, kTarget, clock_, StreamKind::kBidi);
  }
  double Depth() {
    return sink_->Value(MetricId::kOutboxDepth, {kMethod, kTarget});
  }
  std::shared_ptr<InMemoryMetricsSink> sink_;
};

TEST_F(BidiMetricsTest, OutboxDepthRefusedWritesDeliveredAndTheEnd) {
  using stream_test::Ack;
  using stream_test::M;
  using stream_test::W;
  options_.max_outbox = 2;
  auto stream = StartBidi(BidiSpec());
  ASSERT_TRUE(stream->Write(W(1)).ok());
  ASSERT_TRUE(stream->Write(W(2)).ok());
  EXPECT_EQ(Depth(), 2);
  EXPECT_EQ(stream->Write(W(3)).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(stream->Write(W(3)).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(sink_->Value(MetricId::kWritesRefused, {kMethod, kTarget}), 2);
  EXPECT_EQ(Depth(), 2);
  auto a = bidi_->attempt(0);
  a->Send(Ack(1));
  EXPECT_EQ(Depth(), 1);
  a->Send(M(1));
  EXPECT_EQ(
      sink_->Value(MetricId::kMessagesDelivered, {kMethod, kTarget, "bidi"}),
      2);  // the ack and the message both reached the app
  // The stream ends with one write never acknowledged: the gauge lets go of
  // it.
  a->Finish(absl::PermissionDeniedError("no"));
  clock_->RunDue();
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(Depth(), 0);
  EXPECT_EQ(
      sink_->Count(MetricId::kStreamDuration,
                   {kMethod, kTarget, "bidi", "PERMISSION_DENIED", "failed"}),
      1u);
}

TEST_F(BidiMetricsTest,
       WithoutAcknowledgementsAWriteLeavesTheGaugeWhenWritten) {
  using stream_test::W;
  stream_test::BidiStream::Spec spec = BidiSpec();
  spec.acknowledges = nullptr;
  auto stream = StartBidi(std::move(spec));
  ASSERT_TRUE(stream->Write(W(1)).ok());
  ASSERT_TRUE(stream->Write(W(2)).ok());
  EXPECT_EQ(stream->outbox_size(), 0u);  // the fake writes at once
  EXPECT_EQ(Depth(), 0);
  EXPECT_EQ(sink_->TotalCount(MetricId::kOutboxDepth), 4u);  // +1 -1 +1 -1
}

// A source that names itself no better than the interface's default.
class SilentSource final : public EndpointSource {
 public:
  void Start(std::shared_ptr<Sink>) override {}
  void Stop() override {}
};

TEST(PoolLabelTest, DerivedFromWhereThePoolConnectsUnlessSet) {
  ConnectionPoolOptions o;
  o.target = "dns:///svc:443";
  EXPECT_EQ(PoolLabel(o), "dns:///svc:443");
  o.label = "ledger";
  EXPECT_EQ(PoolLabel(o), "ledger");

  ConnectionPoolOptions two;
  two.addresses = {"127.0.0.1:1", "127.0.0.1:2"};
  EXPECT_EQ(PoolLabel(two), "127.0.0.1:1,127.0.0.1:2");
  ConnectionPoolOptions five;
  five.addresses = {"10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1", "10.0.0.4:1",
                    "10.0.0.5:1"};
  EXPECT_EQ(PoolLabel(five), "10.0.0.1:1,10.0.0.2:1,10.0.0.3:1,+2");

  ConnectionPoolOptions fixed;
  fixed.endpoints = FixedEndpoints({{"127.0.0.1:7", ""}}).value();
  EXPECT_EQ(PoolLabel(fixed), "127.0.0.1:7");
  ConnectionPoolOptions resolved;
  resolved.endpoints = std::make_shared<SilentSource>();
  EXPECT_EQ(PoolLabel(resolved), "endpoints");  // the interface's default
  ConnectionPoolOptions dns;
  dns.endpoints = ResolvedEndpoints("dns:///svc.example:7000").value();
  EXPECT_EQ(PoolLabel(dns), "svc.example:7000");  // the name it looks up
}

TEST(PoolLabelTest, ALabelLongerThan256CharactersIsRejected) {
  ConnectionPoolOptions o;
  o.target = "127.0.0.1:1";
  o.label = std::string(256, 'x');
  EXPECT_TRUE(Validate(o).ok());
  o.label = std::string(257, 'x');
  absl::Status s = Validate(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("ConnectionPoolOptions.label must be at "
                                   "most 256 characters, got 257"));
  o.label = std::string(1 << 20, 'x');
  EXPECT_FALSE(Validate(o).ok());
}

TEST(MetricsStreamObserverTest, ResyncStallGaveUpAndNullSinkIsHarmless) {
  auto sink = std::make_shared<InMemoryMetricsSink>();
  auto obs = MakeMetricsObserver(sink, kMethod, kTarget);
  obs->OnResync(absl::OutOfRangeError("compacted"), 40);
  obs->OnResync(absl::OutOfRangeError("compacted"), 90);
  EXPECT_EQ(sink->Value(MetricId::kResyncs, {kMethod, kTarget}), 2);
  obs->OnStalled(AttemptInfo{}, absl::Seconds(3));
  EXPECT_EQ(sink->Value(MetricId::kStalls, {kMethod, kTarget}), 1);
  obs->OnGaveUp(absl::UnavailableError("x"));
  EXPECT_EQ(sink->Value(MetricId::kStreamsGaveUp, {kMethod, kTarget}), 1);
  obs->OnRetryBudgetWait(absl::Milliseconds(300));
  EXPECT_EQ(sink->Value(MetricId::kRetryBudgetWaits, {kMethod, kTarget}), 1);
  // An end whose start was never seen records nothing.
  obs->OnAttemptEnded(AttemptInfo{}, absl::OkStatus(), EndClass::kOk, false);
  EXPECT_EQ(sink->TotalCount(MetricId::kAttemptDuration), 0u);

  auto quiet = MakeMetricsObserver(nullptr, kMethod, kTarget);
  quiet->OnAttemptStarted(AttemptInfo{});
  quiet->OnMessageDelivered();
  quiet->OnOutboxChanged(3);
  quiet->OnWriteRefused();
  quiet->OnStreamEnded(absl::OkStatus(), StreamEnd::kFinished);
  quiet->OnResync(absl::OutOfRangeError("compacted"),
                  1);  // no sink: nothing to do, nothing crashes
}

TEST(MetricsConnectionObserverTest, ConnectionsByState) {
  auto sink = std::make_shared<InMemoryMetricsSink>();
  auto obs = MakeMetricsConnectionObserver(sink);
  auto n = [&](const char* target, const char* state) {
    return sink->Value(MetricId::kConnections, {target, state});
  };
  obs->OnConnectionOpened(1, "a:1");
  obs->OnConnectionOpened(2, "b:1");
  EXPECT_EQ(n("a:1", "connecting"), 1);
  obs->OnConnectionReady(1);
  obs->OnConnectionReady(2);
  EXPECT_EQ(n("a:1", "connecting"), 0);
  EXPECT_EQ(n("a:1", "ready"), 1);
  obs->OnConnectionSuspect(1, absl::UnavailableError("early end"));
  EXPECT_EQ(n("a:1", "suspect"), 1);
  obs->OnConnectionRestored(1);
  EXPECT_EQ(n("a:1", "ready"), 1);
  EXPECT_EQ(n("a:1", "suspect"), 0);
  obs->OnConnectionRestored(2);  // not suspect: nothing moves
  EXPECT_EQ(n("b:1", "ready"), 1);
  obs->OnConnectionDraining(2, "GOAWAY");
  obs->OnConnectionReady(2);  // draining stays draining
  EXPECT_EQ(n("b:1", "draining"), 1);
  EXPECT_EQ(n("b:1", "ready"), 0);
  obs->OnConnectionRetired(2);
  obs->OnConnectionRetired(2);   // twice: counted once
  obs->OnConnectionRetired(99);  // unknown: ignored
  EXPECT_EQ(n("b:1", "draining"), 0);
  EXPECT_EQ(sink->Total(MetricId::kConnections), 1);
  EXPECT_EQ(sink->Total(MetricId::kConnectionsOpened), 2);
  obs.reset();  // what is left leaves the gauge with the observer
  EXPECT_EQ(sink->Total(MetricId::kConnections), 0);
}

TEST(MetricsBreakerObserverTest, StateGaugeTransitionsAndCalls) {
  auto sink = std::make_shared<InMemoryMetricsSink>();
  auto clock = std::make_shared<fakes::FakeClock>();
  CircuitBreakerOptions o;
  o.name = "ledger";
  o.minimum_calls = 2;
  o.window_size = 2;
  o.observer = MakeMetricsBreakerObserver(sink);
  auto breaker = CircuitBreaker::Create(o, clock).value();
  auto state = [&](const char* s) {
    return sink->Value(MetricId::kBreakerState, {"ledger", s});
  };
  auto call = [&](Outcome outcome) {
    breaker->Record(breaker->TryAcquire().value(), outcome);
  };
  call(Outcome::kFailure);
  EXPECT_EQ(state("closed"), 1);
  call(Outcome::kFailure);
  EXPECT_EQ(state("closed"), 0);
  EXPECT_EQ(state("open"), 1);
  EXPECT_EQ(
      sink->Value(MetricId::kBreakerTransitions, {"ledger", "closed", "open"}),
      1);
  EXPECT_FALSE(breaker->TryAcquire().ok());
  EXPECT_EQ(sink->Value(MetricId::kBreakerCalls, {"ledger", "not_permitted"}),
            1);
  EXPECT_EQ(sink->Value(MetricId::kBreakerCalls, {"ledger", "failure"}), 2);
  clock->AdvanceBy(absl::Seconds(10));  // the break ends
  EXPECT_EQ(state("open"), 0);
  EXPECT_EQ(state("half-open"), 1);
  EXPECT_EQ(sink->Total(MetricId::kBreakerState), 1);
}

class CountingObserver : public StreamObserver {
 public:
  void OnGap(std::uint64_t, std::uint64_t) override { ++gaps; }
  void OnResync(const absl::Status&, std::uint64_t) override { ++resyncs; }
  int gaps = 0;
  int resyncs = 0;
};

TEST(CombineObserversTest, ForwardsToEachAndSkipsNull) {
  auto a = std::make_shared<CountingObserver>();
  auto b = std::make_shared<CountingObserver>();
  auto both = CombineObservers({a, nullptr, b});
  both->OnGap(1, 3);
  both->OnResync(absl::OutOfRangeError("compacted"), 7);
  EXPECT_EQ(a->gaps, 1);
  EXPECT_EQ(b->gaps, 1);
  EXPECT_EQ(a->resyncs, 1);
  EXPECT_EQ(b->resyncs, 1);
}

}  // namespace
}  // namespace tether
