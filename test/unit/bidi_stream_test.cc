// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Logic tests of ReconnectingBidiStream: the bidi fake, fake connections, a
// fake clock (the shared stream fixture). Nothing here opens a socket or
// sleeps.
#include <memory>
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
  // The old attempt's acknowledgement counts for nothing (the new attempt
  // replayed the write and acknowledges it).
  old->Send(Ack(2));
  EXPECT_EQ(stream->outbox_size(), 2u);
  old->Send(M(2));
  fresh->Send(M(2));  // hand-off; duplicate
  EXPECT_TRUE(old->cancelled());
  fresh->Send(Ack(2));
  fresh->Send(Ack(3));
  fresh->Send(M(3));
  EXPECT_EQ(stream->outbox_size(), 0u);
  EXPECT_THAT(got(), ElementsAre(1, 2, 3));
  EXPECT_EQ(stream->stats().migrations, 1u);
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
