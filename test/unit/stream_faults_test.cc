// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Faults nobody announces, as the stream sees them: a peer that goes silent
// (stall_timeout), a connect that hangs (attempt_open_timeout), an outage that
// ends (woken by the source). Fake attempts (asynchronous cancel) and a fake
// clock; nothing sleeps.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/stream_fixture.h"

namespace tether {
namespace stream_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class StreamFaultsTest : public StreamFixture {
 protected:
  StreamFaultsTest() { options_.random_seed = 3; }
  using StreamFixture::Start;
  std::unique_ptr<Stream> Start() { return Start(SeqSpec()); }
};

TEST_F(StreamFaultsTest, StalledAttemptMovesMakeBeforeBreak) {
  options_.stall_timeout = absl::Seconds(3);
  auto stream = Start();
  auto a0 = transport_->attempt(0);
  a0->Send(M(1));
  a0->Send(M(2));
  clock_->AdvanceBy(absl::Milliseconds(2999));
  EXPECT_EQ(transport_->attempt_count(), 1u);
  clock_->AdvanceBy(absl::Milliseconds(1));    // 3 s of silence: a black hole
  clock_->AdvanceBy(absl::Milliseconds(200));  // the first backoff delay
  ASSERT_EQ(transport_->attempt_count(), 2u);
  auto a1 = transport_->attempt(1);
  EXPECT_NE(a1->connection_id(), a0->connection_id());
  EXPECT_EQ(a1->request().after, 2u);
  EXPECT_FALSE(a0->cancelled());  // make before break
  EXPECT_EQ(source_->suspects().count(a0->connection_id()), 1u);
  ASSERT_EQ(source_->end_reports().size(), 1u);
  EXPECT_TRUE(source_->end_reports()[0].second.stalled);
  a1->Send(M(2));  // the overlap's duplicate
  a1->Send(M(3));
  EXPECT_TRUE(a0->cancelled());
  EXPECT_THAT(got(), ElementsAre(1, 2, 3));
  EXPECT_EQ(stream->stats().stalls, 1u);
  EXPECT_EQ(stream->stats().duplicates_dropped, 1u);
  ASSERT_EQ(events_->stalled().size(), 1u);
  EXPECT_EQ(events_->stalled()[0].second, absl::Seconds(3));
  EXPECT_TRUE(done().empty());
}

TEST_F(StreamFaultsTest, HeartbeatsKeepAStreamFromStalling) {
  options_.stall_timeout = absl::Seconds(3);
  auto stream = Start();
  auto a0 = transport_->attempt(0);
  for (std::uint64_t i = 1; i <= 60; ++i) {
    clock_->AdvanceBy(absl::Milliseconds(2900));
    a0->Send(M(i));
  }
  EXPECT_EQ(transport_->attempt_count(), 1u);
  EXPECT_EQ(stream->stats().stalls, 0u);
}

TEST_F(StreamFaultsTest, ServerThatNeverSpeaksEndsTheStreamWithinTheBudget) {
  options_.stall_timeout = absl::Seconds(1);
  options_.max_time_without_progress = absl::Seconds(10);
  auto stream = Start();
  for (int i = 0; i < 200 && done().empty(); ++i) {
    clock_->AdvanceBy(absl::Milliseconds(100));
  }
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(done()[0].message()), HasSubstr("stall_timeout"));
  EXPECT_THAT(std::string(done()[0].message()), HasSubstr("gave up"));
  EXPECT_LE(clock_->Now() - transport_->attempt(0)->started_at(),
            absl::Seconds(11));
  EXPECT_GE(transport_->attempt_count(), 2u);
}

TEST_F(StreamFaultsTest, FallbackThatStallsIsDroppedForTheReplacement) {
  options_.stall_timeout = absl::Seconds(3);
  auto stream = Start();
  auto a0 = transport_->attempt(0);
  a0->Send(M(1));
  source_->Drain(a0->connection_id());  // migration: a0 is the fallback
  auto a1 = transport_->attempt(1);
  ASSERT_NE(a1, nullptr);
  clock_->AdvanceBy(absl::Seconds(2));
  a1->Send(M(1));
  EXPECT_TRUE(a0->cancelled());
  a1->Send(M(2));
  clock_->AdvanceBy(absl::Seconds(2));
  EXPECT_EQ(stream->stats().stalls, 0u);
  EXPECT_THAT(got(), ElementsAre(1, 2));
}

TEST_F(StreamFaultsTest, ConnectThatHangsIsGivenUpAtTheOpenTimeout) {
  options_.attempt_open_timeout = absl::Seconds(2);
  source_->SetConnected(1, false);  // a black-holed address
  auto stream = Start();
  clock_->AdvanceBy(absl::Milliseconds(1999));
  EXPECT_FALSE(transport_->attempt(0)->cancelled());
  clock_->AdvanceBy(absl::Milliseconds(1));
  EXPECT_TRUE(transport_->attempt(0)->cancelled());
  EXPECT_EQ(source_->suspects().count(1), 1u);
  clock_->AdvanceBy(absl::Milliseconds(300));
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_EQ(transport_->attempt(1)->connection_id(), 2u);
  transport_->attempt(1)->Send(M(1));
  EXPECT_THAT(got(), ElementsAre(1));
  EXPECT_TRUE(done().empty());
}

TEST_F(StreamFaultsTest, RecoveryWakesAStreamWaitingOutItsBackoff) {
  options_.recovery_jitter = absl::Milliseconds(20);
  for (int i = 0; i < 8; ++i)
    transport_->Expect(Transport::Script().ConnectFails());
  auto stream = Start();
  // Let the backoff grow while the dependency is down.
  while (transport_->attempt_count() < 8 && clock_->AdvanceToNextTimer()) {
  }
  ASSERT_EQ(transport_->attempt_count(), 8u);
  clock_->RunDue();
  ASSERT_GE(source_->waiting_for_recovery(), 1u);
  const absl::Time back = clock_->Now();
  const absl::Time timer_due = clock_->NextDue();
  ASSERT_GT(timer_due - back, absl::Milliseconds(500));
  source_->Recover();
  clock_->AdvanceBy(absl::Milliseconds(20));
  ASSERT_EQ(transport_->attempt_count(), 9u);
  EXPECT_LE(transport_->attempt(8)->started_at() - back,
            absl::Milliseconds(20));
  transport_->attempt(8)->Send(M(1));
  EXPECT_THAT(got(), ElementsAre(1));
}

// Behind an L7 proxy with every backend down, the proxy's connection stays
// usable: each hint that a connection is back may be wrong. An attempt a
// hint started early that fails spends nothing of the budget and leaves the
// backoff where it was; the attempts on schedule still end the stream.
TEST_F(StreamFaultsTest, WakeUpsThatFailSpendNothingOfTheBudget) {
  options_.recovery_jitter = absl::Milliseconds(20);
  options_.max_attempts_without_progress = 3;
  options_.max_time_without_progress = absl::Minutes(10);
  ExponentialBackoffOptions b;
  b.initial_delay = absl::Seconds(30);
  b.max_delay = absl::Seconds(30);
  b.jitter = Jitter::kNone;
  options_.backoff = ExponentialBackoff::Create(b).value();
  for (int i = 0; i < 40; ++i) {
    transport_->Expect(Transport::Script().ConnectFails());
  }
  auto stream = Start();
  clock_->RunDue();
  ASSERT_EQ(transport_->attempt_count(), 1u);
  const absl::Time due = clock_->NextDue();
  ASSERT_GT(due - clock_->Now(), absl::Seconds(20));
  // Ten wrong hints: ten attempts, more than the budget allows, none of
  // them counted; the stream waits for its backoff's time again each time.
  for (std::size_t i = 1; i <= 10; ++i) {
    ASSERT_GE(source_->waiting_for_recovery(), 1u) << i;
    source_->Recover();
    clock_->AdvanceBy(absl::Milliseconds(20));
    clock_->RunDue();
    ASSERT_EQ(transport_->attempt_count(), 1 + i);
    EXPECT_EQ(clock_->NextDue(), due) << i;
  }
  EXPECT_TRUE(done().empty());
  // On schedule, the budget counts: the third failed attempt ends it.
  while (done().empty() && clock_->AdvanceToNextTimer()) {
  }
  ASSERT_EQ(done().size(), 1u);
  EXPECT_THAT(std::string(done()[0].message()),
              HasSubstr("gave up after 3 attempts"));
  EXPECT_EQ(transport_->attempt_count(), 13u);
}

TEST_F(StreamFaultsTest, InvalidFaultOptionsAreRejected) {
  auto bad = [&](ReconnectingStreamOptions o, absl::string_view field) {
    absl::Status s = Validate(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(std::string(s.message()), HasSubstr(std::string(field)));
  };
  ReconnectingStreamOptions o;
  o.stall_timeout = absl::Microseconds(10);
  bad(o, "stall_timeout");
  o.stall_timeout = absl::InfiniteDuration();
  bad(o, "stall_timeout");
  o.stall_timeout = -absl::Seconds(1);
  bad(o, "stall_timeout");
  o = ReconnectingStreamOptions();
  o.attempt_open_timeout = absl::ZeroDuration();
  bad(o, "attempt_open_timeout");
  o.attempt_open_timeout = absl::Hours(24 * 365 * 300);
  bad(o, "attempt_open_timeout");
  o = ReconnectingStreamOptions();
  o.recovery_jitter = absl::InfiniteDuration();
  bad(o, "recovery_jitter");
  o = ReconnectingStreamOptions();
  o.attempt_settle_time = absl::ZeroDuration();
  bad(o, "attempt_settle_time");
  // The extremes that are valid.
  o = ReconnectingStreamOptions();
  o.stall_timeout = absl::Hours(24);
  o.attempt_open_timeout = absl::Hours(1);
  o.recovery_jitter = absl::ZeroDuration();
  o.attempt_settle_time = absl::Hours(1);
  o.max_time_without_progress = absl::InfiniteDuration();
  EXPECT_TRUE(Validate(o).ok()) << Validate(o);
  o.stall_timeout = absl::Milliseconds(1);
  EXPECT_TRUE(Validate(o).ok());
}

TEST_F(StreamFaultsTest, ExtremeDurationsDoNotOverflowTheTimers) {
  options_.stall_timeout = absl::Hours(24);
  options_.attempt_open_timeout = absl::Hours(1);
  options_.attempt_settle_time = absl::Hours(1);
  options_.max_time_without_progress = absl::InfiniteDuration();
  options_.migration_handoff_timeout = absl::Hours(24 * 365 * 300);
  auto stream = Start();
  auto a0 = transport_->attempt(0);
  a0->Send(M(1));
  source_->Drain(a0->connection_id());
  ASSERT_EQ(transport_->attempt_count(), 2u);
  clock_->AdvanceBy(absl::Hours(23));
  transport_->attempt(1)->Send(M(2));
  EXPECT_TRUE(a0->cancelled());
  EXPECT_THAT(got(), ElementsAre(1, 2));
  stream->Cancel();
  clock_->RunDue();
  ASSERT_EQ(done().size(), 1u);
}

}  // namespace
}  // namespace stream_test
}  // namespace tether
