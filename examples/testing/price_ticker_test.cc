// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// How the author of PriceTicker tests it with tether::tether_mocks: a
// FakeTransport plays the quote service attempt by attempt, a FakeClock
// stands in for time, gMock mocks watch the stream and the breaker, and the
// matchers from tether/testing/matchers.h keep the assertions readable.
// Nothing here opens a socket or sleeps.
#include "price_ticker.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tether/circuit_breaker.h"
#include "tether/testing/fake_clock.h"
#include "tether/testing/fake_transport.h"
#include "tether/testing/matchers.h"
#include "tether/testing/mocks.h"

namespace ticker {
namespace {

using ::testing::_;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::NiceMock;
using ::tether::BreakerState;
using ::tether::fakes::FakeClock;
using ::tether::fakes::FakeConnectionSource;
using ::tether::fakes::MockBreakerObserver;
using ::tether::fakes::MockStreamObserver;
using ::tether::fakes::NotResumedRequest;
using ::tether::fakes::RequestResumedAfter;
using ::tether::fakes::StatusIs;

using QuoteFeed = tether::fakes::FakeTransport<QuoteRequest, Quote>;
using Script = QuoteFeed::Script;

Quote Q(std::uint64_t seq, std::int64_t price_cents, std::int64_t volume) {
  return Quote{seq, "ACME", price_cents, volume};
}

class PriceTickerTest : public ::testing::Test {
 protected:
  PriceTickerTest()
      : clock_(std::make_shared<FakeClock>()),
        connections_(std::make_shared<FakeConnectionSource>()),
        feed_(std::make_shared<QuoteFeed>(connections_, clock_)) {
    options_.symbol = "ACME";
    options_.stream.clock = clock_;
    options_.stream.random_seed = 1;  // repeatable jitter
  }

  std::unique_ptr<PriceTicker> StartTicker() {
    QuoteService service;
    service.attempts = feed_;
    auto ticker = PriceTicker::Start(connections_, service, options_);
    EXPECT_TRUE(ticker.ok()) << ticker.status();
    return ticker.ok() ? *std::move(ticker) : nullptr;
  }

  // Runs every timer due in the next `d` (reopen delays, backoff, breaker).
  void Wait(absl::Duration d) { clock_->AdvanceBy(d); }

  // A fake call's cancel completes later, as gRPC's does: on the clock. Let
  // the cancels of the ticker destroyed at the end of the test complete, so
  // that its calls let it (and the mocks it holds) go.
  void TearDown() override { clock_->RunDue(); }

  std::shared_ptr<FakeClock> clock_;
  std::shared_ptr<FakeConnectionSource> connections_;
  std::shared_ptr<QuoteFeed> feed_;
  PriceTicker::Options options_;
};

TEST_F(PriceTickerTest, ResumesAfterTheLastQuoteWhenTheServerRestarts) {
  feed_->Expect(Script()
                    .Messages({Q(1, 1000, 5), Q(2, 1010, 7), Q(3, 1005, 1)})
                    .Finish(absl::UnavailableError("server restarting")));
  feed_->Expect(Script().Message(Q(4, 990, 2)));
  auto ticker = StartTicker();
  Wait(absl::Seconds(1));

  // The second call asked for the quotes after #3 ...
  EXPECT_THAT(feed_->requests(),
              ElementsAre(NotResumedRequest(&QuoteRequest::after_seq),
                          RequestResumedAfter(&QuoteRequest::after_seq, 3)));
  // ... and the ticker just carried on.
  PriceTicker::Snapshot s = ticker->snapshot();
  EXPECT_EQ(s.health, TickerHealth::kLive);
  EXPECT_EQ(s.price_cents, 990);
  EXPECT_EQ(s.total_volume, 15);
  EXPECT_EQ(s.quotes, 4u);
}

TEST_F(PriceTickerTest, ARepeatedQuoteIsNotCountedTwice) {
  auto observer = std::make_shared<NiceMock<MockStreamObserver>>();
  EXPECT_CALL(*observer, OnDuplicateDropped(2, 2));
  options_.stream.observer = observer;
  feed_->Expect(Script()
                    .Messages({Q(1, 1000, 5), Q(2, 1010, 7)})
                    .Finish(absl::UnavailableError("server restarting")));
  // The new server resumes one quote too early.
  feed_->Expect(Script().Messages({Q(2, 1010, 7), Q(3, 1020, 1)}));
  auto ticker = StartTicker();
  Wait(absl::Seconds(1));

  PriceTicker::Snapshot s = ticker->snapshot();
  EXPECT_EQ(s.total_volume, 13);  // 5 + 7 + 1, not 20
  EXPECT_EQ(s.quotes, 3u);
  EXPECT_EQ(s.last_seq, 3u);
}

TEST_F(PriceTickerTest, FollowsARollingDeployToANewConnection) {
  // The server sends a GOAWAY after two quotes: tether opens the next call
  // on another connection before the old one ends.
  feed_->Expect(
      Script().Messages({Q(1, 1000, 5), Q(2, 1010, 7)}).GoawayAfter(2));
  feed_->Expect(Script().Message(Q(3, 1020, 1)));
  auto ticker = StartTicker();

  EXPECT_THAT(feed_->connection_ids(), ElementsAre(1, 2));
  EXPECT_THAT(feed_->requests()[1],
              RequestResumedAfter(&QuoteRequest::after_seq, 2));
  EXPECT_TRUE(feed_->attempt(0)->cancelled());  // handed over
  EXPECT_EQ(ticker->snapshot().quotes, 3u);
  EXPECT_EQ(ticker->snapshot().health, TickerHealth::kLive);
}

TEST_F(PriceTickerTest, AnUnknownSymbolFailsAtOnceWithoutRetrying) {
  options_.symbol = "ZZZZ";
  feed_->Expect(Script().Finish(absl::NotFoundError("unknown symbol ZZZZ")));
  auto ticker = StartTicker();
  Wait(absl::Minutes(10));

  EXPECT_EQ(feed_->attempt_count(), 1u);
  PriceTicker::Snapshot s = ticker->snapshot();
  EXPECT_EQ(s.health, TickerHealth::kFailed);
  EXPECT_THAT(s.failure,
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("ZZZZ")));
}

TEST_F(PriceTickerTest, BacksOffWhileTheServiceIsUnreachable) {
  // Three refused connections, then the service is back.
  feed_->Expect(Script().ConnectFails());
  feed_->Expect(Script().ConnectFails());
  feed_->Expect(Script().ConnectFails());
  feed_->Expect(Script().Message(Q(1, 1000, 5)));
  const absl::Time t0 = clock_->Now();
  auto ticker = StartTicker();
  while (feed_->attempt_count() < 4 && clock_->AdvanceToNextTimer()) {
  }

  ASSERT_EQ(feed_->attempt_count(), 4u);
  auto times = feed_->start_times();
  EXPECT_EQ(times[0], t0);
  // Each attempt waited a (jittered) backoff after the previous one failed.
  for (std::size_t i = 1; i < times.size(); ++i) {
    EXPECT_GT(times[i], times[i - 1]) << "attempt " << i;
  }
  EXPECT_EQ(ticker->snapshot().quotes, 1u);
}

// The breaker guards the quote service for the whole app; other calls (here
// recorded by hand) can trip it, and the ticker must say its price is stale.
TEST_F(PriceTickerTest, IsDegradedWhileTheServiceBreakerIsOpen) {
  auto breaker_observer = std::make_shared<NiceMock<MockBreakerObserver>>();
  EXPECT_CALL(*breaker_observer,
              OnStateChange(Eq("quotes"), BreakerState::kClosed,
                            BreakerState::kOpen, _));
  EXPECT_CALL(*breaker_observer, OnStateChange(_, BreakerState::kOpen,
                                               BreakerState::kHalfOpen, _));
  EXPECT_CALL(*breaker_observer, OnStateChange(_, BreakerState::kHalfOpen,
                                               BreakerState::kClosed, _));
  tether::CircuitBreakerOptions b;
  b.name = "quotes";
  b.window_size = 4;
  b.minimum_calls = 4;
  b.break_duration = absl::Seconds(10);
  b.break_jitter = 0;
  b.half_open_permits = 1;
  b.observer = breaker_observer;
  auto breaker = tether::CircuitBreaker::Create(b, clock_, 1).value();
  options_.stream.breaker = breaker;
  auto ticker = StartTicker();
  feed_->attempt(0)->Send(Q(1, 1000, 5));
  EXPECT_EQ(ticker->snapshot().health, TickerHealth::kLive);

  // The app's other calls to the service fail until the breaker opens.
  for (int i = 0; i < 10 && breaker->state() == BreakerState::kClosed; ++i) {
    auto permit = breaker->TryAcquire();
    ASSERT_TRUE(permit.ok()) << permit.status();
    breaker->Record(*std::move(permit), tether::Outcome::kFailure,
                    absl::UnavailableError("connection refused"));
  }
  EXPECT_EQ(ticker->snapshot().health, TickerHealth::kDegraded);

  Wait(absl::Seconds(10));  // the break ends: half-open, still degraded
  EXPECT_EQ(ticker->snapshot().health, TickerHealth::kDegraded);
  breaker->Record(breaker->TryAcquire().value(), tether::Outcome::kSuccess);
  EXPECT_EQ(ticker->snapshot().health, TickerHealth::kLive);
}

// A feed that cannot connect at all trips the breaker itself; the stream
// then waits for the breaker instead of hammering the service, and finally
// gives up with an error that names the breaker.
TEST_F(PriceTickerTest, UnreachableServiceTripsTheBreakerAndTheTickerFails) {
  tether::CircuitBreakerOptions b;
  b.name = "quotes";
  b.consecutive_failures = 3;
  // Longer than the stream's patience, so the stream gives up while open.
  b.break_duration = absl::Minutes(5);
  b.max_break_duration = absl::Minutes(10);
  b.break_jitter = 0;
  auto breaker = tether::CircuitBreaker::Create(b, clock_, 1).value();
  options_.stream.breaker = breaker;
  options_.stream.max_time_without_progress = absl::Minutes(1);
  for (int i = 0; i < 50; ++i) feed_->Expect(Script().ConnectFails());
  auto ticker = StartTicker();
  while (ticker->snapshot().health != TickerHealth::kFailed &&
         clock_->AdvanceToNextTimer()) {
  }
  // Three refused connections opened the breaker; no attempt after that.
  EXPECT_EQ(breaker->counts().failed, 3u);
  EXPECT_EQ(breaker->state(), BreakerState::kOpen);
  EXPECT_GE(breaker->counts().not_permitted, 1u);  // the stream waited
  EXPECT_EQ(feed_->attempt_count(), 3u);
  PriceTicker::Snapshot s = ticker->snapshot();
  EXPECT_EQ(s.health, TickerHealth::kFailed);
  EXPECT_THAT(s.failure, StatusIs(absl::StatusCode::kUnavailable,
                                  HasSubstr("circuit breaker 'quotes'")));
}

TEST(PriceTickerOptionsTest, RejectsAnEmptySymbolAndAnAmbiguousService) {
  auto connections = std::make_shared<FakeConnectionSource>();
  QuoteService service;
  service.attempts = std::make_shared<QuoteFeed>(connections);
  PriceTicker::Options options;
  EXPECT_THAT(
      PriceTicker::Start(connections, service, options),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("symbol")));
  options.symbol = "ACME";
  EXPECT_THAT(
      PriceTicker::Start(connections, QuoteService(), options),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exactly one")));
}

}  // namespace
}  // namespace ticker
