// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Server pushback (gRFC A6, `grpc-retry-pushback-ms` in the trailers), once
// for each kind of stream: the trailers of a server stream's and of a bidi
// stream's attempt reach the same end decision. Fake attempts, fake
// connections, a fake clock; nothing here opens a socket or sleeps.
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/stream_fixture.h"
#include "tether/backoff.h"

namespace tether {
namespace stream_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A backoff of 100 ms without jitter: a pushback's delay stands out.
template <class Kind>
class PushbackTest : public EachKind<Kind> {
 protected:
  PushbackTest() {
    ExponentialBackoffOptions b;
    b.initial_delay = absl::Milliseconds(100);
    b.jitter = Jitter::kNone;
    this->options_.backoff = std::shared_ptr<const BackoffPolicy>(
        ExponentialBackoff::Create(b).value());
  }

  // After `wait`, the stream has ended with `code` and made no attempt
  // after its first. Returns the end (OK when there is none).
  absl::Status EndsWithoutRetry(absl::Duration wait, absl::StatusCode code) {
    this->clock_->AdvanceBy(wait);
    EXPECT_EQ(this->fake()->attempt_count(), 1u);
    const std::vector<absl::Status> done = this->done();
    EXPECT_EQ(done.size(), 1u);
    if (done.empty()) return absl::OkStatus();
    EXPECT_EQ(done[0].code(), code) << done[0];
    return done[0];
  }
};
TYPED_TEST_SUITE(PushbackTest, StreamKinds, StreamKindNames);

TYPED_TEST(PushbackTest, PushbackReplacesTheBackoffDelay) {
  using Script = typename TestFixture::Script;
  auto fake = this->fake();
  fake->Expect(Script().Finish(absl::ResourceExhaustedError("slow down"),
                               {{"grpc-retry-pushback-ms", "750"}}));
  fake->Expect(Script().Message(M(1)));
  auto stream = this->StartDefault();
  this->clock_->RunDue();
  ASSERT_EQ(fake->attempt_count(), 1u);
  EXPECT_THAT(this->events_->backoffs(), ElementsAre(absl::Milliseconds(750)));
  this->clock_->AdvanceBy(absl::Milliseconds(749));
  EXPECT_EQ(fake->attempt_count(), 1u);  // not at the backoff's 100 ms
  this->clock_->AdvanceBy(absl::Milliseconds(1));
  ASSERT_EQ(fake->attempt_count(), 2u);
  EXPECT_EQ(fake->attempt(1)->started_at() - fake->attempt(0)->ended_at(),
            absl::Milliseconds(750));
  EXPECT_THAT(this->got(), ElementsAre(1));
}

TYPED_TEST(PushbackTest, ZeroPushbackRetriesAtOnce) {
  using Script = typename TestFixture::Script;
  auto fake = this->fake();
  fake->Expect(Script().Finish(absl::UnavailableError("busy"),
                               {{"grpc-retry-pushback-ms", "0"}}));
  fake->Expect(Script().Message(M(1)));
  auto stream = this->StartDefault();
  this->clock_->RunDue();
  EXPECT_EQ(fake->attempt_count(), 2u);
  EXPECT_THAT(this->events_->backoffs(), ElementsAre(absl::ZeroDuration()));
}

TYPED_TEST(PushbackTest, NegativePushbackEndsTheStreamWithThatStatus) {
  using Script = typename TestFixture::Script;
  this->fake()->Expect(
      Script().Message(M(1)).Finish(absl::UnavailableError("go away for good"),
                                    {{"grpc-retry-pushback-ms", "-1"}}));
  auto stream = this->StartDefault();
  const absl::Status end =
      this->EndsWithoutRetry(absl::Seconds(10), absl::StatusCode::kUnavailable);
  EXPECT_EQ(end.message(), "go away for good");
  EXPECT_THAT(this->got(), ElementsAre(1));
}

TYPED_TEST(PushbackTest, MalformedPushbackMeansDoNotRetry) {
  using Script = typename TestFixture::Script;
  this->fake()->Expect(Script().Finish(absl::ResourceExhaustedError("no"),
                                       {{"grpc-retry-pushback-ms", "soon"}}));
  auto stream = this->StartDefault();
  this->EndsWithoutRetry(absl::Seconds(10),
                         absl::StatusCode::kResourceExhausted)
      .IgnoreError();  // the code is all this test checks
}

TYPED_TEST(PushbackTest, PushbackDoesNotTurnAPermanentErrorIntoARetry) {
  using Script = typename TestFixture::Script;
  this->fake()->Expect(Script().Finish(absl::NotFoundError("no such key"),
                                       {{"grpc-retry-pushback-ms", "10"}}));
  auto stream = this->StartDefault();
  this->EndsWithoutRetry(absl::Seconds(1), absl::StatusCode::kNotFound)
      .IgnoreError();  // the code is all this test checks
}

// A pushback that would outlast max_time_without_progress ends the stream
// at once, whether the attempt before it delivered or not.
TYPED_TEST(PushbackTest, PushbackPastTheTimeBudgetGivesUpAtOnce) {
  using Script = typename TestFixture::Script;
  this->options_.max_time_without_progress = absl::Seconds(30);
  this->fake()->Expect(
      Script().Finish(absl::UnavailableError("maintenance"),
                      {{"grpc-retry-pushback-ms", "3600000"}}));
  auto stream = this->StartDefault();
  const absl::Status end = this->EndsWithoutRetry(
      absl::ZeroDuration(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(end.message()), HasSubstr("grpc-retry-pushback-ms"));
}

TYPED_TEST(PushbackTest, LongPushbackAfterADeliveringAttemptEndsAtOnce) {
  using Script = typename TestFixture::Script;
  this->options_.max_time_without_progress = absl::Seconds(30);
  this->fake()->Expect(
      Script().Message(M(1)).Finish(absl::UnavailableError("maintenance"),
                                    {{"grpc-retry-pushback-ms", "3600000"}}));
  auto stream = this->StartDefault();
  const absl::Status end = this->EndsWithoutRetry(
      absl::ZeroDuration(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(end.message()), HasSubstr("grpc-retry-pushback-ms"));
  EXPECT_THAT(this->got(), ElementsAre(1));
}

TYPED_TEST(PushbackTest, PushbackWithinTheBoundAfterADeliveringAttemptWaits) {
  using Script = typename TestFixture::Script;
  this->options_.max_time_without_progress = absl::Seconds(30);
  auto fake = this->fake();
  fake->Expect(Script().Message(M(1)).Finish(
      absl::UnavailableError("busy"), {{"grpc-retry-pushback-ms", "20000"}}));
  auto stream = this->StartDefault();
  this->clock_->AdvanceBy(absl::Seconds(20) - absl::Milliseconds(1));
  EXPECT_EQ(fake->attempt_count(), 1u);
  this->clock_->AdvanceBy(absl::Milliseconds(1));
  ASSERT_EQ(fake->attempt_count(), 2u);
  const std::vector<AttemptInfo> infos = fake->infos();
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_TRUE(infos[1].resumed);
  EXPECT_EQ(infos[1].resume_after_seq, 1u);
  EXPECT_TRUE(this->done().empty());
}

}  // namespace
}  // namespace stream_test
}  // namespace tether
