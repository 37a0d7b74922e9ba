// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Logic tests of ReconnectingStream: fake attempts, fake connections, a fake
// clock (the shared stream fixture). Nothing here opens a socket or sleeps.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/stream_fixture.h"
#include "tether/internal/stream_random.h"
#include "tether/testing/mocks.h"

namespace tether {
namespace stream_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class StreamTest : public StreamFixture {
 protected:
  StreamTest() { options_.random_seed = 42; }

  Stream::Spec Spec() { return SeqSpec(); }
  std::unique_ptr<Stream> StartStream(Stream::Spec spec) {
    return Start(std::move(spec));
  }
  std::unique_ptr<Stream> StartStream() { return Start(SeqSpec()); }

  // A stream whose first attempt (`old`) delivered 1..`delivered`, then
  // whose connection drained: `fresh` is the replacement, which resumed
  // after `delivered`.
  struct Move {
    std::unique_ptr<Stream> stream;
    std::shared_ptr<Transport::FakeAttempt> old;
    std::shared_ptr<Transport::FakeAttempt> fresh;
  };
  Move StartAndDrain(std::uint64_t delivered) {
    Move m;
    m.stream = StartStream();
    m.old = transport_->attempt(0);
    for (std::uint64_t i = 1; i <= delivered; ++i) m.old->Send(M(i));
    source_->Drain(m.old->connection_id());
    EXPECT_EQ(transport_->attempt_count(), 2u);
    m.fresh = transport_->attempt(1);
    EXPECT_EQ(m.fresh->request().after, delivered);
    return m;
  }
};

TEST_F(StreamTest, ReopenResumesAfterLastDeliveredSeq) {
  transport_->Expect({{M(1), M(2), M(3)}, {}, absl::UnavailableError("bye")});
  auto stream = StartStream();
  // Reopened after progress: no backoff, and (no reopen jitter here) at
  // once, without waiting for a timer.
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_EQ(transport_->attempt(0)->request().after, 0u);
  EXPECT_EQ(transport_->attempt(1)->request().after, 3u);
  transport_->attempt(1)->Send(M(4));
  EXPECT_THAT(got(), ElementsAre(1, 2, 3, 4));
  EXPECT_TRUE(done().empty());
  ASSERT_EQ(events_->started().size(), 2u);
  EXPECT_TRUE(events_->started()[1].resumed);
  EXPECT_EQ(events_->started()[1].resume_after_seq, 3u);
  EXPECT_EQ(events_->started()[1].reason, AttemptReason::kReopen);
}

// Only a reopen after progress starts without a timer: a failure whose
// backoff is 0 (a policy that keeps answering 0) waits for the clock, so
// that failed starts do not nest on the stack.
TEST_F(StreamTest, AFailureWithAZeroBackoffStillWaitsForTheTimer) {
  auto backoff = std::make_shared<::testing::NiceMock<fakes::MockBackoffPolicy>>();
  ON_CALL(*backoff, OnFailure(::testing::_))
      .WillByDefault(::testing::Return(absl::ZeroDuration()));
  options_.backoff = fakes::MockBackoffPolicy::Prototype(backoff);
  auto stream = Start(SeqSpec());
  for (std::size_t n = 1; n <= 3; ++n) {
    transport_->attempt(n - 1)->Finish(absl::UnavailableError("refused"));
    ASSERT_EQ(transport_->attempt_count(), n) << "started without the timer";
    clock_->RunDue();
    ASSERT_EQ(transport_->attempt_count(), n + 1);
  }
  EXPECT_TRUE(done().empty());
}

TEST_F(StreamTest, DuplicatesAreDroppedAndCounted) {
  transport_->Expect({{M(1), M(2), M(3)}, {}, absl::UnavailableError("bye")});
  auto stream = StartStream();
  clock_->RunDue();
  auto second = transport_->attempt(1);
  ASSERT_NE(second, nullptr);
  // A server that resumes too early repeats 2 and 3.
  second->Send(M(2));
  second->Send(M(3));
  second->Send(M(4));
  EXPECT_THAT(got(), ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(stream->stats().duplicates_dropped, 2u);
  EXPECT_THAT(events_->duplicates(), ElementsAre(2, 3));
}

TEST_F(StreamTest, GapIsDeliveredAndReportedByDefault) {
  transport_->Expect({{M(1), M(2), M(5), M(6)}, {}, {}});
  auto stream = StartStream();
  EXPECT_THAT(got(), ElementsAre(1, 2, 5, 6));
  EXPECT_EQ(stream->stats().gaps, 1u);
  ASSERT_EQ(events_->gaps().size(), 1u);
  EXPECT_EQ(events_->gaps()[0].first, 3u);
  EXPECT_EQ(events_->gaps()[0].second, 5u);
  EXPECT_TRUE(done().empty());
}

TEST_F(StreamTest, GapEndsStreamWithDataLossWhenAsked) {
  options_.gap_policy = GapPolicy::kFail;
  transport_->Expect({{M(1), M(2), M(5), M(6)}, {}, {}});
  auto stream = StartStream();
  clock_->RunDue();  // the attempt's cancel completes (gRPC: later)
  EXPECT_THAT(got(), ElementsAre(1, 2));
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(done()[0].message()), HasSubstr("expected seq 3"));
  EXPECT_TRUE(transport_->attempt(0)->cancelled());
  EXPECT_EQ(transport_->attempt_count(), 1u);
}

TEST_F(StreamTest, PermanentErrorEndsStreamOnceWithoutRetry) {
  transport_->Expect({{M(1)}, {}, absl::NotFoundError("no such key")});
  auto stream = StartStream();
  clock_->AdvanceBy(absl::Minutes(10));
  EXPECT_EQ(transport_->attempt_count(), 1u);
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(done()[0].message(), "no such key");
  EXPECT_THAT(got(), ElementsAre(1));
}

TEST_F(StreamTest, OkFromServerEndsStreamOk) {
  transport_->Expect({{M(1), M(2)}, {}, absl::OkStatus()});
  auto stream = StartStream();
  clock_->AdvanceBy(absl::Minutes(1));
  ASSERT_EQ(done().size(), 1u);
  EXPECT_TRUE(done()[0].ok());
  EXPECT_EQ(transport_->attempt_count(), 1u);
}

TEST_F(StreamTest, AttemptBudgetEndsStreamWithLastStatus) {
  options_.max_attempts_without_progress = 3;
  for (int i = 0; i < 5; ++i) {
    transport_->Expect({{}, {}, absl::ResourceExhaustedError("busy")});
  }
  auto stream = StartStream();
  while (clock_->AdvanceToNextTimer()) {
  }
  EXPECT_EQ(transport_->attempt_count(), 3u);
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(done()[0].message()), HasSubstr("gave up after 3"));
  EXPECT_EQ(events_->gave_up(), 1);
}

TEST_F(StreamTest, ProgressResetsTheBudget) {
  options_.max_attempts_without_progress = 3;
  // Two failures, one success with progress, two more failures: 5 attempts
  // in all, never 3 in a row without progress.
  transport_->Expect({{}, {}, absl::AbortedError("a")});
  transport_->Expect({{}, {}, absl::AbortedError("b")});
  transport_->Expect({{M(1)}, {}, absl::AbortedError("c")});
  transport_->Expect({{}, {}, absl::AbortedError("d")});
  transport_->Expect({{}, {}, absl::AbortedError("e")});
  transport_->Expect({{M(2)}, {}, {}});
  auto stream = StartStream();
  for (int i = 0; i < 20 && transport_->attempt_count() < 6; ++i) {
    clock_->AdvanceToNextTimer();
  }
  EXPECT_EQ(transport_->attempt_count(), 6u);
  EXPECT_TRUE(done().empty());
  EXPECT_THAT(got(), ElementsAre(1, 2));
}

TEST_F(StreamTest, TimeBudgetEndsStream) {
  options_.max_attempts_without_progress = 1000;
  options_.max_time_without_progress = absl::Seconds(30);
  for (int i = 0; i < 1000; ++i) {
    transport_->Expect({{}, {}, absl::InternalError("flaky")});
  }
  absl::Time start = clock_->Now();
  auto stream = StartStream();
  while (done().empty() && clock_->AdvanceToNextTimer()) {
  }
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kInternal);
  EXPECT_LE(clock_->Now() - start, absl::Seconds(30));
  EXPECT_GE(clock_->Now() - start, absl::Seconds(20));
}

TEST_F(StreamTest, BackoffDelaysFollowThePolicyUnderAFixedSeed) {
  ExponentialBackoffOptions b;
  b.initial_delay = absl::Milliseconds(100);
  b.max_delay = absl::Seconds(1);
  b.multiplier = 2;
  b.jitter = Jitter::kFull;
  options_.backoff = *ExponentialBackoff::Create(b);
  options_.random_seed = 7;
  for (int i = 0; i < 6; ++i) {
    transport_->Expect({{}, {}, absl::UnavailableError("down")});
  }
  auto stream = StartStream();
  for (int i = 0; i < 5; ++i) clock_->AdvanceToNextTimer();
  // The same policy and the same seed give the same delays.
  auto expected_policy = *ExponentialBackoff::Create(b);
  internal::StreamRandom gen(7);  // the stream's own generator
  std::vector<absl::Duration> expected;
  for (int i = 0; i < 5; ++i) {
    expected.push_back(expected_policy->OnFailure(absl::BitGenRef(gen)));
  }
  ASSERT_GE(events_->backoffs().size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(events_->backoffs()[i], expected[i]) << i;
    // Full jitter: below the un-jittered cap of this step.
    EXPECT_LT(events_->backoffs()[i],
              std::min(absl::Seconds(1), absl::Milliseconds(100) * (1 << i)));
  }
}

TEST_F(StreamTest, CancelDuringBackoffEndsPromptlyWithCancelled) {
  transport_->Expect({{}, {}, absl::UnavailableError("down")});
  auto stream = StartStream();
  ASSERT_EQ(clock_->PendingTimers(), 1u);  // the backoff wait
  stream->Cancel();
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(clock_->PendingTimers(), 0u);
  clock_->AdvanceBy(absl::Minutes(5));
  EXPECT_EQ(transport_->attempt_count(), 1u);
  stream->Cancel();  // idempotent
  EXPECT_EQ(done().size(), 1u);
}

TEST_F(StreamTest, CancelWhileStreamingCancelsTheAttempt) {
  auto stream = StartStream();
  auto a = transport_->attempt(0);
  a->Send(M(1));
  stream->Cancel();
  EXPECT_TRUE(a->cancelled());
  // The end waits for the attempt's cancel, which gRPC completes later.
  EXPECT_TRUE(done().empty());
  clock_->RunDue();
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(events_->ended_by_client(), 1);
}

TEST_F(StreamTest, DestroyWithAttemptInFlightIsSafeAndSilent) {
  auto stream = StartStream();
  auto a = transport_->attempt(0);
  a->Send(M(1));
  stream.reset();
  clock_->RunDue();  // the cancel completes
  // The call is cancelled; nothing reaches the app afterwards.
  EXPECT_TRUE(a->cancelled());
  EXPECT_TRUE(a->done());
  EXPECT_THAT(got(), ElementsAre(1));
  EXPECT_TRUE(done().empty());
  clock_->AdvanceBy(absl::Minutes(1));
  EXPECT_EQ(transport_->attempt_count(), 1u);
}

TEST_F(StreamTest, DestroyFromInsideOnMessage) {
  std::unique_ptr<Stream> stream;
  int calls = 0;
  auto s = Stream::Start(
      source_, Spec(), options_,
      [&](Resp&&) {
        ++calls;
        stream.reset();  // the last callback
      },
      [&](const absl::Status&) { ++calls; });
  ASSERT_TRUE(s.ok());
  stream = *std::move(s);
  transport_->attempt(0)->Send(M(1));
  EXPECT_EQ(stream, nullptr);
  EXPECT_EQ(calls, 1);
}

TEST_F(StreamTest, CallbacksAfterDestroyFromAnotherThreadDoNotRun) {
  auto stream = StartStream();
  auto a = transport_->attempt(0);
  std::thread t([&] {
    for (std::uint64_t i = 1; i <= 200; ++i) a->Send(M(i));
  });
  stream.reset();
  const std::size_t after = got().size();
  t.join();
  EXPECT_EQ(got().size(), after);
  EXPECT_TRUE(done().empty());
}

TEST_F(StreamTest, InvalidOptionsAreRejectedBeforeAnythingStarts) {
  auto check = [&](ReconnectingStreamOptions o, absl::string_view field) {
    auto s = Stream::Start(
        source_, Spec(), o, [](Resp&&) {}, [](const absl::Status&) {});
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(field));
  };
  ReconnectingStreamOptions o = options_;
  o.max_attempts_without_progress = 0;
  check(o, "max_attempts_without_progress");
  o = options_;
  o.max_time_without_progress = absl::ZeroDuration();
  check(o, "max_time_without_progress");
  o = options_;
  o.reopen_after_progress_jitter = -absl::Seconds(1);
  check(o, "reopen_after_progress_jitter");
  o = options_;
  o.migration_handoff_timeout = absl::ZeroDuration();
  check(o, "migration_handoff_timeout");
  o = options_;
  o.max_buffered_messages = 0;
  check(o, "max_buffered_messages");
  o = options_;
  o.migration_jitter = -absl::Milliseconds(1);
  check(o, "migration_jitter");
  EXPECT_EQ(transport_->attempt_count(), 0u);

  ExponentialBackoffOptions b;
  b.multiplier = 0.5;
  auto bad = ExponentialBackoff::Create(b);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("multiplier"));
  b = ExponentialBackoffOptions();
  b.max_delay = absl::Milliseconds(1);
  EXPECT_FALSE(ExponentialBackoff::Create(b).ok());

  Stream::Spec spec = Spec();
  spec.resume_after = nullptr;
  auto s = Stream::Start(
      source_, spec, options_, [](Resp&&) {}, [](const absl::Status&) {});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  spec = Spec();
  spec.attempt_factory = nullptr;
  s = Stream::Start(
      source_, spec, options_, [](Resp&&) {}, [](const absl::Status&) {});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  s = Stream::Start(source_, Spec(), options_, nullptr,
                    [](const absl::Status&) {});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(transport_->attempt_count(), 0u);
}

TEST_F(StreamTest, StartChecksItsArgumentsInOrderAndKeepsNothingWhenOneFails) {
  // Each check names what is wrong; the first failing one wins: the
  // callbacks, then the options, then the target, then the spec.
  ReconnectingStreamOptions bad = options_;
  bad.max_attempts_without_progress = 0;
  auto s = Stream::Start(source_, Spec(), bad, [](Resp&&) {}, nullptr);
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("ReconnectingStream::Start needs both on_message"));
  s = Stream::Start(
      std::shared_ptr<ConnectionSource>(), Spec(), bad, [](Resp&&) {},
      [](const absl::Status&) {});
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("max_attempts_without_progress"));
  Stream::Spec no_start = Spec();
  no_start.attempt_factory = nullptr;
  s = Stream::Start(
      std::shared_ptr<ConnectionSource>(), no_start, options_, [](Resp&&) {},
      [](const absl::Status&) {});
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("ReconnectingStream needs a target"));
  // `Open` needs no callbacks; its spec is still checked.
  s = Stream::Open(source_, no_start, options_);
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("StreamSpec.start is empty"));

  // What the spec held, moved into the stream's parts before a check
  // failed, is released with them.
  auto held = std::make_shared<int>(0);
  Stream::Spec spec = Spec();
  spec.resume_after = [held](Req&, std::uint64_t) {};
  spec.resync = [held](ResyncDone) {};  // resync without a trigger: invalid
  s = Stream::Start(
      source_, std::move(spec), options_, [held](Resp&&) {},
      [held](const absl::Status&) {});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(held.use_count(), 1);
  EXPECT_EQ(transport_->attempt_count(), 0u);
}

TEST_F(StreamTest, MessageWithoutSequenceEndsWithClearError) {
  transport_->Expect({{M(1), M(0), M(2)}, {}, {}});
  auto stream = StartStream();
  clock_->RunDue();
  EXPECT_THAT(got(), ElementsAre(1));
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(done()[0].message()),
              HasSubstr("without a sequence number"));
}

TEST_F(StreamTest, SequenceGoingBackwardsWithinAnAttemptIsAnError) {
  transport_->Expect({{M(5), M(6), M(3)}, {}, {}});
  auto stream = StartStream();
  clock_->RunDue();
  EXPECT_THAT(got(), ElementsAre(5, 6));
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(done()[0].message()), HasSubstr("went backwards"));
}

TEST_F(StreamTest, WithoutSequenceNumbersReopenSendsTheFirstRequest) {
  Stream::Spec spec = Spec();
  spec.sequence_of = nullptr;
  spec.resume_after = nullptr;
  spec.request.after = 77;
  transport_->Expect({{M(0), M(0)}, {}, absl::UnavailableError("x")});
  auto stream = StartStream(std::move(spec));
  clock_->RunDue();
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_EQ(transport_->attempt(1)->request().after, 77u);
  EXPECT_EQ(rec_->messages(), 2u);
}

TEST_F(StreamTest, InitialLastSeqDropsOlderMessagesAndResumes) {
  Stream::Spec spec = Spec();
  spec.initial_last_seq = 10;
  spec.request.after = 10;
  transport_->Expect({{M(9), M(10), M(11)}, {}, absl::UnavailableError("x")});
  auto stream = StartStream(std::move(spec));
  clock_->RunDue();
  EXPECT_THAT(got(), ElementsAre(11));
  EXPECT_EQ(transport_->attempt(1)->request().after, 11u);
}

TEST_F(StreamTest, BlockingReaderReadsThenFinishes) {
  auto s = Stream::Open(source_, Spec(), options_);
  ASSERT_TRUE(s.ok());
  auto stream = *std::move(s);
  transport_->attempt(0)->Send(M(1));
  transport_->attempt(0)->Send(M(2));
  transport_->attempt(0)->Finish(absl::PermissionDeniedError("nope"));
  Resp r;
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_EQ(r.seq, 1u);
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_EQ(r.seq, 2u);
  EXPECT_FALSE(stream->Read(&r));
  EXPECT_EQ(stream->Finish().code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(StreamTest, BlockingReaderAppliesFlowControl) {
  options_.max_buffered_messages = 2;
  auto stream = *Stream::Open(source_, Spec(), options_);
  auto a = transport_->attempt(0);
  for (std::uint64_t i = 1; i <= 5; ++i) a->Send(M(i));
  EXPECT_EQ(a->delivered(), 2u);  // the stream stopped reading
  EXPECT_TRUE(a->paused());
  Resp r;
  for (std::uint64_t i = 1; i <= 5; ++i) {
    ASSERT_TRUE(stream->Read(&r));
    EXPECT_EQ(r.seq, i);
  }
  EXPECT_EQ(a->delivered(), 5u);
}

TEST_F(StreamTest, DrainMigratesMakeBeforeBreak) {
  // The overlap without the hold: the old attempt delivers on until the
  // replacement's first message (see MigrationHoldsTheFallback... below).
  options_.migration_hold_fallback = false;
  auto stream = StartStream();
  auto old = transport_->attempt(0);
  old->Send(M(1));
  old->Send(M(2));
  source_->Drain(old->connection_id());
  // A replacement opened at once on another connection, resuming after 2;
  // the old attempt still runs.
  ASSERT_EQ(transport_->attempt_count(), 2u);
  auto fresh = transport_->attempt(1);
  EXPECT_NE(fresh->connection_id(), old->connection_id());
  EXPECT_EQ(fresh->request().after, 2u);
  EXPECT_FALSE(old->cancelled());
  old->Send(M(3));    // the old stream still delivers during the overlap
  fresh->Send(M(3));  // duplicate
  EXPECT_TRUE(old->cancelled());  // handed off on the first message
  fresh->Send(M(4));
  EXPECT_THAT(got(), ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(stream->stats().migrations, 1u);
  EXPECT_EQ(stream->stats().duplicates_dropped, 1u);
  EXPECT_TRUE(done().empty());
  EXPECT_EQ(events_->started()[1].reason, AttemptReason::kMigration);
  // The old attempt's end was ours: no backoff, no new attempt.
  EXPECT_EQ(transport_->attempt_count(), 2u);
  EXPECT_TRUE(events_->backoffs().empty());
}

// The default: the old attempt stops at the replacement's resume position.
// What it receives past that position waits; the replacement sends it again
// and delivers it, so nothing arrives twice and the stream does not trail
// the server by the overlap.
TEST_F(StreamTest, MigrationHoldsTheFallbackAtTheResumePosition) {
  auto [stream, old, fresh] = StartAndDrain(2);
  old->Send(M(3));  // held, and the old attempt stops reading
  old->Send(M(4));  // waits in the transport
  EXPECT_THAT(got(), ElementsAre(1, 2));
  EXPECT_TRUE(old->paused());
  EXPECT_FALSE(old->cancelled());
  fresh->Send(M(3));
  EXPECT_TRUE(old->cancelled());  // handed off; what it held is dropped
  fresh->Send(M(4));
  EXPECT_THAT(got(), ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(stream->stats().duplicates_dropped, 0u);
  EXPECT_EQ(stream->stats().last_delivered_seq, 4u);
  EXPECT_TRUE(done().empty());
}

// The replacement fails before it delivers: the stream falls back to the
// old attempt, which delivers what it held, reads on, and moves again later
// from where it got to.
TEST_F(StreamTest, FallbackDeliversWhatItHeldWhenTheReplacementFails) {
  auto [stream, old, fresh] = StartAndDrain(1);
  old->Send(M(2));  // held
  old->Send(M(3));  // waits
  EXPECT_THAT(got(), ElementsAre(1));
  fresh->Finish(absl::UnavailableError("replacement refused"));
  EXPECT_THAT(got(), ElementsAre(1, 2, 3));
  EXPECT_FALSE(old->paused());
  EXPECT_FALSE(old->cancelled());
  old->Send(M(4));
  EXPECT_THAT(got(), ElementsAre(1, 2, 3, 4));
  // The next move (after the backoff) resumes after 4 and holds again.
  clock_->AdvanceBy(absl::Seconds(10));
  ASSERT_EQ(transport_->attempt_count(), 3u);
  auto again = transport_->attempt(2);
  EXPECT_EQ(again->request().after, 4u);
  old->Send(M(5));
  EXPECT_THAT(got(), ElementsAre(1, 2, 3, 4));
  again->Send(M(5));
  again->Send(M(6));
  EXPECT_THAT(got(), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_TRUE(old->cancelled());
  EXPECT_EQ(stream->stats().duplicates_dropped, 0u);
}

// The replacement's connection drains before it delivers: back to the old
// attempt (what it held is delivered), and a new replacement resumes from
// there.
TEST_F(StreamTest, FallbackDeliversWhatItHeldWhenTheReplacementDrains) {
  auto [stream, old, fresh] = StartAndDrain(1);
  old->Send(M(2));  // held
  source_->Drain(fresh->connection_id());
  EXPECT_TRUE(fresh->cancelled());
  EXPECT_THAT(got(), ElementsAre(1, 2));
  ASSERT_EQ(transport_->attempt_count(), 3u);
  auto third = transport_->attempt(2);
  EXPECT_EQ(third->request().after, 2u);
  old->Send(M(3));  // held for the third
  third->Send(M(3));
  EXPECT_THAT(got(), ElementsAre(1, 2, 3));
  EXPECT_EQ(stream->stats().duplicates_dropped, 0u);
}

// A message that arrives on the old attempt while the replacement's start
// is in flight (after it took its resume position, here: while the request
// is built) is held too, not delivered and then replayed.
TEST_F(StreamTest, MessageDuringTheReplacementsStartIsHeld) {
  std::shared_ptr<Transport::FakeAttempt> old;
  Stream::Spec spec = Spec();
  spec.resume_after = [&old](Req& r, std::uint64_t seq) {
    r.after = seq;
    if (old) old->Send(M(seq + 1));  // arrives mid-start
  };
  auto stream = StartStream(std::move(spec));
  old = transport_->attempt(0);
  old->Send(M(1));
  source_->Drain(old->connection_id());
  ASSERT_EQ(transport_->attempt_count(), 2u);
  auto fresh = transport_->attempt(1);
  EXPECT_EQ(fresh->request().after, 1u);
  EXPECT_THAT(got(), ElementsAre(1));
  EXPECT_TRUE(old->paused());
  fresh->Send(M(2));
  EXPECT_THAT(got(), ElementsAre(1, 2));
  EXPECT_EQ(stream->stats().duplicates_dropped, 0u);
  old.reset();
}

// The app cancels while the old attempt holds a message: it is never
// delivered, and nothing is left running.
TEST_F(StreamTest, CancelWhileHoldingDeliversNothingMore) {
  auto [stream, old, fresh] = StartAndDrain(1);
  old->Send(M(2));  // held
  stream->Cancel();
  clock_->RunDue();
  EXPECT_TRUE(old->cancelled());
  EXPECT_TRUE(fresh->cancelled());
  EXPECT_THAT(got(), ElementsAre(1));
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kCancelled);
}

// A replacement that never delivers: after migration_handoff_timeout the
// old attempt is cancelled anyway and what it held is dropped; the
// replacement, which resumed before it, delivers it when it speaks.
TEST_F(StreamTest, HandoffTimeoutDropsTheHeldMessageForTheReplacement) {
  auto [stream, old, fresh] = StartAndDrain(1);
  old->Send(M(2));
  clock_->AdvanceBy(absl::Seconds(2));
  EXPECT_TRUE(old->cancelled());
  EXPECT_THAT(got(), ElementsAre(1));
  fresh->Send(M(2));
  EXPECT_THAT(got(), ElementsAre(1, 2));
}

TEST_F(StreamTest, MigrationJitterSpreadsTheMoves) {
  options_.migration_jitter = absl::Milliseconds(100);
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < 20; ++i) {
    options_.random_seed = 100 + i;  // each stream draws its own delay
    streams.push_back(StartStream());
  }
  ASSERT_EQ(transport_->attempt_count(), 20u);
  for (int i = 0; i < 20; ++i) transport_->attempt(i)->Send(M(1));
  source_->Drain(1);
  EXPECT_EQ(transport_->attempt_count(), 20u);  // nobody moved yet
  clock_->AdvanceBy(absl::Milliseconds(50));
  const std::size_t halfway = transport_->attempt_count() - 20;
  clock_->AdvanceBy(absl::Milliseconds(50));
  EXPECT_EQ(transport_->attempt_count(), 40u);  // all moved within 100 ms
  EXPECT_GT(halfway, 0u);
  EXPECT_LT(halfway, 20u);
  for (std::size_t i = 20; i < 40; ++i) {
    EXPECT_NE(transport_->attempt(i)->connection_id(), 1u);
    EXPECT_EQ(transport_->attempt(i)->request().after, 1u);
  }
}

TEST_F(StreamTest, QuietStreamHandsOffAfterTimeout) {
  options_.migration_handoff_timeout = absl::Seconds(2);
  auto stream = StartStream();
  auto old = transport_->attempt(0);
  old->Send(M(1));
  source_->Drain(old->connection_id());
  ASSERT_EQ(transport_->attempt_count(), 2u);
  clock_->AdvanceBy(absl::Milliseconds(1999));
  EXPECT_FALSE(old->cancelled());
  clock_->AdvanceBy(absl::Milliseconds(1));
  EXPECT_TRUE(old->cancelled());
  transport_->attempt(1)->Send(M(2));
  EXPECT_THAT(got(), ElementsAre(1, 2));
}

TEST_F(StreamTest, MigrationDisabledMovesOnlyWhenTheAttemptEnds) {
  options_.migrate_on_drain = false;
  auto stream = StartStream();
  auto old = transport_->attempt(0);
  old->Send(M(1));
  source_->Drain(old->connection_id());
  EXPECT_EQ(transport_->attempt_count(), 1u);
  old->Finish(absl::UnavailableError("drained"));
  clock_->RunDue();
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_NE(transport_->attempt(1)->connection_id(), old->connection_id());
}

TEST_F(StreamTest, EarlyEndOnReadyConnectionMarksItSuspect) {
  auto stream = StartStream();
  auto first = transport_->attempt(0);
  first->Send(M(1));
  // The server ends the stream before any GOAWAY.
  first->Finish(absl::UnavailableError("server is shutting down"));
  ASSERT_EQ(source_->suspects().count(first->connection_id()), 1u);
  clock_->RunDue();
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_NE(transport_->attempt(1)->connection_id(), first->connection_id());
}

TEST_F(StreamTest, ServerCancelledIsADrainButTransientIsNot) {
  auto stream = StartStream();
  transport_->attempt(0)->Send(M(1));
  transport_->attempt(0)->Finish(absl::CancelledError("server cancelled"));
  ASSERT_EQ(events_->ended().size(), 1u);
  EXPECT_EQ(events_->ended()[0].cls, EndClass::kDrain);
  clock_->RunDue();
  transport_->attempt(1)->Send(M(2));
  transport_->attempt(1)->Finish(absl::InternalError("oops"));
  EXPECT_EQ(events_->ended()[1].cls, EndClass::kTransient);
  EXPECT_EQ(source_->drain_reports().size(), 1u);
}

TEST_F(StreamTest, FailedPickIsRetriedWithBackoff) {
  source_->FailNextPick(fakes::ConnectFailure());
  auto stream = StartStream();
  EXPECT_EQ(transport_->attempt_count(), 0u);
  ASSERT_EQ(events_->backoffs().size(), 1u);
  clock_->AdvanceToNextTimer();
  EXPECT_EQ(transport_->attempt_count(), 1u);
}

TEST_F(StreamTest, EveryPickIsReleased) {
  transport_->Expect({{M(1)}, {}, absl::UnavailableError("a")});
  transport_->Expect({{M(2)}, {}, absl::UnavailableError("b")});
  auto stream = StartStream();
  clock_->RunDue();
  clock_->RunDue();
  ASSERT_EQ(transport_->attempt_count(), 3u);
  stream.reset();
  clock_->RunDue();  // the last attempt's cancel completes
  EXPECT_EQ(source_->releases(), 3u);
}

}  // namespace
}  // namespace stream_test
}  // namespace tether
