// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Logic tests of ReconnectingStream with a shared CircuitBreaker: fake
// attempts, fake connections, one FakeClock for streams and breaker. Nothing
// here opens a socket or sleeps.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/stream_fixture.h"
#include "tether/backoff.h"
#include "tether/circuit_breaker.h"
#include "tether/internal/breaker_gate.h"
#include "tether/reconnecting_stream.h"

namespace tether {
namespace stream_test {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Transition = std::pair<BreakerState, BreakerState>;

constexpr BreakerState kClosed = BreakerState::kClosed;
constexpr BreakerState kOpen = BreakerState::kOpen;
constexpr BreakerState kHalfOpen = BreakerState::kHalfOpen;

using Script = Transport::Script;

// How a server that cancels its streams before its GOAWAY ends them.
absl::Status ShuttingDown() {
  return absl::UnavailableError("server is shutting down");
}

// What one stream handed the application, and when it ended.
struct StreamResult {
  std::vector<std::uint64_t> got;
  absl::optional<absl::Status> done;
  absl::Time done_at = absl::InfinitePast();
};

class BreakerStreamTest : public StreamFixture {
 protected:
  static constexpr char kName[] = "svc.test:443";

  BreakerStreamTest() {
    options_.observer = nullptr;
    options_.max_attempts_without_progress = 1000;
    options_.max_time_without_progress = absl::Seconds(25);
    ExponentialBackoffOptions b;  // 100 ms, 200 ms, ... 1 s, no jitter
    b.initial_delay = absl::Milliseconds(100);
    b.max_delay = absl::Seconds(1);
    b.jitter = Jitter::kNone;
    options_.backoff = ExponentialBackoff::Create(b).value();
  }

  ~BreakerStreamTest() override {
    streams_.clear();  // before the breaker's listener log goes away
    // Destroying cancels; the cancels complete on the clock, as gRPC's
    // TryCancel completes later. Then the attempts let the streams go.
    clock_->RunDue();
    if (breaker_ && listener_ != 0) breaker_->RemoveListener(listener_);
  }

  // Trips after 5 outcomes in the window of which >= 50 % failed; open 10 s,
  // then 20 s, ... (no jitter); `probes` half-open probes.
  void MakeBreaker(int probes = 2, int consecutive = 0, int minimum = 5) {
    CircuitBreakerOptions o;
    o.name = kName;
    o.window_size = 20;
    o.minimum_calls = minimum;
    o.failure_rate_threshold = 50;
    o.consecutive_failures = consecutive;
    o.break_duration = absl::Seconds(10);
    o.break_multiplier = 2;
    o.max_break_duration = absl::Seconds(60);
    o.break_jitter = 0;
    o.half_open_permits = probes;
    breaker_ = CircuitBreaker::Create(o, clock_, /*seed=*/1).value();
    listener_ = breaker_->AddListener([this](BreakerState f, BreakerState t) {
      std::lock_guard<std::mutex> l(mu_);
      transitions_.emplace_back(f, t);
    });
    options_.breaker = breaker_;
  }

  Stream::Spec Spec() { return SeqSpec(); }

  // Starts one stream; returns its index.
  std::size_t StartOne() {
    std::size_t i;
    {
      std::lock_guard<std::mutex> l(mu_);
      i = results_.size();
      results_.emplace_back();
    }
    auto s = Stream::Start(
        source_, Spec(), options_,
        [this, i](Resp&& r) {
          std::lock_guard<std::mutex> l(mu_);
          results_[i].got.push_back(r.seq);
        },
        [this, i](const absl::Status& s) {
          absl::Time now = clock_->Now();
          std::lock_guard<std::mutex> l(mu_);
          results_[i].done = s;
          results_[i].done_at = now;
        });
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) streams_.push_back(*std::move(s));
    return i;
  }

  StreamResult result(std::size_t i) {
    std::lock_guard<std::mutex> l(mu_);
    return results_[i];
  }
  std::size_t ended() {
    std::lock_guard<std::mutex> l(mu_);
    std::size_t n = 0;
    for (const auto& r : results_) n += r.done.has_value() ? 1 : 0;
    return n;
  }
  std::vector<Transition> transitions() {
    std::lock_guard<std::mutex> l(mu_);
    return transitions_;
  }

  // Trips the breaker: `n` (>= 5) streams whose attempts cannot connect (the
  // 5th failure trips it; later streams are refused before any attempt).
  void TripWithConnectFailures(int n) {
    for (int i = 0; i < 5; ++i) transport_->Expect(Script().ConnectFails());
    for (int i = 0; i < n; ++i) StartOne();
    ASSERT_EQ(breaker_->state(), kOpen);
  }

  std::shared_ptr<CircuitBreaker> breaker_;
  std::uint64_t listener_ = 0;
  std::mutex mu_;
  std::vector<StreamResult> results_;
  std::vector<Transition> transitions_;
  std::vector<std::unique_ptr<Stream>> streams_;
};

constexpr char BreakerStreamTest::kName[];

// The rollout case: 64 streams on one pod, every attempt ends with a
// drain-class status at the same moment, and the reopens first land on the
// old pod again (which fails them before their first message, as a server
// that cancels before its GOAWAY does). A breaker that trips on a single
// failure still never moves.
// A stream refused by a half-open breaker whose probes are all out asks
// again shortly: the probes may close it any moment, and nothing tells the
// stream. Waiting for the oldest probe's timeout (30 s) would leave it idle
// long after the breaker closed.
TEST(BreakerGateTest, HalfOpenWithEveryProbeOutRetriesShortly) {
  auto clock = std::make_shared<fakes::FakeClock>();
  CircuitBreakerOptions o;
  o.window_size = 1;
  o.minimum_calls = 1;
  o.break_duration = absl::Seconds(1);
  o.break_jitter = 0;
  o.half_open_permits = 1;
  auto breaker = *CircuitBreaker::Create(o, clock, 1);
  internal::BreakerGate gate(breaker, clock);
  auto first = gate.Acquire();
  ASSERT_TRUE(first.ok());
  gate.Record(*std::move(first), Outcome::kFailure, absl::UnavailableError(""));
  EXPECT_EQ(gate.RetryDelay(), absl::Seconds(1));  // open: the break's end
  clock->AdvanceBy(absl::Seconds(1));
  auto probe = gate.Acquire();
  ASSERT_TRUE(probe.ok());
  EXPECT_FALSE(gate.Acquire().ok());  // every probe is out
  EXPECT_EQ(breaker->open_until(), clock->Now() + absl::Seconds(30));
  EXPECT_EQ(gate.RetryDelay(), absl::Milliseconds(200));
}

TEST_F(BreakerStreamTest, SixtyFourDrainEndsAtOnceLeaveItClosed) {
  constexpr int kStreams = 64;
  MakeBreaker(/*probes=*/2, /*consecutive=*/1, /*minimum=*/1);
  for (int i = 0; i < kStreams; ++i) {
    transport_->Expect(Script().Message(M(1)));  // then stays open
  }
  for (int i = 0; i < kStreams; ++i) StartOne();
  ASSERT_EQ(transport_->attempt_count(), 64u);
  EXPECT_EQ(breaker_->counts().successful, 64u);

  // Reopens: one failure before the first message each (half UNAVAILABLE,
  // half a CANCELLED the client did not ask for), then a healthy attempt.
  for (int i = 0; i < kStreams; ++i) {
    transport_->Expect(Script().Finish(
        i % 2 == 0 ? ShuttingDown()
                   : absl::CancelledError("stream cancelled by server")));
  }
  for (int i = 0; i < kStreams; ++i) transport_->Expect(Script().Message(M(2)));

  // All at once: the whole pod's streams end with UNAVAILABLE.
  for (int i = 0; i < kStreams; ++i) {
    transport_->attempt(static_cast<std::size_t>(i))->Finish(ShuttingDown());
  }
  clock_->RunDue();  // reopens after progress: no delay
  EXPECT_EQ(transport_->attempt_count(), 128u);
  clock_->AdvanceBy(absl::Seconds(1));  // backoff after the failed reopens
  ASSERT_EQ(transport_->attempt_count(), 192u);
  EXPECT_EQ(transport_->pending_scripts(), 0u);

  for (int i = 0; i < kStreams; ++i) {
    StreamResult r = result(static_cast<std::size_t>(i));
    EXPECT_THAT(r.got, ElementsAre(1u, 2u)) << "stream " << i;
    EXPECT_FALSE(r.done.has_value()) << "stream " << i << ": " << *r.done;
  }
  BreakerCounts c = breaker_->counts();
  EXPECT_EQ(c.state, kClosed);
  EXPECT_EQ(c.transitions, 0u);
  EXPECT_EQ(c.failed, 0u);
  EXPECT_EQ(c.not_permitted, 0u);
  EXPECT_EQ(c.successful, 128u);
  EXPECT_EQ(c.ignored, 64u);  // the reopens that failed before a message
  EXPECT_TRUE(transitions().empty());
}

// Attempts that cannot connect are failures: the breaker opens. While it is
// open no attempt starts (streams wait instead of spinning), and each stream
// ends when its reopen budget's time bound passes, with UNAVAILABLE naming
// the breaker and the last failure.
TEST_F(BreakerStreamTest, ConnectFailuresOpenItAndStreamsEndWithinTheBound) {
  constexpr int kStreams = 8;
  MakeBreaker(/*probes=*/2);
  const absl::Time t0 = clock_->Now();
  for (int i = 0; i < 1000; ++i) transport_->Expect(Script().ConnectFails());
  for (int i = 0; i < kStreams; ++i) StartOne();

  // The 5th failure (minimum_calls) trips it; streams 6..8 never attempt.
  EXPECT_EQ(breaker_->state(), kOpen);
  EXPECT_EQ(transport_->attempt_count(), 5u);
  EXPECT_THAT(transitions(), ElementsAre(Transition(kClosed, kOpen)));
  BreakerCounts c = breaker_->counts();
  EXPECT_EQ(c.failed, 5u);
  EXPECT_EQ(c.not_permitted, 3u);

  // Open for 10 s: no attempt at all, however long we look.
  for (int step = 0; step < 99; ++step) {
    clock_->AdvanceBy(absl::Milliseconds(100));
    ASSERT_EQ(transport_->attempt_count(), 5u)
        << "at +" << (step + 1) * 100 << " ms";
  }
  EXPECT_EQ(breaker_->state(), kOpen);
  EXPECT_EQ(ended(), 0u);

  // At 10 s it turns half-open: at most `half_open_permits` probes; one
  // fails and it opens again for 20 s, beyond every stream's 25 s bound.
  clock_->AdvanceTo(t0 + absl::Seconds(10));
  const std::size_t after_probes = transport_->attempt_count();
  EXPECT_GE(after_probes, 6u);
  EXPECT_LE(after_probes, 5u + 2u);
  EXPECT_EQ(breaker_->state(), kOpen);
  EXPECT_THAT(transitions(), ElementsAre(Transition(kClosed, kOpen),
                                         Transition(kOpen, kHalfOpen),
                                         Transition(kHalfOpen, kOpen)));

  clock_->AdvanceTo(t0 + absl::Seconds(25) - absl::Milliseconds(1));
  EXPECT_EQ(ended(), 0u);
  EXPECT_EQ(transport_->attempt_count(), after_probes);
  clock_->AdvanceTo(t0 + absl::Seconds(25));
  ASSERT_EQ(ended(), static_cast<std::size_t>(kStreams));
  for (int i = 0; i < kStreams; ++i) {
    StreamResult r = result(static_cast<std::size_t>(i));
    ASSERT_TRUE(r.done.has_value());
    EXPECT_EQ(r.done->code(), absl::StatusCode::kUnavailable) << *r.done;
    EXPECT_THAT(std::string(r.done->message()),
                AllOf(HasSubstr("circuit breaker 'svc.test:443' is open"),
                      HasSubstr("last failure"), HasSubstr("failed to connect"),
                      HasSubstr("gave up after")))
        << "stream " << i;
    EXPECT_LE(r.done_at, t0 + options_.max_time_without_progress);
  }
  EXPECT_EQ(transport_->attempt_count(), after_probes);
  EXPECT_EQ(clock_->PendingTimers(), 1u);  // only the breaker's own timer
}

// A pick that fails to connect counts like an attempt that does.
TEST_F(BreakerStreamTest, PickConnectFailuresAlsoOpenIt) {
  MakeBreaker(/*probes=*/1, /*consecutive=*/3);
  for (int i = 0; i < 3; ++i) source_->FailNextPick(fakes::ConnectFailure());
  StartOne();
  clock_->AdvanceBy(absl::Milliseconds(100));
  clock_->AdvanceBy(absl::Milliseconds(200));
  EXPECT_EQ(breaker_->state(), kOpen);
  EXPECT_EQ(breaker_->counts().failed, 3u);
  EXPECT_EQ(transport_->attempt_count(), 0u);
  EXPECT_TRUE(source_->picks().empty());
}

// Half-open probes that deliver close the breaker; every waiting stream then
// gets going again and delivers.
TEST_F(BreakerStreamTest, ProbeSuccessClosesItAndStreamsContinue) {
  constexpr int kStreams = 8;
  MakeBreaker(/*probes=*/2);
  const absl::Time t0 = clock_->Now();
  TripWithConnectFailures(kStreams);
  ASSERT_EQ(transport_->attempt_count(), 5u);
  for (int i = 0; i < kStreams; ++i) transport_->Expect(Script().Message(M(1)));

  clock_->AdvanceTo(t0 + absl::Seconds(10) - absl::Milliseconds(1));
  EXPECT_EQ(transport_->attempt_count(), 5u);
  clock_->AdvanceTo(t0 + absl::Seconds(10));
  EXPECT_EQ(breaker_->state(), kClosed);
  EXPECT_THAT(transitions(), ElementsAre(Transition(kClosed, kOpen),
                                         Transition(kOpen, kHalfOpen),
                                         Transition(kHalfOpen, kClosed)));
  // Streams refused while both probes were out ask again shortly.
  clock_->AdvanceBy(absl::Seconds(1));
  EXPECT_EQ(transport_->attempt_count(), 5u + kStreams);
  for (int i = 0; i < kStreams; ++i) {
    StreamResult r = result(static_cast<std::size_t>(i));
    EXPECT_THAT(r.got, ElementsAre(1u)) << "stream " << i;
    EXPECT_FALSE(r.done.has_value()) << "stream " << i << ": " << *r.done;
  }
  BreakerCounts c = breaker_->counts();
  EXPECT_EQ(c.successful, static_cast<std::uint64_t>(kStreams));
  EXPECT_EQ(c.consecutive_trips, 0u);
  // Nothing left but the streams' running attempts: no breaker timer.
  EXPECT_EQ(clock_->PendingTimers(), 0u);
}

// A half-open probe that ends with a drain (the replica is being replaced)
// says nothing about health: its permit comes back and the next stream
// probes. With a single permit, a lost permit would leave the breaker stuck
// half-open (resilience4j #544) and the second stream refused.
TEST_F(BreakerStreamTest, IgnoredHalfOpenProbeGivesItsPermitBack) {
  MakeBreaker(/*probes=*/1, /*consecutive=*/1, /*minimum=*/1);
  const absl::Time t0 = clock_->Now();
  transport_->Expect(Script().ConnectFails());
  StartOne();  // trips it
  ASSERT_EQ(breaker_->state(), kOpen);
  StartOne();  // refused, waits
  ASSERT_EQ(transport_->attempt_count(), 1u);

  transport_->Expect(Script().Finish(ShuttingDown()));  // the probe: drain
  transport_->Expect(Script().Message(M(1)));           // the next probe
  transport_->Expect(Script().Message(M(1)));
  clock_->AdvanceTo(t0 + absl::Seconds(10));
  // Both streams' timers fired at 10 s: the first probe was ignored and gave
  // its permit back, so the other stream probed at once and closed it.
  ASSERT_EQ(transport_->attempt_count(), 3u);
  EXPECT_EQ(transport_->attempt(1)->end_status().value_or(absl::OkStatus()),
            ShuttingDown());
  EXPECT_EQ(breaker_->state(), kClosed);
  EXPECT_THAT(transitions(), ElementsAre(Transition(kClosed, kOpen),
                                         Transition(kOpen, kHalfOpen),
                                         Transition(kHalfOpen, kClosed)));
  BreakerCounts c = breaker_->counts();
  EXPECT_EQ(c.ignored, 1u);
  EXPECT_EQ(c.failed, 1u);
  EXPECT_EQ(c.successful, 1u);

  // The stream whose probe was ignored backs off and then delivers too.
  clock_->AdvanceBy(absl::Seconds(1));
  ASSERT_EQ(transport_->attempt_count(), 4u);
  EXPECT_THAT(result(0).got, ElementsAre(1u));
  EXPECT_THAT(result(1).got, ElementsAre(1u));
  EXPECT_EQ(ended(), 0u);
}

// The same, isolated: the ignored probe leaves the breaker half-open with
// its permit free (open_until() InfinitePast), not stuck with it taken.
TEST_F(BreakerStreamTest, IgnoredProbeLeavesAPermitFree) {
  MakeBreaker(/*probes=*/1, /*consecutive=*/1, /*minimum=*/1);
  const absl::Time t0 = clock_->Now();
  transport_->Expect(Script().ConnectFails());
  StartOne();
  ASSERT_EQ(breaker_->state(), kOpen);
  transport_->Expect(Script().Finish(ShuttingDown()));
  clock_->AdvanceTo(t0 + absl::Seconds(10));
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_EQ(breaker_->state(), kHalfOpen);
  EXPECT_EQ(breaker_->open_until(), absl::InfinitePast());
  EXPECT_EQ(breaker_->counts().ignored, 1u);
  auto permit = breaker_->TryAcquire();
  ASSERT_TRUE(permit.ok()) << permit.status();
  EXPECT_TRUE(permit->is_probe());
}

// fail_fast_on_open_breaker: a stream started while the breaker is open
// ends at once, without an attempt or a pick; without it, it waits for the
// break to end and then runs.
TEST_F(BreakerStreamTest, FailFastEndsANewStreamAtOnce) {
  MakeBreaker(/*probes=*/1, /*consecutive=*/1, /*minimum=*/1);
  const absl::Time t0 = clock_->Now();
  transport_->Expect(Script().ConnectFails());
  options_.max_time_without_progress = absl::Seconds(5);
  StartOne();  // trips it
  ASSERT_EQ(breaker_->state(), kOpen);
  const std::size_t picks = source_->picks().size();

  options_.fail_fast_on_open_breaker = true;
  const std::size_t fast = StartOne();
  StreamResult r = result(fast);
  ASSERT_TRUE(r.done.has_value());
  EXPECT_EQ(r.done->code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(r.done->message()),
              AllOf(HasSubstr("circuit breaker 'svc.test:443' is open"),
                    HasSubstr("failed to connect")));
  EXPECT_EQ(r.done_at, t0);
  EXPECT_EQ(transport_->attempt_count(), 1u);
  EXPECT_EQ(source_->picks().size(), picks);

  options_.fail_fast_on_open_breaker = false;
  options_.max_time_without_progress = absl::Seconds(30);
  const std::size_t waiting = StartOne();
  EXPECT_FALSE(result(waiting).done.has_value());
  transport_->Expect(Script().Message(M(1)));
  clock_->AdvanceTo(t0 + absl::Seconds(10));
  EXPECT_THAT(result(waiting).got, ElementsAre(1u));
  EXPECT_EQ(breaker_->state(), kClosed);
}

// Only a stream's *first* attempt fails fast; a running stream refused on a
// reopen waits (and ends at its time bound).
TEST_F(BreakerStreamTest, FailFastDoesNotEndARunningStream) {
  MakeBreaker(/*probes=*/1, /*consecutive=*/1, /*minimum=*/1);
  options_.fail_fast_on_open_breaker = true;
  options_.max_time_without_progress = absl::Seconds(5);
  transport_->Expect(Script().Message(M(1)));
  const std::size_t s = StartOne();
  const absl::Time t1 = clock_->Now();
  transport_->Expect(Script().ConnectFails());
  transport_->attempt(0)->Finish(ShuttingDown());  // ignored; reopen
  clock_->RunDue();                                // connect failure: trips
  ASSERT_EQ(breaker_->state(), kOpen);
  clock_->AdvanceBy(absl::Seconds(1));
  EXPECT_FALSE(result(s).done.has_value());
  EXPECT_EQ(transport_->attempt_count(), 2u);
  clock_->AdvanceTo(t1 + absl::Seconds(5));
  StreamResult r = result(s);
  ASSERT_TRUE(r.done.has_value());
  EXPECT_EQ(r.done->code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(r.done->message()), HasSubstr("circuit breaker"));
  EXPECT_EQ(r.done_at, t1 + absl::Seconds(5));
}

// The app cancelling a stream that waits for the breaker ends it at once and
// records nothing.
TEST_F(BreakerStreamTest, CancelWhileWaitingEndsPromptly) {
  MakeBreaker(/*probes=*/1, /*consecutive=*/1, /*minimum=*/1);
  transport_->Expect(Script().ConnectFails());
  StartOne();
  ASSERT_EQ(breaker_->state(), kOpen);
  const BreakerCounts before = breaker_->counts();
  streams_[0]->Cancel();
  StreamResult r = result(0);
  ASSERT_TRUE(r.done.has_value());
  EXPECT_EQ(r.done->code(), absl::StatusCode::kCancelled);
  const BreakerCounts after = breaker_->counts();
  EXPECT_EQ(after.failed, before.failed);
  EXPECT_EQ(after.ignored, before.ignored);
  EXPECT_EQ(clock_->PendingTimers(), 1u);  // only the breaker's timer
}

}  // namespace
}  // namespace stream_test
}  // namespace tether
