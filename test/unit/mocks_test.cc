// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Tests of the test doubles shipped in tether::tether_mocks: the matchers,
// the mocks, and the scripted fake transport (including that it rejects
// sequences gRPC never produces).
#include "tether/testing/mocks.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "tether/circuit_breaker.h"
#include "tether/reconnecting_stream.h"
#include "tether/testing/fake_clock.h"
#include "tether/testing/fake_transport.h"
#include "tether/testing/matchers.h"

namespace tether {
namespace mocks_test {
namespace {

using ::testing::_;
using ::testing::AllOf;
using ::testing::ByMove;
using ::testing::DescribeMatcher;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::InSequence;
using ::testing::Matcher;
using ::testing::NiceMock;
using ::testing::Not;
using ::testing::Return;
using ::testing::StrictMock;
using ::tether::fakes::AttemptReasonIs;
using ::tether::fakes::IsOk;
using ::tether::fakes::NotResumed;
using ::tether::fakes::NotResumedRequest;
using ::tether::fakes::OnConnection;
using ::tether::fakes::RequestResumedAfter;
using ::tether::fakes::ResumedAfter;
using ::tether::fakes::StatusIs;

// Why a value did not match, as gMock would print it.
template <class T, class M>
std::string Explain(const M& matcher, const T& value) {
  ::testing::StringMatchResultListener listener;
  ::testing::ExplainMatchResult(matcher, value, &listener);
  return listener.str();
}

// --- Matchers ---------------------------------------------------------------

TEST(StatusIsTest, MatchesCodeOfStatusAndStatusOr) {
  EXPECT_THAT(absl::NotFoundError("x"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(absl::NotFoundError("x"),
              Not(StatusIs(absl::StatusCode::kUnavailable)));
  absl::StatusOr<int> failed = absl::UnavailableError("down");
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kUnavailable));
  absl::StatusOr<int> value = 3;
  EXPECT_THAT(value, IsOk());
  EXPECT_THAT(value, Not(StatusIs(absl::StatusCode::kUnavailable)));
  EXPECT_THAT(absl::OkStatus(), IsOk());
  EXPECT_THAT(absl::InternalError("x"), Not(IsOk()));
}

TEST(StatusIsTest, MatchesMessageWithAMatcherOrAString) {
  absl::Status s = absl::UnavailableError("breaker 'quotes' is open");
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("open")));
  EXPECT_THAT(
      s, StatusIs(absl::StatusCode::kUnavailable, "breaker 'quotes' is open"));
  EXPECT_THAT(
      s, Not(StatusIs(absl::StatusCode::kUnavailable, HasSubstr("closed"))));
  EXPECT_THAT(s, Not(StatusIs(absl::StatusCode::kNotFound, HasSubstr("open"))));
  EXPECT_THAT(s, Not(StatusIs(absl::StatusCode::kUnavailable, "open")));
}

TEST(StatusIsTest, DescribesAndExplains) {
  Matcher<absl::Status> m =
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("key"));
  EXPECT_EQ(DescribeMatcher<absl::Status>(m),
            "has status code NOT_FOUND and a message that has substring "
            "\"key\"");
  EXPECT_THAT(DescribeMatcher<absl::Status>(m, /*negation=*/true),
              HasSubstr("does not have status code NOT_FOUND"));
  EXPECT_EQ(Explain<absl::Status>(m, absl::UnavailableError("down")),
            "whose status is UNAVAILABLE: down");
  EXPECT_THAT(Explain<absl::Status>(m, absl::NotFoundError("no such row")),
              HasSubstr("whose message does not match"));
  absl::StatusOr<std::string> v = std::string("x");
  EXPECT_THAT(Explain<absl::StatusOr<std::string>>(
                  StatusIs(absl::StatusCode::kNotFound), v),
              HasSubstr("whose status is OK"));
}

AttemptInfo Info(std::uint64_t attempt, AttemptReason reason, bool resumed,
                 std::uint64_t after, std::uint64_t connection = 1) {
  AttemptInfo info;
  info.attempt = attempt;
  info.reason = reason;
  info.resumed = resumed;
  info.resume_after_seq = after;
  info.connection_id = connection;
  return info;
}

TEST(AttemptMatchersTest, ResumedAfterNeedsResumedAndTheSeq) {
  EXPECT_THAT(Info(2, AttemptReason::kReopen, true, 5), ResumedAfter(5));
  EXPECT_THAT(Info(2, AttemptReason::kReopen, true, 5), Not(ResumedAfter(4)));
  // resume_after_seq is meaningless when not resumed.
  EXPECT_THAT(Info(1, AttemptReason::kFirst, false, 5), Not(ResumedAfter(5)));
  EXPECT_THAT(Info(1, AttemptReason::kFirst, false, 0), NotResumed());
  EXPECT_THAT(Info(2, AttemptReason::kReopen, true, 0), Not(NotResumed()));

  EXPECT_EQ(DescribeMatcher<AttemptInfo>(ResumedAfter(5)),
            "is an attempt resumed after seq 5");
  EXPECT_EQ(DescribeMatcher<AttemptInfo>(NotResumed()),
            "is an attempt that does not resume");
  EXPECT_EQ(Explain<AttemptInfo>(ResumedAfter(5),
                                 Info(3, AttemptReason::kReopen, true, 4)),
            "attempt 3 resumed after seq 4");
  EXPECT_EQ(Explain<AttemptInfo>(ResumedAfter(5),
                                 Info(1, AttemptReason::kFirst, false, 0)),
            "attempt 1 does not resume");
}

TEST(AttemptMatchersTest, ReasonAndConnection) {
  AttemptInfo info = Info(2, AttemptReason::kMigration, true, 7, 3);
  EXPECT_THAT(info, AttemptReasonIs(AttemptReason::kMigration));
  EXPECT_THAT(info, Not(AttemptReasonIs(AttemptReason::kReopen)));
  EXPECT_THAT(info, OnConnection(3));
  EXPECT_THAT(info, Not(OnConnection(1)));
  EXPECT_THAT(info, AllOf(AttemptReasonIs(AttemptReason::kMigration),
                          ResumedAfter(7), OnConnection(3)));
  const std::string described =
      DescribeMatcher<AttemptInfo>(AttemptReasonIs(AttemptReason::kReopen));
  EXPECT_THAT(described, HasSubstr("started for reason"));
  EXPECT_THAT(
      described,
      HasSubstr(std::string(AttemptReasonName(AttemptReason::kReopen))));
  EXPECT_THAT(
      Explain<AttemptInfo>(AttemptReasonIs(AttemptReason::kReopen), info),
      HasSubstr(std::string(AttemptReasonName(AttemptReason::kMigration))));
}

struct Req {
  std::string key;
  std::uint64_t after = 0;
  std::uint64_t after_seq() const { return after; }
};
struct Resp {
  std::uint64_t seq = 0;
};
Resp M(std::uint64_t seq) { return Resp{seq}; }

TEST(RequestMatchersTest, ReadsTheResumeFieldThroughAnyGetter) {
  Req first{"k", 0};
  Req resumed{"k", 42};
  EXPECT_THAT(resumed, RequestResumedAfter(&Req::after, 42));
  EXPECT_THAT(resumed, RequestResumedAfter(&Req::after_seq, 42));
  EXPECT_THAT(resumed,
              RequestResumedAfter([](const Req& r) { return r.after; }, 42));
  EXPECT_THAT(resumed, Not(RequestResumedAfter(&Req::after, 41)));
  EXPECT_THAT(first, NotResumedRequest(&Req::after));
  EXPECT_THAT(std::vector<Req>({first, resumed}),
              ElementsAre(NotResumedRequest(&Req::after),
                          RequestResumedAfter(&Req::after, 42)));
  EXPECT_EQ(DescribeMatcher<Req>(RequestResumedAfter(&Req::after, 42)),
            "is a request resuming after seq 42");
  EXPECT_EQ(Explain<Req>(RequestResumedAfter(&Req::after, 42), first),
            "whose resume position is 0");
}

// --- A stream on the fakes
// ----------------------------------------------------

using Stream = ReconnectingStream<Req, Resp>;
using Transport = fakes::FakeTransport<Req, Resp>;
using Script = Transport::Script;

class FakeStreamTest : public ::testing::Test {
 protected:
  FakeStreamTest()
      : clock_(std::make_shared<fakes::FakeClock>()),
        source_(std::make_shared<fakes::FakeConnectionSource>()),
        transport_(std::make_shared<Transport>(source_, clock_)) {
    options_.clock = clock_;
    options_.random_seed = 1;
    options_.reopen_after_progress_jitter = absl::ZeroDuration();
  }
  // Cancels complete asynchronously (as gRPC's TryCancel): let those of
  // streams destroyed in the test body complete, so that their attempts
  // drop the streams (and the mocks the streams hold).
  void TearDown() override { clock_->RunDue(); }

  Stream::Spec Spec() {
    Stream::Spec spec;
    spec.request = Req{"k", 0};
    spec.attempt_factory = transport_;
    spec.sequence_of = [](const Resp& r) -> absl::optional<std::uint64_t> {
      return r.seq;
    };
    spec.resume_after = [](Req& r, std::uint64_t seq) { r.after = seq; };
    return spec;
  }

  std::unique_ptr<Stream> StartStream() {
    auto s = Stream::Start(
        source_, Spec(), options_,
        [this](Resp&& r) {
          std::lock_guard<std::mutex> l(mu_);
          got_.push_back(r.seq);
        },
        [this](const absl::Status& s) {
          std::lock_guard<std::mutex> l(mu_);
          done_.push_back(s);
        });
    EXPECT_THAT(s, IsOk());
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

TEST_F(FakeStreamTest, MockObserverSeesEveryEventInOrder) {
  auto observer = std::make_shared<StrictMock<fakes::MockStreamObserver>>();
  {
    InSequence in_order;
    // Attempt 1: two messages, then the server goes away.
    EXPECT_CALL(*observer,
                OnAttemptStarted(AllOf(AttemptReasonIs(AttemptReason::kFirst),
                                       NotResumed(), OnConnection(1))));
    EXPECT_CALL(*observer, OnFirstMessage(NotResumed(), absl::ZeroDuration()));
    EXPECT_CALL(
        *observer,
        OnAttemptEnded(NotResumed(), StatusIs(absl::StatusCode::kUnavailable),
                       EndClass::kDrain, false));
    // Progress was made: the reopen waits no backoff.
    EXPECT_CALL(*observer, OnBackoff(absl::ZeroDuration(),
                                     StatusIs(absl::StatusCode::kUnavailable)));
    // Attempt 2 resumes after seq 2; the server repeats 2 and then fails
    // for good.
    EXPECT_CALL(*observer,
                OnAttemptStarted(AllOf(AttemptReasonIs(AttemptReason::kReopen),
                                       ResumedAfter(2))));
    EXPECT_CALL(*observer, OnFirstMessage(ResumedAfter(2), _));
    EXPECT_CALL(*observer, OnDuplicateDropped(2, 2));
    EXPECT_CALL(*observer,
                OnAttemptEnded(ResumedAfter(2),
                               StatusIs(absl::StatusCode::kNotFound, "gone"),
                               EndClass::kPermanent, false));
  }
  options_.observer = observer;
  auto stream = StartStream();
  auto first = transport_->attempt(0);
  ASSERT_NE(first, nullptr);
  first->Send(M(1));
  first->Send(M(2));
  first->Finish(absl::UnavailableError("server is shutting down"));
  clock_->RunDue();
  auto second = transport_->attempt(1);
  ASSERT_NE(second, nullptr);
  second->Send(M(2));
  second->Send(M(3));
  second->Finish(absl::NotFoundError("gone"));
  EXPECT_THAT(got(), ElementsAre(1, 2, 3));
  ASSERT_EQ(done().size(), 1u);
  EXPECT_THAT(done()[0], StatusIs(absl::StatusCode::kNotFound, "gone"));
  EXPECT_THAT(transport_->requests(),
              ElementsAre(NotResumedRequest(&Req::after),
                          RequestResumedAfter(&Req::after, 2)));
}

TEST_F(FakeStreamTest, MockBackoffDecidesWhenTheNextAttemptStarts) {
  auto backoff = std::make_shared<StrictMock<fakes::MockBackoffPolicy>>();
  {
    InSequence in_order;
    EXPECT_CALL(*backoff, OnFailure(_)).WillOnce(Return(absl::Seconds(3)));
    EXPECT_CALL(*backoff, OnFailure(_)).WillOnce(Return(absl::Seconds(7)));
    EXPECT_CALL(*backoff, Reset());  // attempt 3 delivers
  }
  options_.backoff = fakes::MockBackoffPolicy::Prototype(backoff);
  transport_->Expect(Script().ConnectFails());
  transport_->Expect(Script().ConnectFails());
  transport_->Expect(Script().Message(M(1)));
  const absl::Time t0 = clock_->Now();
  auto stream = StartStream();
  while (transport_->attempt_count() < 3 && clock_->AdvanceToNextTimer()) {
  }
  ASSERT_EQ(transport_->attempt_count(), 3u);
  EXPECT_THAT(transport_->start_times(),
              ElementsAre(t0, t0 + absl::Seconds(3), t0 + absl::Seconds(10)));
  EXPECT_EQ(transport_->attempt(0)->ended_at(), t0);
  EXPECT_THAT(transport_->attempt(0)->end_status(),
              ::testing::Optional(StatusIs(absl::StatusCode::kUnavailable,
                                           HasSubstr("failed to connect"))));
  EXPECT_THAT(got(), ElementsAre(1));
  EXPECT_EQ(transport_->pending_scripts(), 0u);
}

TEST_F(FakeStreamTest, MockedCloneHandsTheStreamItsOwnMock) {
  auto prototype = std::make_shared<StrictMock<fakes::MockBackoffPolicy>>();
  auto clone = std::make_unique<StrictMock<fakes::MockBackoffPolicy>>();
  fakes::MockBackoffPolicy* clone_ptr = clone.get();  // the stream owns it
  EXPECT_CALL(*prototype, Clone()).WillOnce(Return(ByMove(std::move(clone))));
  EXPECT_CALL(*clone_ptr, OnFailure(_)).WillOnce(Return(absl::Seconds(1)));
  options_.backoff = prototype;
  transport_->Expect(Script().Finish(absl::InternalError("flaky")));
  auto stream = StartStream();
  clock_->AdvanceBy(absl::Milliseconds(999));
  EXPECT_EQ(transport_->attempt_count(), 1u);
  clock_->AdvanceBy(absl::Milliseconds(1));
  EXPECT_EQ(transport_->attempt_count(), 2u);
  stream.reset();
}

TEST_F(FakeStreamTest, ScriptedGoawayMovesTheStreamToAnotherConnection) {
  auto observer = std::make_shared<NiceMock<fakes::MockStreamObserver>>();
  EXPECT_CALL(*observer, OnConnectionDraining(1, Eq("GOAWAY")));
  // Any attempt may start; the migration must.
  EXPECT_CALL(*observer, OnAttemptStarted(_)).Times(::testing::AnyNumber());
  EXPECT_CALL(*observer,
              OnAttemptStarted(AllOf(AttemptReasonIs(AttemptReason::kMigration),
                                     ResumedAfter(2), OnConnection(2))));
  options_.observer = observer;
  transport_->Expect(Script().Messages({M(1), M(2)}).GoawayAfter(2));
  transport_->Expect(Script().Messages({M(3)}));
  auto stream = StartStream();
  EXPECT_THAT(transport_->connection_ids(), ElementsAre(1, 2));
  EXPECT_TRUE(source_->draining(1));
  EXPECT_EQ(source_->current(), 2u);
  EXPECT_TRUE(transport_->attempt(0)->cancelled());  // handed off
  EXPECT_THAT(got(), ElementsAre(1, 2, 3));
}

TEST_F(FakeStreamTest, ScriptedHealthNotServingDrainsWithItsReason) {
  auto observer = std::make_shared<NiceMock<fakes::MockStreamObserver>>();
  EXPECT_CALL(*observer, OnConnectionDraining(1, Eq("health NOT_SERVING")));
  options_.observer = observer;
  transport_->Expect(Script().Message(M(1)).NotServingAfter(1));
  auto stream = StartStream();
  EXPECT_THAT(transport_->connection_ids(), ElementsAre(1, 2));
}

TEST(ScriptTest, BuilderFillsThePlainFields) {
  Script s = Script()
                 .Message(M(1))
                 .Messages({M(2), M(3)})
                 .GoawayAfter(1)
                 .Finish(absl::AbortedError("x"));
  ASSERT_EQ(s.messages.size(), 3u);
  EXPECT_EQ(s.messages[2].seq, 3u);
  EXPECT_EQ(s.drain_after, 1u);
  EXPECT_EQ(s.drain_why, "GOAWAY");
  EXPECT_THAT(*s.finish, StatusIs(absl::StatusCode::kAborted));
  Script named;
  named.ConnectFails();
  EXPECT_TRUE(named.messages.empty());
  EXPECT_THAT(*named.finish, StatusIs(absl::StatusCode::kUnavailable,
                                      HasSubstr("failed to connect")));
  // The aggregate form still works.
  Script plain{{M(1)}, {}, absl::OkStatus()};
  EXPECT_EQ(plain.drain_why, "GOAWAY");
}

// --- Sequences gRPC never produces ------------------------------------------

TEST_F(FakeStreamTest, MessageAfterFinalStatusFailsTheTest) {
  auto stream = StartStream();
  auto a = transport_->attempt(0);
  a->Finish(absl::NotFoundError("gone"));
  EXPECT_NONFATAL_FAILURE(a->Send(M(1)), "Send() after the final status");
  EXPECT_NONFATAL_FAILURE(a->Send(M(1)), "NOT_FOUND: gone");
  EXPECT_TRUE(got().empty());
}

TEST_F(FakeStreamTest, SecondFinalStatusFailsTheTest) {
  auto stream = StartStream();
  auto a = transport_->attempt(0);
  a->Finish(absl::NotFoundError("gone"));
  EXPECT_NONFATAL_FAILURE(a->Finish(absl::OkStatus()),
                          "a second final status (OK)");
  ASSERT_EQ(done().size(), 1u);
  EXPECT_THAT(done()[0], StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(FakeStreamTest, MessagePausedByFlowControlStillCountsBeforeStatus) {
  // A status queued behind unread messages is not final yet for the stream,
  // but it is for the server: a later message is still rejected.
  options_.max_buffered_messages = 1;
  auto stream = *Stream::Open(source_, Spec(), options_);
  auto a = transport_->attempt(0);
  a->Send(M(1));
  a->Send(M(2));
  a->Finish(absl::NotFoundError("gone"));
  EXPECT_FALSE(a->done());
  EXPECT_NONFATAL_FAILURE(a->Send(M(3)), "after the final status");
}

TEST_F(FakeStreamTest, ServerStatusAfterClientCancelIsAccepted) {
  // The server's status racing the client's cancel is normal in gRPC.
  auto stream = StartStream();
  auto a = transport_->attempt(0);
  stream->Cancel();
  ASSERT_TRUE(a->cancelled());
  a->Send(M(1));
  a->Finish(absl::OkStatus());
  EXPECT_FALSE(a->done());  // the cancel completes later, as in gRPC
  clock_->RunDue();
  EXPECT_THAT(a->end_status(),
              ::testing::Optional(StatusIs(absl::StatusCode::kCancelled)));
  EXPECT_TRUE(got().empty());
}

TEST(FakeTransportTest, GoawayWithoutASourceFailsTheTest) {
  auto transport = std::make_shared<Transport>();
  transport->Expect(Script().Message(M(1)).GoawayAfter(1));
  auto source = std::make_shared<fakes::FakeConnectionSource>();
  Stream::Spec spec;
  spec.attempt_factory = transport;
  ReconnectingStreamOptions options;
  options.clock = std::make_shared<fakes::FakeClock>();
  std::unique_ptr<Stream> stream;
  EXPECT_NONFATAL_FAILURE(
      stream = *Stream::Start(
          source, spec, options, [](Resp&&) {}, [](const absl::Status&) {}),
      "has no FakeConnectionSource");
  stream.reset();
  transport->CompletePendingCancels();  // the transport has no clock
}

// --- Breaker and pool observers ----------------------------------------------

TEST(MockBreakerObserverTest, SeesTheBreakerOpenAndReject) {
  auto observer = std::make_shared<NiceMock<fakes::MockBreakerObserver>>();
  CircuitBreakerOptions o;
  o.name = "quotes";
  o.window_size = 2;
  o.minimum_calls = 2;
  o.break_jitter = 0;
  o.observer = observer;
  EXPECT_CALL(*observer, OnRecorded(Eq("quotes"), Outcome::kFailure, _))
      .Times(2);
  EXPECT_CALL(
      *observer,
      OnStateChange(Eq("quotes"), BreakerState::kClosed, BreakerState::kOpen,
                    ::testing::Field(&BreakerCounts::failed, 2u)));
  EXPECT_CALL(*observer, OnNotPermitted(Eq("quotes"), _));
  auto clock = std::make_shared<fakes::FakeClock>();
  auto breaker = CircuitBreaker::Create(o, clock, 1);
  ASSERT_THAT(breaker, IsOk());
  for (int i = 0; i < 2; ++i) {
    auto permit = (*breaker)->TryAcquire();
    ASSERT_THAT(permit, IsOk());
    (*breaker)->Record(*std::move(permit), Outcome::kFailure,
                       absl::UnavailableError("refused"));
  }
  EXPECT_THAT((*breaker)->TryAcquire(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("quotes")));
}

TEST(MockConnectionObserverTest, IsAConnectionObserver) {
  auto mock = std::make_shared<StrictMock<fakes::MockConnectionObserver>>();
  EXPECT_CALL(*mock,
              OnConnectionSuspect(4, StatusIs(absl::StatusCode::kUnavailable)));
  std::shared_ptr<ConnectionObserver> observer = mock;
  observer->OnConnectionSuspect(4, absl::UnavailableError("early end"));
}

}  // namespace
}  // namespace mocks_test
}  // namespace tether
