// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Logic tests of ReconnectingBidiStream: the bidi fake, fake connections, a
// fake clock (the shared stream fixture). Nothing here opens a socket or
// sleeps.
#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/stream_fixture.h"

namespace tether {
namespace stream_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class BidiStreamTest : public StreamFixture {};

TEST_F(BidiStreamTest, ReopenWritesOpenThenReplaysUnacknowledgedWrites) {
  auto stream = StartBidi(BidiSpec());
  ASSERT_EQ(bidi_->attempt_count(), 1u);
  EXPECT_FALSE(bidi_->attempt(0)->request().has_position);
  ASSERT_TRUE(stream->Write(W(1)).ok());
  ASSERT_TRUE(stream->Write(W(2)).ok());
  ASSERT_TRUE(stream->Write(W(3)).ok());
  EXPECT_THAT(bidi_->writes(0), ElementsAre(Open(0), W(1), W(2), W(3)));
  auto a = bidi_->attempt(0);
  a->Send(Ack(1));
  a->Send(M(1));
  a->Send(M(2));
  EXPECT_EQ(stream->outbox_size(), 2u);
  a->Finish(absl::UnavailableError("server went away"));
  clock_->RunDue();
  ASSERT_EQ(bidi_->attempt_count(), 2u);
  EXPECT_EQ(bidi_->attempt(1)->request().last, 2u);
  // The open request resumes after 2, then 2 and 3 are replayed in order.
  EXPECT_THAT(bidi_->writes(1), ElementsAre(Open(2), W(2), W(3)));
  ASSERT_TRUE(stream->Write(W(4)).ok());
  EXPECT_THAT(bidi_->writes(1), ElementsAre(Open(2), W(2), W(3), W(4)));
  auto b = bidi_->attempt(1);
  b->Send(Ack(2));
  b->Send(M(2));  // duplicate
  b->Send(M(3));
  b->Send(Ack(3));
  b->Send(Ack(4));
  EXPECT_EQ(stream->outbox_size(), 0u);
  EXPECT_THAT(got(), ElementsAre(1, 2, 3));
  EXPECT_EQ(stream->stats().duplicates_dropped, 1u);
  EXPECT_TRUE(done().empty());
}

TEST_F(BidiStreamTest, MigrationCarriesWritesOnTheNewAttempt) {
  auto stream = StartBidi(BidiSpec());
  auto old = bidi_->attempt(0);
  ASSERT_TRUE(stream->Write(W(1)).ok());
  ASSERT_TRUE(stream->Write(W(2)).ok());
  old->Send(Ack(1));
  old->Send(M(1));
  source_->Drain(old->connection_id());
  ASSERT_EQ(bidi_->attempt_count(), 2u);
  auto fresh = bidi_->attempt(1);
  EXPECT_THAT(bidi_->writes(1), ElementsAre(Open(1), W(2)));
  ASSERT_TRUE(stream->Write(W(3)).ok());
  // New writes go to the new attempt only.
  EXPECT_THAT(bidi_->writes(0), ElementsAre(Open(0), W(1), W(2)));
  EXPECT_THAT(bidi_->writes(1), ElementsAre(Open(1), W(2), W(3)));
  // The old attempt's acknowledgement reaches the app: its write is done
  // (the new attempt replayed it: the server sees it twice).
  old->Send(Ack(2));
  EXPECT_EQ(stream->outbox_size(), 1u);
  old->Send(M(2));     // held: the new attempt resumes after 1
  fresh->Send(M(2));  // hand-off: the held copy is dropped
  EXPECT_TRUE(old->cancelled());
  fresh->Send(Ack(2));  // the replay's: dropped
  fresh->Send(Ack(3));
  fresh->Send(M(3));
  EXPECT_EQ(stream->outbox_size(), 0u);
  EXPECT_THAT(got(), ElementsAre(1, 2, 3));
  EXPECT_THAT(rec_->acks(), ElementsAre(1, 2, 3));
  EXPECT_EQ(stream->stats().duplicates_dropped, 1u);
  EXPECT_EQ(stream->stats().migrations, 1u);
}

// The old attempt acknowledges a write the new one replayed, and the new
// one fails before it delivers: the stream falls back and moves again. The
// acknowledgement reached the app, so the next attempt does not replay it.
TEST_F(BidiStreamTest, AWriteAcknowledgedOnTheOldAttemptIsNotReplayedAgain) {
  auto stream = StartBidi(BidiSpec());
  auto old = bidi_->attempt(0);
  old->Send(M(1));
  ASSERT_TRUE(stream->Write(W(7)).ok());
  source_->Drain(old->connection_id());
  ASSERT_EQ(bidi_->attempt_count(), 2u);
  auto fresh = bidi_->attempt(1);
  EXPECT_THAT(bidi_->writes(1), ElementsAre(Open(1), W(7)));
  old->Send(Resp{2, 7});  // position 2 acknowledges write 7
  fresh->Finish(absl::UnavailableError("gone before its first message"));
  clock_->AdvanceBy(absl::Seconds(10));
  EXPECT_THAT(got(), ElementsAre(1, 2));
  EXPECT_THAT(rec_->acks(), ElementsAre(7));
  EXPECT_EQ(stream->outbox_size(), 0u);
  ASSERT_EQ(bidi_->attempt_count(), 3u);
  EXPECT_THAT(bidi_->writes(2), ElementsAre(Open(2)));
  ASSERT_TRUE(stream->Write(W(8)).ok());  // the outbox takes writes on
  EXPECT_THAT(bidi_->writes(2), ElementsAre(Open(2), W(8)));
}

// An acknowledgement (with a position) that arrives on the attempt a move
// leaves while the replacement's start is in flight: the move holds it and
// drops it when the replacement delivers. It never reached the app, so its
// write stays: the replacement replays it and its acknowledgement reaches
// the app, once.
TEST_F(BidiStreamTest, AHeldAcknowledgementIsNotLostWhenTheMoveDropsIt) {
  ASSERT_TRUE(options_.migration_hold_fallback);  // the default
  std::shared_ptr<BidiTransport::FakeAttempt> old;
  int opens = 0;
  BidiStream::Spec spec = BidiSpec();
  spec.open_requests = [&](const ResumeState& s) {
    // The machine builds the replacement's open requests while its start is
    // in flight, after it took the resume position: a response the old
    // attempt sends now is past it.
    if (++opens == 2) old->Send(Resp{2, 7});
    return std::vector<BidiReq>{Open(s.has_position ? s.last : 0)};
  };
  auto stream = StartBidi(std::move(spec));
  old = bidi_->attempt(0);
  old->Send(M(1));
  ASSERT_TRUE(stream->Write(W(7)).ok());
  EXPECT_THAT(bidi_->writes(0), ElementsAre(Open(0), W(7)));
  source_->Drain(old->connection_id());
  ASSERT_EQ(opens, 2);
  ASSERT_EQ(bidi_->attempt_count(), 2u);
  EXPECT_THAT(got(), ElementsAre(1));    // held, not delivered
  EXPECT_EQ(stream->outbox_size(), 1u);  // so not acknowledged either
  auto fresh = bidi_->attempt(1);
  EXPECT_THAT(bidi_->writes(1), ElementsAre(Open(1), W(7)));  // replayed
  fresh->Send(Resp{2, 7});  // the server acknowledges the replay
  clock_->RunDue();
  EXPECT_TRUE(old->cancelled());
  EXPECT_THAT(got(), ElementsAre(1, 2));
  EXPECT_THAT(rec_->acks(), ElementsAre(7));
  EXPECT_EQ(stream->outbox_size(), 0u);
}

// Ids that are not dense, acknowledged out of order, without positions:
// during a move both attempts acknowledge a replayed write; the app sees
// each acknowledgement once.
TEST_F(BidiStreamTest, AcknowledgementsByKeyReachTheAppOnceAcrossAMove) {
  BidiStream::Spec spec = BidiSpec();
  spec.position_of = nullptr;
  auto stream = StartBidi(std::move(spec));
  for (std::uint64_t id : {917u, 23u, 4051u}) {
    ASSERT_TRUE(stream->Write(W(id)).ok());
  }
  auto old = bidi_->attempt(0);
  old->Send(Ack(23));  // out of order
  EXPECT_EQ(stream->outbox_size(), 2u);
  source_->Drain(old->connection_id());
  ASSERT_EQ(bidi_->attempt_count(), 2u);
  auto fresh = bidi_->attempt(1);
  EXPECT_THAT(bidi_->writes(1), ElementsAre(Open(0), W(917), W(4051)));
  old->Send(Ack(917));    // the old attempt's, in flight
  fresh->Send(Ack(917));  // and the replay's: dropped
  fresh->Send(Ack(4051));
  old->Send(Ack(4051));  // after the hand-off: the old attempt is cancelled
  clock_->RunDue();
  EXPECT_THAT(rec_->acks(), ElementsAre(23, 917, 4051));
  EXPECT_EQ(stream->outbox_size(), 0u);
  EXPECT_EQ(stream->stats().duplicates_dropped, 1u);
}

// The same race on two threads: the old attempt and the replacement
// acknowledge the same writes at once. Each reaches the app once.
TEST_F(BidiStreamTest, AcknowledgementsRacingOnTwoAttemptsReachTheAppOnce) {
  constexpr std::uint64_t kWrites = 40;
  options_.max_outbox = kWrites;
  BidiStream::Spec spec = BidiSpec();
  spec.position_of = nullptr;
  auto stream = StartBidi(std::move(spec));
  for (std::uint64_t id = 1; id <= kWrites; ++id) {
    ASSERT_TRUE(stream->Write(W(id)).ok());
  }
  auto old = bidi_->attempt(0);
  source_->Drain(old->connection_id());
  ASSERT_EQ(bidi_->attempt_count(), 2u);
  auto fresh = bidi_->attempt(1);
  ASSERT_EQ(bidi_->writes(1).size(), kWrites + 1);  // all replayed
  std::atomic<int> ready{0};
  auto ack_all = [&ready](std::shared_ptr<BidiTransport::FakeAttempt> a) {
    ++ready;
    while (ready.load() < 2) std::this_thread::yield();  // start together
    for (std::uint64_t id = 1; id <= kWrites; ++id) a->Send(Ack(id));
  };
  std::thread t1(ack_all, old);
  std::thread t2(ack_all, fresh);
  t1.join();
  t2.join();
  clock_->RunDue();
  std::vector<std::uint64_t> want;
  for (std::uint64_t id = 1; id <= kWrites; ++id) want.push_back(id);
  EXPECT_THAT(rec_->acks(), ::testing::UnorderedElementsAreArray(want));
  EXPECT_EQ(stream->outbox_size(), 0u);
}

TEST_F(BidiStreamTest, AcknowledgesThatThrowsEndsTheStream) {
  BidiStream::Spec spec = BidiSpec();
  spec.acknowledges = [](const BidiReq&, const Resp& r) -> bool {
    if (r.ack == 666) throw std::runtime_error("unreadable");
    return false;
  };
  auto stream = StartBidi(std::move(spec));
  ASSERT_TRUE(stream->Write(W(1)).ok());
  bidi_->attempt(0)->Send(Ack(666));
  clock_->RunDue();
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(done()[0].message()),
              HasSubstr("acknowledges threw: unreadable"));
  EXPECT_EQ(rec_->messages(), 0u);
}

TEST_F(BidiStreamTest, FullOutboxRefusesThenCallsOnWritable) {
  options_.max_outbox = 2;
  auto stream = StartBidi(BidiSpec());
  int writable = 0;
  stream->SetOnWritable([&] { ++writable; });
  ASSERT_TRUE(stream->Write(W(1)).ok());
  ASSERT_TRUE(stream->Write(W(2)).ok());
  absl::Status full = stream->Write(W(3));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(full.message()), HasSubstr("max_outbox (2)"));
  EXPECT_EQ(writable, 0);
  EXPECT_THAT(bidi_->writes(0), ElementsAre(Open(0), W(1), W(2)));
  bidi_->attempt(0)->Send(Ack(1));
  EXPECT_EQ(writable, 1);
  ASSERT_TRUE(stream->Write(W(3)).ok());
  bidi_->attempt(0)->Send(Ack(2));
  EXPECT_EQ(writable, 1);  // once per refusal
  EXPECT_THAT(bidi_->writes(0), ElementsAre(Open(0), W(1), W(2), W(3)));
}

TEST_F(BidiStreamTest, WritesDoneHalfClosesEveryAttemptAfterItsReplays) {
  auto stream = StartBidi(BidiSpec());
  ASSERT_TRUE(stream->Write(W(1)).ok());
  stream->WritesDone();
  EXPECT_TRUE(bidi_->half_closed(0));
  EXPECT_EQ(stream->Write(W(2)).code(), absl::StatusCode::kFailedPrecondition);
  bidi_->attempt(0)->Send(M(1));
  bidi_->attempt(0)->Finish(absl::UnavailableError("bye"));
  clock_->RunDue();
  ASSERT_EQ(bidi_->attempt_count(), 2u);
  EXPECT_THAT(bidi_->writes(1), ElementsAre(Open(1), W(1)));
  EXPECT_TRUE(bidi_->half_closed(1));
}

TEST_F(BidiStreamTest, WithoutAcknowledgementsWrittenMeansDone) {
  BidiStream::Spec spec = BidiSpec();
  spec.acknowledges = nullptr;
  auto stream = StartBidi(std::move(spec));
  ASSERT_TRUE(stream->Write(W(1)).ok());
  EXPECT_EQ(stream->outbox_size(), 0u);
  bidi_->attempt(0)->Finish(absl::UnavailableError("bye"));
  clock_->AdvanceToNextTimer();
  ASSERT_EQ(bidi_->attempt_count(), 2u);
  EXPECT_THAT(bidi_->writes(1), ElementsAre(Open(0)));
}

TEST_F(BidiStreamTest, WritesWaitWhileTheNetworkIsSlow) {
  bidi_->set_auto_write(false);
  auto stream = StartBidi(BidiSpec());
  ASSERT_TRUE(stream->Write(W(1)).ok());
  EXPECT_TRUE(bidi_->writes(0).empty());
  EXPECT_TRUE(bidi_->WriteNext(0));
  EXPECT_TRUE(bidi_->WriteNext(0));
  EXPECT_FALSE(bidi_->WriteNext(0));
  EXPECT_THAT(bidi_->writes(0), ElementsAre(Open(0), W(1)));
}

TEST_F(BidiStreamTest, BlockingReaderAndWritesAfterTheEnd) {
  auto s = BidiStream::Open(source_, BidiSpec(), options_);
  ASSERT_TRUE(s.ok()) << s.status();
  auto stream = *std::move(s);
  bidi_->attempt(0)->Send(M(1));
  Resp r;
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_EQ(r.seq, 1u);
  bidi_->attempt(0)->Finish(absl::NotFoundError("gone"));
  EXPECT_FALSE(stream->Read(&r));
  EXPECT_EQ(stream->Finish().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(stream->Write(W(1)).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(BidiStreamTest, InitialPositionReachesTheFirstOpen) {
  BidiStream::Spec spec = BidiSpec();
  spec.initial_position = 41;
  auto stream = StartBidi(std::move(spec));
  EXPECT_THAT(bidi_->writes(0), ElementsAre(Open(41)));
  bidi_->attempt(0)->Send(M(41));  // duplicate
  bidi_->attempt(0)->Send(M(42));
  EXPECT_THAT(got(), ElementsAre(42));
}

TEST_F(BidiStreamTest, InvalidSpecsAreRejected) {
  {
    BidiStream::Spec spec = BidiSpec();
    spec.open_requests = nullptr;
    auto s = BidiStream::Open(source_, std::move(spec), options_);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr("open_requests"));
  }
  {
    BidiStream::Spec spec = BidiSpec();
    spec.attempt_factory = nullptr;
    auto s = BidiStream::Open(source_, std::move(spec), options_);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr("start is empty"));
  }
  {
    BidiStream::Spec spec = BidiSpec();
    spec.position_of = nullptr;
    spec.initial_position = 3;
    auto s = BidiStream::Open(source_, std::move(spec), options_);
    EXPECT_THAT(std::string(s.status().message()),
                HasSubstr("initial_position needs"));
  }
  {
    ReconnectingStreamOptions o = options_;
    o.max_outbox = 0;
    auto s = BidiStream::Open(source_, BidiSpec(), o);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr("max_outbox"));
  }
}

TEST_F(BidiStreamTest, OpenRequestsThatThrowEndTheStream) {
  BidiStream::Spec spec = BidiSpec();
  spec.open_requests = [](const ResumeState&) -> std::vector<BidiReq> {
    throw std::runtime_error("bad state");
  };
  auto stream = StartBidi(std::move(spec));
  clock_->RunDue();
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(done()[0].message()),
              HasSubstr("open_requests threw: bad state"));
  EXPECT_EQ(bidi_->attempt_count(), 0u);
}

}  // namespace
}  // namespace stream_test
}  // namespace tether
