// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Logic tests of the drain-notice hook (`StreamSpec::is_drain_notice`) and
// of its pace (`NoticePace`): fake attempts, fake connections, the fake
// clock of the shared stream fixture. Nothing here opens a socket or sleeps.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "streams/notice_pace.h"
#include "test/unit/stream_fixture.h"
#include "tether/circuit_breaker.h"
#include "tether/testing/delivery_checker.h"

namespace tether {
namespace stream_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The app's drain notice: a message with no position and this mark.
constexpr std::uint64_t kNoticeMark = 0xD1A1;
Resp Notice() { return Resp{0, kNoticeMark}; }
bool IsNotice(const Resp& r) { return r.ack == kNoticeMark; }

class DrainNoticeTest : public StreamFixture {
 protected:
  Stream::Spec NoticeSpec() {
    Stream::Spec spec = SeqSpec();
    spec.is_drain_notice = IsNotice;
    return spec;
  }

  // A breaker that records every outcome (it never trips in these tests).
  std::shared_ptr<CircuitBreaker> MakeBreaker() {
    CircuitBreakerOptions o;
    o.name = "notice";
    auto b = CircuitBreaker::Create(o, clock_, /*seed=*/1);
    EXPECT_TRUE(b.ok()) << b.status();
    options_.breaker = *b;
    return *b;
  }
};

TEST_F(DrainNoticeTest, ANoticeMovesMakeBeforeBreakAndIsNotDelivered) {
  auto breaker = MakeBreaker();
  auto stream = Start(NoticeSpec());
  auto old = transport_->attempt(0);
  old->Send(M(1));
  old->Send(M(2));
  old->Send(Notice());
  // A replacement opened at once, resuming after 2; the old attempt runs on
  // until it delivers, and its connection is not marked draining.
  ASSERT_EQ(transport_->attempt_count(), 2u);
  auto fresh = transport_->attempt(1);
  EXPECT_EQ(fresh->request().after, 2u);
  EXPECT_FALSE(old->cancelled());
  EXPECT_FALSE(source_->draining(old->connection_id()));
  old->Send(M(3));  // held at the replacement's resume position
  fresh->Send(M(3));
  EXPECT_TRUE(old->cancelled());
  fresh->Send(M(4));
  clock_->RunDue();
  EXPECT_THAT(got(), ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(rec_->messages(), 4u);  // the notice did not reach the app
  EXPECT_TRUE(done().empty());
  EXPECT_THAT(events_->reasons(),
              ElementsAre(AttemptReason::kFirst, AttemptReason::kDrainNotice));
  EXPECT_EQ(stream->stats().drain_notices, 1u);
  EXPECT_EQ(stream->stats().migrations, 1u);
  EXPECT_EQ(stream->stats().duplicates_dropped, 0u);
  EXPECT_TRUE(events_->backoffs().empty());
  // Nothing against the breaker, nothing reported about the connection.
  EXPECT_EQ(breaker->counts().failed, 0u);
  EXPECT_TRUE(source_->end_reports().empty());
}

TEST_F(DrainNoticeTest, TheAppGetsTheNoticeWhenTheSpecAsks) {
  Stream::Spec spec = NoticeSpec();
  spec.deliver_drain_notice = true;
  auto stream = Start(std::move(spec));
  auto old = transport_->attempt(0);
  old->Send(M(1));
  old->Send(Notice());
  EXPECT_EQ(rec_->messages(), 2u);
  EXPECT_THAT(got(), ElementsAre(1));  // the notice has no position
  ASSERT_EQ(transport_->attempt_count(), 2u);
  transport_->attempt(1)->Send(M(2));
  EXPECT_THAT(got(), ElementsAre(1, 2));
  EXPECT_EQ(stream->stats().last_delivered_seq, 2u);
}

// Without the hook a notice-shaped message is an ordinary message: with
// sequence numbers it has none, which fails the stream (the sequence_of
// contract). The hook is what makes it a notice.
TEST_F(DrainNoticeTest, WithoutTheHookTheNoticeIsAnOrdinaryMessage) {
  auto stream = Start(SeqSpec());
  transport_->attempt(0)->Send(Notice());
  clock_->RunDue();
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kInternal);
  EXPECT_EQ(transport_->attempt_count(), 1u);
}

// The old attempt ends (the server cut it) before the replacement
// delivers: the replacement runs on alone, and the cut is neither a
// breaker failure nor an unannounced end of the connection.
TEST_F(DrainNoticeTest, TheNoticedAttemptsEndIsAnnounced) {
  auto breaker = MakeBreaker();
  auto stream = Start(NoticeSpec());
  auto old = transport_->attempt(0);
  old->Send(M(1));
  old->Send(Notice());
  ASSERT_EQ(transport_->attempt_count(), 2u);
  old->Finish(absl::UnavailableError("server is draining"));
  clock_->RunDue();
  auto fresh = transport_->attempt(1);
  EXPECT_FALSE(fresh->cancelled());
  fresh->Send(M(2));
  clock_->RunDue();
  EXPECT_THAT(got(), ElementsAre(1, 2));
  EXPECT_EQ(transport_->attempt_count(), 2u);
  EXPECT_TRUE(source_->end_reports().empty());
  EXPECT_EQ(breaker->counts().failed, 0u);
  EXPECT_TRUE(events_->backoffs().empty());
}

// Behind a proxy the new call may land on the leaving server, which
// notices it at once: the stream drops it, stays on the old attempt and
// moves again, without backoff. 8 moves in a row go at once; then one
// every 100 ms (NoticePace), never a spin.
TEST_F(DrainNoticeTest, RepeatedNoticesMoveAgainAtTheNoticePace) {
  auto breaker = MakeBreaker();
  auto stream = Start(NoticeSpec());
  auto old = transport_->attempt(0);
  old->Send(M(1));
  old->Send(Notice());  // move 1
  for (std::size_t i = 1; i < 8; ++i) {
    ASSERT_EQ(transport_->attempt_count(), i + 1);
    transport_->attempt(i)->Send(Notice());  // moves 2..8 at once
    EXPECT_TRUE(transport_->attempt(i)->cancelled());
  }
  ASSERT_EQ(transport_->attempt_count(), 9u);
  transport_->attempt(8)->Send(Notice());  // move 9 waits for a token
  EXPECT_TRUE(transport_->attempt(8)->cancelled());
  EXPECT_EQ(transport_->attempt_count(), 9u);
  // Meanwhile the old attempt delivers on.
  old->Send(M(2));
  EXPECT_THAT(got(), ElementsAre(1, 2));
  clock_->AdvanceBy(absl::Milliseconds(99));
  EXPECT_EQ(transport_->attempt_count(), 9u);
  clock_->AdvanceBy(absl::Milliseconds(1));
  ASSERT_EQ(transport_->attempt_count(), 10u);
  auto tenth = transport_->attempt(9);
  EXPECT_EQ(tenth->request().after, 2u);
  tenth->Send(Notice());  // move 11: another 100 ms
  clock_->AdvanceBy(absl::Milliseconds(99));
  EXPECT_EQ(transport_->attempt_count(), 10u);
  clock_->AdvanceBy(absl::Milliseconds(1));
  ASSERT_EQ(transport_->attempt_count(), 11u);
  // This one landed elsewhere: it delivers and the old attempt is left.
  auto last = transport_->attempt(10);
  last->Send(M(3));
  EXPECT_TRUE(old->cancelled());
  clock_->RunDue();
  EXPECT_THAT(got(), ElementsAre(1, 2, 3));
  EXPECT_TRUE(done().empty());
  EXPECT_TRUE(events_->backoffs().empty());
  EXPECT_EQ(stream->stats().drain_notices, 10u);
  EXPECT_EQ(breaker->counts().failed, 0u);
  EXPECT_TRUE(source_->end_reports().empty());
  for (const AttemptInfo& info : events_->started()) {
    if (info.attempt > 1) {
      EXPECT_EQ(info.reason, AttemptReason::kDrainNotice) << info.attempt;
    }
  }
}

TEST_F(DrainNoticeTest, WithoutMigrateOnDrainTheStreamStaysUntilTheEnd) {
  options_.migrate_on_drain = false;
  auto stream = Start(NoticeSpec());
  auto old = transport_->attempt(0);
  old->Send(M(1));
  old->Send(Notice());
  old->Send(M(2));
  EXPECT_EQ(transport_->attempt_count(), 1u);
  old->Finish(absl::UnavailableError("server is draining"));
  clock_->RunDue();
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_EQ(transport_->attempt(1)->request().after, 2u);
  EXPECT_TRUE(source_->end_reports().empty());  // announced by the notice
}

TEST_F(DrainNoticeTest, DeliverWithoutTheHookIsRejected) {
  Stream::Spec spec = SeqSpec();
  spec.deliver_drain_notice = true;
  const absl::Status s = StartError(std::move(spec));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("StreamSpec.deliver_drain_notice needs "
                        "is_drain_notice"));
  BidiStream::Spec bidi = BidiSpec();
  bidi.deliver_drain_notice = true;
  EXPECT_THAT(std::string(StartError(std::move(bidi)).message()),
              HasSubstr("BidiStreamSpec.deliver_drain_notice"));
  EXPECT_EQ(transport_->attempt_count(), 0u);
  EXPECT_EQ(bidi_->attempt_count(), 0u);
}

TEST_F(DrainNoticeTest, AThrowingHookEndsTheStreamNamingIt) {
  Stream::Spec spec = SeqSpec();
  spec.is_drain_notice = [](const Resp&) -> bool {
    throw std::runtime_error("boom");
  };
  auto stream = Start(std::move(spec));
  transport_->attempt(0)->Send(M(1));
  clock_->RunDue();
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(done()[0].message()), HasSubstr("is_drain_notice"));
}

// A bidi stream moves on a notice as on a drain: the new attempt opens
// from the last delivered position and replays the unacknowledged writes;
// new writes go to it.
TEST_F(DrainNoticeTest, ABidiStreamMovesWithItsWrites) {
  BidiStream::Spec spec = BidiSpec();
  spec.is_drain_notice = IsNotice;
  auto stream = StartBidi(std::move(spec));
  auto old = bidi_->attempt(0);
  ASSERT_TRUE(stream->Write(W(1)).ok());
  ASSERT_TRUE(stream->Write(W(2)).ok());
  old->Send(Ack(1));
  old->Send(M(1));
  old->Send(Notice());
  ASSERT_EQ(bidi_->attempt_count(), 2u);
  auto fresh = bidi_->attempt(1);
  EXPECT_THAT(bidi_->writes(1), ElementsAre(Open(1), W(2)));
  ASSERT_TRUE(stream->Write(W(3)).ok());
  EXPECT_THAT(bidi_->writes(0), ElementsAre(Open(0), W(1), W(2)));
  EXPECT_THAT(bidi_->writes(1), ElementsAre(Open(1), W(2), W(3)));
  fresh->Send(Ack(2));
  EXPECT_TRUE(old->cancelled());
  fresh->Send(Ack(3));
  fresh->Send(M(2));
  clock_->RunDue();
  EXPECT_EQ(stream->outbox_size(), 0u);
  EXPECT_THAT(got(), ElementsAre(1, 2));
  EXPECT_EQ(bidi_->infos()[1].reason, AttemptReason::kDrainNotice);
  EXPECT_EQ(stream->stats().drain_notices, 1u);
  EXPECT_TRUE(done().empty());
}

// A bidi replacement that lands on the leaving server too is dropped; the
// writes wait for the next attempt, which replays them.
TEST_F(DrainNoticeTest, ABidiReplacementThatIsNoticedToo) {
  BidiStream::Spec spec = BidiSpec();
  spec.is_drain_notice = IsNotice;
  auto stream = StartBidi(std::move(spec));
  auto old = bidi_->attempt(0);
  ASSERT_TRUE(stream->Write(W(1)).ok());
  old->Send(M(1));
  old->Send(Notice());
  ASSERT_EQ(bidi_->attempt_count(), 2u);
  bidi_->attempt(1)->Send(Notice());
  EXPECT_TRUE(bidi_->attempt(1)->cancelled());
  ASSERT_EQ(bidi_->attempt_count(), 3u);
  EXPECT_THAT(bidi_->writes(2), ElementsAre(Open(1), W(1)));
  bidi_->attempt(2)->Send(Ack(1));
  bidi_->attempt(2)->Send(M(2));
  EXPECT_TRUE(old->cancelled());
  clock_->RunDue();
  EXPECT_EQ(stream->outbox_size(), 0u);
  EXPECT_THAT(got(), ElementsAre(1, 2));
}

// The shipped DeliveryChecker knows a delivered notice has no position,
// and its observer passes OnDrainNotice on to the app's.
TEST_F(DrainNoticeTest, TheDeliveryCheckerPassesAStreamThatDeliversNotices) {
  Stream::Spec spec = NoticeSpec();
  spec.deliver_drain_notice = true;
  auto checker = fakes::DeliveryChecker<Resp>::For(spec, options_);
  options_.observer = checker.Observer(events_);
  auto made = Stream::Start(source_, std::move(spec), options_,
                            checker.OnMessage(), checker.OnDone());
  ASSERT_TRUE(made.ok()) << made.status();
  auto old = transport_->attempt(0);
  old->Send(M(1));
  old->Send(Notice());
  ASSERT_EQ(transport_->attempt_count(), 2u);
  transport_->attempt(1)->Send(M(2));
  clock_->RunDue();
  EXPECT_EQ(checker.delivered(), 3u);
  EXPECT_TRUE(checker.status().ok()) << checker.status();
  EXPECT_THAT(events_->reasons(),
              ElementsAre(AttemptReason::kFirst, AttemptReason::kDrainNotice));
  EXPECT_EQ(events_->notices(), 1);
}

// The pace as a plain value.
TEST(NoticePaceTest, EightAtOnceThenOneEvery100ms) {
  internal::NoticePace pace;
  const absl::Time t0 = absl::UnixEpoch() + absl::Hours(1);
  for (int i = 0; i < internal::NoticePace::kBurst; ++i) {
    EXPECT_EQ(pace.Take(t0), absl::ZeroDuration()) << i;
  }
  EXPECT_EQ(pace.Take(t0), absl::Milliseconds(100));
  EXPECT_EQ(pace.Take(t0), absl::Milliseconds(200));
  // 300 ms later the two waiting moves have started and one token is back.
  EXPECT_EQ(pace.Take(t0 + absl::Milliseconds(300)), absl::ZeroDuration());
  EXPECT_EQ(pace.Take(t0 + absl::Milliseconds(300)), absl::Milliseconds(100));
}

TEST(NoticePaceTest, TheBucketRefillsAndTimeNeverGoesBack) {
  internal::NoticePace pace;
  const absl::Time t0 = absl::UnixEpoch() + absl::Hours(1);
  for (int i = 0; i < 20; ++i) pace.Take(t0);
  // Far later, the bucket is full again: a whole burst at once.
  const absl::Time later = t0 + absl::Hours(24 * 365);
  for (int i = 0; i < internal::NoticePace::kBurst; ++i) {
    EXPECT_EQ(pace.Take(later), absl::ZeroDuration()) << i;
  }
  // An earlier time is taken as the latest seen: the wait is no shorter.
  EXPECT_EQ(pace.Take(t0), absl::Milliseconds(100));
  EXPECT_EQ(pace.Take(absl::InfinitePast()), absl::Milliseconds(200));
}

}  // namespace
}  // namespace stream_test
}  // namespace tether
