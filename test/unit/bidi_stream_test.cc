// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Logic tests of ReconnectingBidiStream: the bidi fake, fake connections, a
// fake clock. Nothing here opens a socket or sleeps.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tether/reconnecting_bidi_stream.h"
#include "tether/testing/fake_bidi_transport.h"
#include "tether/testing/fake_clock.h"
#include "tether/testing/fake_transport.h"

namespace tether {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Req {
  std::string op;          // "open" or "w"
  std::uint64_t id = 0;    // the app's write id
  std::uint64_t from = 0;  // open: resume after
  bool operator==(const Req& o) const {
    return op == o.op && id == o.id && from == o.from;
  }
};
struct Resp {
  std::uint64_t seq = 0;  // 0: no position (an ack, a control message)
  std::uint64_t ack = 0;  // acknowledges write `ack`
};

Req Open(std::uint64_t from) { return Req{"open", 0, from}; }
Req W(std::uint64_t id) { return Req{"w", id, 0}; }
Resp S(std::uint64_t seq) { return Resp{seq, 0}; }
Resp Ack(std::uint64_t id) { return Resp{0, id}; }

std::ostream& operator<<(std::ostream& os, const Req& r) {
  return os << r.op << r.id
            << (r.op == "open" ? "@" + std::to_string(r.from) : "");
}

using Stream = ReconnectingBidiStream<Req, Resp>;
using Transport = fakes::FakeBidiTransport<Req, Resp>;

class BidiStreamTest : public ::testing::Test {
 protected:
  BidiStreamTest()
      : clock_(std::make_shared<fakes::FakeClock>()),
        source_(std::make_shared<fakes::FakeConnectionSource>()),
        transport_(std::make_shared<Transport>(source_, clock_)) {
    options_.clock = clock_;
    options_.random_seed = 3;
    options_.reopen_after_progress_jitter = absl::ZeroDuration();
  }

  void TearDown() override { clock_->RunDue(); }

  Stream::Spec Spec() {
    Stream::Spec spec;
    spec.attempt_factory = transport_;
    spec.open_requests = [](const ResumeState& s) {
      return std::vector<Req>{Open(s.has_position ? s.last : 0)};
    };
    spec.acknowledges = [](const Req& w, const Resp& r) {
      return r.ack == w.id;
    };
    spec.position_of = [](const Resp& r) {
      return r.seq == 0 ? Position::None() : Position::Item(r.seq);
    };
    return spec;
  }

  std::unique_ptr<Stream> StartStream(Stream::Spec spec) {
    auto s = Stream::Start(
        source_, std::move(spec), options_,
        [this](Resp&& r) {
          std::lock_guard<std::mutex> l(mu_);
          if (r.seq != 0) got_.push_back(r.seq);
        },
        [this](const absl::Status& s) {
          std::lock_guard<std::mutex> l(mu_);
          done_.push_back(s);
        });
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  std::vector<std::uint64_t> got() {
    std::lock_guard<std::mutex> l(mu_);
    return got_;
  }
  std::vector<absl::Status> done() {
    std::lock_guard<std::mutex> l(mu_);
    return done_;
  }

  std::shared_ptr<fakes::FakeClock> clock_;
  std::shared_ptr<fakes::FakeConnectionSource> source_;
  std::shared_ptr<Transport> transport_;
  ReconnectingStreamOptions options_;
  std::mutex mu_;
  std::vector<std::uint64_t> got_;
  std::vector<absl::Status> done_;
};

TEST_F(BidiStreamTest, ReopenWritesOpenThenReplaysUnacknowledgedWrites) {
  auto stream = StartStream(Spec());
  ASSERT_EQ(transport_->attempt_count(), 1u);
  EXPECT_FALSE(transport_->attempt(0)->request().has_position);
  ASSERT_TRUE(stream->Write(W(1)).ok());
  ASSERT_TRUE(stream->Write(W(2)).ok());
  ASSERT_TRUE(stream->Write(W(3)).ok());
  EXPECT_THAT(transport_->writes(0), ElementsAre(Open(0), W(1), W(2), W(3)));
  auto a = transport_->attempt(0);
  a->Send(Ack(1));
  a->Send(S(1));
  a->Send(S(2));
  EXPECT_EQ(stream->outbox_size(), 2u);
  a->Finish(absl::UnavailableError("server went away"));
  clock_->RunDue();
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_EQ(transport_->attempt(1)->request().last, 2u);
  // The open request resumes after 2, then 2 and 3 are replayed in order.
  EXPECT_THAT(transport_->writes(1), ElementsAre(Open(2), W(2), W(3)));
  ASSERT_TRUE(stream->Write(W(4)).ok());
  EXPECT_THAT(transport_->writes(1), ElementsAre(Open(2), W(2), W(3), W(4)));
  auto b = transport_->attempt(1);
  b->Send(Ack(2));
  b->Send(S(2));  // duplicate
  b->Send(S(3));
  b->Send(Ack(3));
  b->Send(Ack(4));
  EXPECT_EQ(stream->outbox_size(), 0u);
  EXPECT_THAT(got(), ElementsAre(1, 2, 3));
  EXPECT_EQ(stream->stats().duplicates_dropped, 1u);
  EXPECT_TRUE(done().empty());
}

TEST_F(BidiStreamTest, MigrationCarriesWritesOnTheNewAttempt) {
  auto stream = StartStream(Spec());
  auto old = transport_->attempt(0);
  ASSERT_TRUE(stream->Write(W(1)).ok());
  ASSERT_TRUE(stream->Write(W(2)).ok());
  old->Send(Ack(1));
  old->Send(S(1));
  source_->Drain(old->connection_id());
  ASSERT_EQ(transport_->attempt_count(), 2u);
  auto fresh = transport_->attempt(1);
  EXPECT_THAT(transport_->writes(1), ElementsAre(Open(1), W(2)));
  ASSERT_TRUE(stream->Write(W(3)).ok());
  // New writes go to the new attempt only.
  EXPECT_THAT(transport_->writes(0), ElementsAre(Open(0), W(1), W(2)));
  EXPECT_THAT(transport_->writes(1), ElementsAre(Open(1), W(2), W(3)));
  // The old attempt's acknowledgement counts for nothing (the new attempt
  // replayed the write and acknowledges it).
  old->Send(Ack(2));
  EXPECT_EQ(stream->outbox_size(), 2u);
  old->Send(S(2));
  fresh->Send(S(2));  // hand-off; duplicate
  EXPECT_TRUE(old->cancelled());
  fresh->Send(Ack(2));
  fresh->Send(Ack(3));
  fresh->Send(S(3));
  EXPECT_EQ(stream->outbox_size(), 0u);
  EXPECT_THAT(got(), ElementsAre(1, 2, 3));
  EXPECT_EQ(stream->stats().migrations, 1u);
}

TEST_F(BidiStreamTest, EachAttemptKnowsItsNumberReasonAndResumePosition) {
  auto stream = StartStream(Spec());
  auto first = transport_->attempt(0);
  first->Send(S(4));
  source_->Drain(first->connection_id());  // a migration
  ASSERT_EQ(transport_->attempt_count(), 2u);
  auto second = transport_->attempt(1);
  second->Send(S(5));
  second->Finish(absl::UnavailableError("gone"));  // a reopen
  clock_->RunDue();
  ASSERT_EQ(transport_->attempt_count(), 3u);
  const std::vector<AttemptInfo> infos = transport_->infos();
  ASSERT_EQ(infos.size(), 3u);
  EXPECT_EQ(infos[0].attempt, 1u);
  EXPECT_EQ(infos[0].reason, AttemptReason::kFirst);
  EXPECT_FALSE(infos[0].resumed);
  EXPECT_EQ(infos[1].attempt, 2u);
  EXPECT_EQ(infos[1].reason, AttemptReason::kMigration);
  EXPECT_TRUE(infos[1].resumed);
  EXPECT_EQ(infos[1].resume_after_seq, 4u);
  EXPECT_EQ(infos[2].attempt, 3u);
  EXPECT_EQ(infos[2].reason, AttemptReason::kReopen);
  EXPECT_EQ(infos[2].resume_after_seq, 5u);
  EXPECT_NE(infos[2].connection_id, 0u);
}

TEST_F(BidiStreamTest, FullOutboxRefusesThenCallsOnWritable) {
  options_.max_outbox = 2;
  auto stream = StartStream(Spec());
  int writable = 0;
  stream->SetOnWritable([&] { ++writable; });
  ASSERT_TRUE(stream->Write(W(1)).ok());
  ASSERT_TRUE(stream->Write(W(2)).ok());
  absl::Status full = stream->Write(W(3));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(full.message()), HasSubstr("max_outbox (2)"));
  EXPECT_EQ(writable, 0);
  EXPECT_THAT(transport_->writes(0), ElementsAre(Open(0), W(1), W(2)));
  transport_->attempt(0)->Send(Ack(1));
  EXPECT_EQ(writable, 1);
  ASSERT_TRUE(stream->Write(W(3)).ok());
  transport_->attempt(0)->Send(Ack(2));
  EXPECT_EQ(writable, 1);  // once per refusal
  EXPECT_THAT(transport_->writes(0), ElementsAre(Open(0), W(1), W(2), W(3)));
}

TEST_F(BidiStreamTest, WritesDoneHalfClosesEveryAttemptAfterItsReplays) {
  auto stream = StartStream(Spec());
  ASSERT_TRUE(stream->Write(W(1)).ok());
  stream->WritesDone();
  EXPECT_TRUE(transport_->half_closed(0));
  EXPECT_EQ(stream->Write(W(2)).code(), absl::StatusCode::kFailedPrecondition);
  transport_->attempt(0)->Send(S(1));
  transport_->attempt(0)->Finish(absl::UnavailableError("bye"));
  clock_->RunDue();
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_THAT(transport_->writes(1), ElementsAre(Open(1), W(1)));
  EXPECT_TRUE(transport_->half_closed(1));
}

TEST_F(BidiStreamTest, WithoutAcknowledgementsWrittenMeansDone) {
  Stream::Spec spec = Spec();
  spec.acknowledges = nullptr;
  auto stream = StartStream(std::move(spec));
  ASSERT_TRUE(stream->Write(W(1)).ok());
  EXPECT_EQ(stream->outbox_size(), 0u);
  transport_->attempt(0)->Finish(absl::UnavailableError("bye"));
  clock_->AdvanceToNextTimer();
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_THAT(transport_->writes(1), ElementsAre(Open(0)));
}

TEST_F(BidiStreamTest, WritesWaitWhileTheNetworkIsSlow) {
  transport_->set_auto_write(false);
  auto stream = StartStream(Spec());
  ASSERT_TRUE(stream->Write(W(1)).ok());
  EXPECT_TRUE(transport_->writes(0).empty());
  EXPECT_TRUE(transport_->WriteNext(0));
  EXPECT_TRUE(transport_->WriteNext(0));
  EXPECT_FALSE(transport_->WriteNext(0));
  EXPECT_THAT(transport_->writes(0), ElementsAre(Open(0), W(1)));
}

TEST_F(BidiStreamTest, BlockingReaderAndWritesAfterTheEnd) {
  auto s = Stream::Open(source_, Spec(), options_);
  ASSERT_TRUE(s.ok()) << s.status();
  auto stream = *std::move(s);
  transport_->attempt(0)->Send(S(1));
  Resp r;
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_EQ(r.seq, 1u);
  transport_->attempt(0)->Finish(absl::NotFoundError("gone"));
  EXPECT_FALSE(stream->Read(&r));
  EXPECT_EQ(stream->Finish().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(stream->Write(W(1)).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(BidiStreamTest, InitialPositionReachesTheFirstOpen) {
  Stream::Spec spec = Spec();
  spec.initial_position = 41;
  auto stream = StartStream(std::move(spec));
  EXPECT_THAT(transport_->writes(0), ElementsAre(Open(41)));
  transport_->attempt(0)->Send(S(41));  // duplicate
  transport_->attempt(0)->Send(S(42));
  EXPECT_THAT(got(), ElementsAre(42));
}

TEST_F(BidiStreamTest, InvalidSpecsAreRejected) {
  {
    Stream::Spec spec = Spec();
    spec.open_requests = nullptr;
    auto s = Stream::Open(source_, std::move(spec), options_);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr("open_requests"));
  }
  {
    Stream::Spec spec = Spec();
    spec.attempt_factory = nullptr;
    auto s = Stream::Open(source_, std::move(spec), options_);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr("start is empty"));
  }
  {
    Stream::Spec spec = Spec();
    spec.position_of = nullptr;
    spec.initial_position = 3;
    auto s = Stream::Open(source_, std::move(spec), options_);
    EXPECT_THAT(std::string(s.status().message()),
                HasSubstr("initial_position needs"));
  }
  {
    ReconnectingStreamOptions o = options_;
    o.max_outbox = 0;
    auto s = Stream::Open(source_, Spec(), o);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr("max_outbox"));
  }
}

TEST_F(BidiStreamTest, OpenRequestsThatThrowEndTheStream) {
  Stream::Spec spec = Spec();
  spec.open_requests = [](const ResumeState&) -> std::vector<Req> {
    throw std::runtime_error("bad state");
  };
  auto stream = StartStream(std::move(spec));
  clock_->RunDue();
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(done()[0].message()),
              HasSubstr("open_requests threw: bad state"));
  EXPECT_EQ(transport_->attempt_count(), 0u);
}

}  // namespace
}  // namespace tether
