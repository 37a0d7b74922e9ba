// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The fake transport's cancel modes, driven by hand (no stream): gRPC's
// TryCancel completes later, and the fake must behave the same way.
#include "tether/testing/fake_transport.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "tether/testing/fake_clock.h"
#include "tether/transport.h"

namespace tether {
namespace fake_transport_test {
namespace {

using fakes::CancelMode;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

struct Req {
  std::string key;
};
struct Resp {
  std::uint64_t seq = 0;
};
using Transport = fakes::FakeTransport<Req, Resp>;

// Records what the attempt delivers; pauses after `pause_after` messages.
class Recorder final : public AttemptListener<Resp> {
 public:
  bool OnMessage(Resp&& r) override {
    got.push_back(r.seq);
    return got.size() < pause_after;
  }
  void OnEnd(const absl::Status& s, const Metadata& /*trailers*/) override {
    done.push_back(s);
  }

  std::vector<std::uint64_t> got;
  std::vector<absl::Status> done;
  std::size_t pause_after = 1000;
};

class FakeCancelTest : public ::testing::Test {
 protected:
  std::shared_ptr<Transport::FakeAttempt> StartOne(Transport& t) {
    t.StartAttempt(ConnectionPick{1, nullptr}, AttemptInfo(), Req{"k"},
                   recorder_);
    return t.last_attempt();
  }

  std::shared_ptr<fakes::FakeClock> clock_ =
      std::make_shared<fakes::FakeClock>();
  std::shared_ptr<Recorder> recorder_ = std::make_shared<Recorder>();
};

TEST_F(FakeCancelTest, DefaultIsAsync) {
  Transport t;
  EXPECT_EQ(t.cancel_mode(), CancelMode::kAsync);
}

TEST_F(FakeCancelTest, AsyncCancelCompletesOnTheClock) {
  Transport t(nullptr, clock_);
  auto a = StartOne(t);
  a->Cancel();
  EXPECT_TRUE(a->cancelled());
  EXPECT_TRUE(a->cancel_pending());
  EXPECT_FALSE(a->done());
  EXPECT_THAT(recorder_->done, IsEmpty());  // not inside Cancel
  EXPECT_EQ(t.pending_cancels(), 1u);
  clock_->RunDue();
  EXPECT_TRUE(a->done());
  EXPECT_FALSE(a->cancel_pending());
  ASSERT_EQ(recorder_->done.size(), 1u);
  EXPECT_EQ(recorder_->done[0].code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(t.pending_cancels(), 0u);
}

TEST_F(FakeCancelTest, AsyncCancelWithoutClockWaitsForTheTest) {
  Transport t;
  auto a = StartOne(t);
  a->Cancel();
  EXPECT_FALSE(a->done());
  EXPECT_EQ(t.CompletePendingCancels(), 1u);
  ASSERT_EQ(recorder_->done.size(), 1u);
  EXPECT_EQ(recorder_->done[0].code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(t.CompletePendingCancels(), 0u);
}

TEST_F(FakeCancelTest, ManualModeIgnoresTheClock) {
  Transport t(nullptr, clock_);
  t.set_cancel_mode(CancelMode::kAsyncManual);
  auto a = StartOne(t);
  a->Cancel();
  EXPECT_EQ(clock_->PendingTimers(), 0u);
  clock_->AdvanceBy(absl::Hours(1));
  EXPECT_FALSE(a->done());
  EXPECT_TRUE(a->CompleteCancel());
  EXPECT_TRUE(a->done());
  EXPECT_FALSE(a->CompleteCancel());  // already ended
  EXPECT_EQ(recorder_->done.size(), 1u);
}

TEST_F(FakeCancelTest, ImmediateModeEndsInsideCancel) {
  Transport t(nullptr, clock_);
  t.set_cancel_mode(CancelMode::kImmediate);
  auto a = StartOne(t);
  a->Cancel();
  EXPECT_TRUE(a->done());
  ASSERT_EQ(recorder_->done.size(), 1u);
  EXPECT_EQ(recorder_->done[0].code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(clock_->PendingTimers(), 0u);
}

TEST_F(FakeCancelTest, ModeAppliesToAttemptsStartedAfterwards) {
  Transport t;
  auto async = StartOne(t);
  t.set_cancel_mode(CancelMode::kImmediate);
  auto immediate = StartOne(t);
  async->Cancel();
  immediate->Cancel();
  EXPECT_FALSE(async->done());
  EXPECT_TRUE(immediate->done());
}

TEST_F(FakeCancelTest, CompleteCancelWithoutACancelDoesNothing) {
  Transport t;
  auto a = StartOne(t);
  EXPECT_FALSE(a->CompleteCancel());
  EXPECT_FALSE(a->done());
  a->Finish(absl::OkStatus());
  EXPECT_FALSE(a->CompleteCancel());
  EXPECT_EQ(recorder_->done.size(), 1u);
}

TEST_F(FakeCancelTest, SecondCancelAndCancelAfterTheEndDoNothing) {
  Transport t(nullptr, clock_);
  auto a = StartOne(t);
  a->Cancel();
  a->Cancel();
  EXPECT_EQ(clock_->PendingTimers(), 1u);
  clock_->RunDue();
  a->Cancel();
  clock_->RunDue();
  EXPECT_EQ(recorder_->done.size(), 1u);
}

TEST_F(FakeCancelTest, PendingCancelDeliversNothingByDefault) {
  Transport t;
  recorder_->pause_after = 1;
  auto a = StartOne(t);
  a->Send(Resp{1});
  a->Send(Resp{2});  // queued: the reader paused
  a->Cancel();
  a->Resume();
  a->Send(Resp{3});  // the server wrote after the cancel: never seen
  a->Finish(absl::OkStatus());
  EXPECT_THAT(recorder_->got, ElementsAre(1u));
  EXPECT_THAT(recorder_->done, IsEmpty());
  t.CompletePendingCancels();
  ASSERT_EQ(recorder_->done.size(), 1u);
  EXPECT_EQ(recorder_->done[0].code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(a->delivered(), 1u);
}

TEST_F(FakeCancelTest, InFlightMessagesMayArriveBeforeTheCancelCompletes) {
  Transport t(nullptr, clock_);
  t.set_deliver_after_cancel(true);
  recorder_->pause_after = 1;
  auto a = StartOne(t);
  a->Send(Resp{1});
  a->Send(Resp{2});
  a->Cancel();
  a->Resume();       // the queued message is still read
  a->Send(Resp{3});  // and one written before the server saw the cancel
  EXPECT_THAT(recorder_->got, ElementsAre(1u, 2u));
  EXPECT_FALSE(a->done());
  clock_->RunDue();
  ASSERT_EQ(recorder_->done.size(), 1u);
  EXPECT_EQ(recorder_->done[0].code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(recorder_->got, ElementsAre(1u, 2u));  // 3 was not read
}

TEST_F(FakeCancelTest, ServerStatusMayWinTheRaceWithAPendingCancel) {
  Transport t(nullptr, clock_);
  t.set_deliver_after_cancel(true);
  auto a = StartOne(t);
  a->Cancel();
  a->Send(Resp{1});
  a->Finish(absl::UnavailableError("server is shutting down"));
  ASSERT_EQ(recorder_->done.size(), 1u);
  EXPECT_EQ(recorder_->done[0].code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(recorder_->got, ElementsAre(1u));
  clock_->RunDue();  // the cancel's completion finds the call ended
  EXPECT_EQ(recorder_->done.size(), 1u);
}

TEST_F(FakeCancelTest, SendAfterTheFinalStatusStillFailsWhileCancelPending) {
  Transport t;
  t.set_deliver_after_cancel(true);
  recorder_->pause_after = 0;  // pauses at once: the status waits
  auto a = StartOne(t);
  a->Send(Resp{1});
  a->Send(Resp{2});
  a->Cancel();
  a->Finish(absl::OkStatus());
  EXPECT_NONFATAL_FAILURE(a->Send(Resp{3}), "after the final status");
}

TEST_F(FakeCancelTest, AttemptOutlivedByItsTimerIsHarmless) {
  auto t = std::make_shared<Transport>(nullptr, clock_);
  std::weak_ptr<Transport::FakeAttempt> weak;
  {
    auto a = StartOne(*t);
    weak = a;
    a->Cancel();
  }
  t.reset();  // drops the attempts; the timer holds no reference
  EXPECT_TRUE(weak.expired());
  clock_->RunDue();
  EXPECT_THAT(recorder_->done, IsEmpty());
}

}  // namespace
}  // namespace fake_transport_test
}  // namespace tether
