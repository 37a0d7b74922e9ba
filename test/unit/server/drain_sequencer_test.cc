// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// DrainSequencer under a fake clock with a fake driver: the order of the
// steps, when each happens, who hears what, the early exits and the hard
// bound. No gRPC, no sleeps.
#include "server/drain_sequencer.h"

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/support/one_shot.h"
#include "tether/testing/fake_clock.h"

namespace tether {
namespace internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tether::server::DrainCall;
using ::tether::server::DrainHooks;
using ::tether::server::DrainObserver;
using ::tether::server::DrainOptions;
using ::tether::server::DrainReport;
using ::tether::testsupport::OneShot;

// Everything that happened, as "<time since start> <what>", in order.
class Timeline {
 public:
  explicit Timeline(fakes::FakeClock& clock)
      : clock_(clock), start_(clock.Now()) {}
  void Add(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(
        absl::StrCat(absl::FormatDuration(clock_.Now() - start_), " ", what));
  }
  std::vector<std::string> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    out.swap(events_);
    return out;
  }

 private:
  fakes::FakeClock& clock_;
  const absl::Time start_;
  std::mutex mu_;
  std::vector<std::string> events_;
};

class FakeDriver final : public ServerDriver {
 public:
  explicit FakeDriver(Timeline& t) : timeline_(t) {}
  void SetNotServing() override { timeline_.Add("driver NOT_SERVING"); }
  void StartShutdown(absl::Duration deadline,
                     std::function<void()> on_returned) override {
    timeline_.Add(
        absl::StrCat("driver Shutdown(", absl::FormatDuration(deadline), ")"));
    std::lock_guard<std::mutex> lock(mu_);
    on_returned_ = std::move(on_returned);
  }
  void EndHealthWatches() override { timeline_.Add("driver end health"); }
  // What gRPC does when every handler has returned.
  void ShutdownReturns() {
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn = std::move(on_returned_);
    }
    ASSERT_TRUE(fn) << "Shutdown was never called";
    fn();
  }

 private:
  Timeline& timeline_;
  std::mutex mu_;
  std::function<void()> on_returned_;
};

class RecordingObserver final : public DrainObserver {
 public:
  explicit RecordingObserver(Timeline& t) : timeline_(t) {}
  void OnUnready(absl::Duration w) override {
    timeline_.Add(absl::StrCat("observer unready ", absl::FormatDuration(w)));
  }
  void OnNotice(std::size_t n) override {
    timeline_.Add(absl::StrCat("observer notice ", n));
  }
  void OnGoaway(std::size_t n, absl::Duration d) override {
    timeline_.Add(
        absl::StrCat("observer goaway ", n, " ", absl::FormatDuration(d)));
  }
  void OnEndCalls(std::size_t n, const grpc::Status& s) override {
    timeline_.Add(absl::StrCat("observer end ", n, " ", s.error_message()));
  }
  void OnFinished(const DrainReport& r) override {
    timeline_.Add(
        absl::StrCat("observer finished ", server::DrainReportToString(r)));
  }

 private:
  Timeline& timeline_;
};

class LinesSink final : public LogSink {
 public:
  void Write(LogSeverity severity, absl::string_view line) override {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back(absl::StrCat(LogSeverityName(severity), " ", line));
  }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

class DrainSequencerTest : public ::testing::Test {
 protected:
  DrainSequencerTest() {
    options_.unready_window = absl::Seconds(5);
    options_.notice_grace = absl::Seconds(4);
    options_.goaway_grace = absl::Seconds(1);
    options_.drain_deadline = absl::Seconds(10);
    options_.stop_slack = absl::Seconds(1);
  }

  void Start() {
    ASSERT_TRUE(server::ValidateDrainOptions(options_).ok());
    options_.clock = clock_;
    options_.observer = std::make_shared<RecordingObserver>(timeline_);
    options_.log_sink = sink_;
    driver_ = std::make_shared<FakeDriver>(timeline_);
    sequencer_ = DrainSequencer::Create(options_, driver_);
  }

  // A call whose hooks write to the timeline.
  std::unique_ptr<DrainCall> Call(const std::string& name) {
    DrainHooks hooks;
    hooks.send_notice = [this, name] { timeline_.Add(name + " notice"); };
    hooks.end = [this, name](const grpc::Status& s) {
      timeline_.Add(absl::StrCat(name, " end ", s.error_code()));
    };
    return sequencer_->Register(std::move(hooks));
  }

  std::shared_ptr<fakes::FakeClock> clock_ =
      std::make_shared<fakes::FakeClock>();
  Timeline timeline_{*clock_};
  std::shared_ptr<LinesSink> sink_ = std::make_shared<LinesSink>();
  DrainOptions options_;
  std::shared_ptr<FakeDriver> driver_;
  std::shared_ptr<DrainSequencer> sequencer_;
};

TEST_F(DrainSequencerTest, StepsRunInOrderAtTheirTimes) {
  Start();
  auto a = Call("a");
  auto b = Call("b");
  EXPECT_FALSE(sequencer_->WaitFor(absl::ZeroDuration()).has_value());

  ASSERT_TRUE(sequencer_->Begin());
  EXPECT_THAT(timeline_.Take(),
              ElementsAre("0 driver NOT_SERVING", "0 observer unready 5s"));

  // Nothing before the unready window is over.
  clock_->AdvanceBy(absl::Seconds(5) - absl::Nanoseconds(1));
  EXPECT_THAT(timeline_.Take(), ElementsAre());
  EXPECT_EQ(sequencer_->phase(), DrainPhase::kUnready);

  clock_->AdvanceBy(absl::Nanoseconds(1));
  EXPECT_THAT(timeline_.Take(), ElementsAre("5s a notice", "5s b notice",
                                            "5s observer notice 2"));
  EXPECT_TRUE(a->notice_due());

  // Both stay: the whole notice grace passes, then the GOAWAY.
  clock_->AdvanceBy(absl::Seconds(4) - absl::Nanoseconds(1));
  EXPECT_THAT(timeline_.Take(), ElementsAre());
  clock_->AdvanceBy(absl::Nanoseconds(1));
  EXPECT_THAT(timeline_.Take(), ElementsAre("9s driver Shutdown(10s)",
                                            "9s observer goaway 2 10s"));
  EXPECT_FALSE(a->end_status().has_value());

  // Handlers are told to end only goaway_grace after the GOAWAY.
  clock_->AdvanceBy(absl::Seconds(1) - absl::Nanoseconds(1));
  EXPECT_THAT(timeline_.Take(), ElementsAre());
  clock_->AdvanceBy(absl::Nanoseconds(1));
  EXPECT_THAT(
      timeline_.Take(),
      ElementsAre("10s driver end health", "10s a end 14", "10s b end 14",
                  "10s observer end 2 server is draining"));
  ASSERT_TRUE(a->end_status().has_value());
  EXPECT_EQ(a->end_status()->error_message(), "server is draining");

  // The handlers end; gRPC's Shutdown returns.
  a.reset();
  b.reset();
  clock_->AdvanceBy(absl::Milliseconds(20));
  driver_->ShutdownReturns();
  absl::optional<DrainReport> report =
      sequencer_->WaitFor(absl::ZeroDuration());
  ASSERT_TRUE(report.has_value());
  EXPECT_TRUE(report->server_stopped);
  EXPECT_EQ(report->elapsed, absl::Milliseconds(10020));
  EXPECT_EQ(report->calls_noticed, 2u);
  EXPECT_EQ(report->calls_at_goaway, 2u);
  EXPECT_EQ(report->calls_told_to_end, 2u);
  EXPECT_EQ(report->calls_stuck, 0u);
  EXPECT_THAT(timeline_.Take(),
              ElementsAre("10.02s observer finished stopped after 10.02s: 2 "
                          "noticed, 2 open at GOAWAY, 2 told to end, 0 stuck"));
  EXPECT_EQ(sequencer_->phase(), DrainPhase::kFinished);
  EXPECT_EQ(clock_->PendingTimers(), 0u) << "the hard bound timer is left";

  // One log line per step, naming the options that time them.
  const std::vector<std::string> lines = sink_->lines();
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_THAT(lines[0], HasSubstr("step 1/4: health NOT_SERVING; serving on "
                                  "for 5s (unready_window); hard bound 20s"));
  EXPECT_THAT(lines[1], HasSubstr("step 2/4: drain notice to 2 open calls; "
                                  "waiting up to 4s (notice_grace)"));
  EXPECT_THAT(lines[2], HasSubstr("step 3/4: Shutdown(now + 10s)"));
  EXPECT_THAT(lines[3], HasSubstr("2 registered calls still open told to "
                                  "end with code 14 \"server is draining\""));
  EXPECT_THAT(lines[4], HasSubstr("INFO drain: step 4/4: server "
                                  "stopped after 10.02s"));
}

TEST_F(DrainSequencerTest, NoticeGraceEndsWhenTheLastCallLeaves) {
  Start();
  auto a = Call("a");
  auto b = Call("b");
  sequencer_->Begin();
  clock_->AdvanceBy(absl::Seconds(5));
  timeline_.Take();
  clock_->AdvanceBy(absl::Milliseconds(30));
  a.reset();  // the client moved: it cancelled this call
  EXPECT_THAT(timeline_.Take(), ElementsAre());
  clock_->AdvanceBy(absl::Milliseconds(10));
  b.reset();
  EXPECT_THAT(timeline_.Take(), ElementsAre("5.04s driver Shutdown(10s)",
                                            "5.04s observer goaway 0 10s"));
  // Nobody left to end; Shutdown returns at once.
  driver_->ShutdownReturns();
  auto report = sequencer_->WaitFor(absl::ZeroDuration());
  ASSERT_TRUE(report.has_value());
  EXPECT_TRUE(report->server_stopped);
  EXPECT_EQ(report->elapsed, absl::Milliseconds(5040));
  EXPECT_EQ(report->calls_at_goaway, 0u);
  EXPECT_EQ(report->calls_told_to_end, 0u);
  EXPECT_THAT(timeline_.Take(), ElementsAre(HasSubstr("observer finished")));
  EXPECT_THAT(sink_->lines()[2],
              HasSubstr("every registered call ended within 5.04s"));
}

TEST_F(DrainSequencerTest, WithoutRegisteredCallsTheGoawayFollowsTheWindow) {
  Start();
  sequencer_->Begin();
  timeline_.Take();
  clock_->AdvanceBy(absl::Seconds(5));
  EXPECT_THAT(timeline_.Take(),
              ElementsAre("5s driver Shutdown(10s)", "5s observer notice 0",
                          "5s observer goaway 0 10s"));
}

TEST_F(DrainSequencerTest, ZeroWindowsGoStraightToTheGoaway) {
  options_.unready_window = absl::ZeroDuration();
  options_.notice_grace = absl::ZeroDuration();
  Start();
  auto a = Call("a");
  sequencer_->Begin();
  // Driver calls run first (their own queue), then hooks and events.
  EXPECT_THAT(timeline_.Take(),
              ElementsAre("0 driver NOT_SERVING", "0 driver Shutdown(10s)",
                          "0 observer unready 0", "0 a notice",
                          "0 observer notice 1", "0 observer goaway 1 10s"));
  clock_->AdvanceBy(absl::Seconds(1));
  EXPECT_THAT(timeline_.Take(),
              ElementsAre("1s driver end health", "1s a end 14",
                          "1s observer end 1 server is draining"));
}

TEST_F(DrainSequencerTest, AHandlerThatNeverReturnsEndsTheDrainAtTheHardBound) {
  Start();
  auto stuck = Call("stuck");
  sequencer_->Begin();
  // 5 s unready + 4 s notice + 10 s deadline + 1 s slack = 20 s.
  clock_->AdvanceBy(absl::Seconds(20) - absl::Nanoseconds(1));
  EXPECT_FALSE(sequencer_->WaitFor(absl::ZeroDuration()).has_value());
  clock_->AdvanceBy(absl::Nanoseconds(1));
  auto report = sequencer_->WaitFor(absl::ZeroDuration());
  ASSERT_TRUE(report.has_value());
  EXPECT_FALSE(report->server_stopped);
  EXPECT_EQ(report->elapsed, absl::Seconds(20));
  EXPECT_EQ(report->calls_stuck, 1u);
  EXPECT_EQ(report->calls_told_to_end, 1u);
  const std::vector<std::string> lines = sink_->lines();
  EXPECT_THAT(lines.back(),
              HasSubstr("ERROR drain: step 4/4: hard bound 20s passed "
                        "and Server::Shutdown has not returned: 1 registered "
                        "handlers never ended"));
  // gRPC's Shutdown returning later changes nothing but a log line.
  driver_->ShutdownReturns();
  EXPECT_FALSE(sequencer_->WaitFor(absl::ZeroDuration())->server_stopped);
  EXPECT_THAT(sink_->lines().back(), HasSubstr("after the hard bound"));
}

TEST_F(DrainSequencerTest, ShutdownReturningEarlySkipsTheEndStep) {
  Start();
  sequencer_->Begin();
  clock_->AdvanceBy(absl::Seconds(5));
  driver_->ShutdownReturns();  // no call was open
  ASSERT_TRUE(sequencer_->WaitFor(absl::ZeroDuration()).has_value());
  timeline_.Take();
  clock_->AdvanceBy(absl::Minutes(1));
  EXPECT_THAT(timeline_.Take(), ElementsAre());
  EXPECT_EQ(clock_->PendingTimers(), 0u);
}

TEST_F(DrainSequencerTest, LateCallsHearTheNewsSoFarButNotInsideRegister) {
  Start();
  auto early = Call("early");  // holds the notice step open
  sequencer_->Begin();
  clock_->AdvanceBy(absl::Seconds(5));
  timeline_.Take();
  auto late = Call("late");  // a call that arrives during the notice step
  EXPECT_TRUE(late->notice_due());
  EXPECT_THAT(timeline_.Take(), ElementsAre()) << "no hook inside Register";
  clock_->RunDue();
  EXPECT_THAT(timeline_.Take(), ElementsAre("5s late notice"));

  clock_->AdvanceBy(absl::Seconds(5));  // notice grace, then goaway grace
  timeline_.Take();
  EXPECT_EQ(sequencer_->phase(), DrainPhase::kEnding);
  // A call that slipped in between gRPC's two GOAWAYs is told both at once.
  auto later = Call("later");
  EXPECT_TRUE(later->end_status().has_value());
  clock_->RunDue();
  EXPECT_THAT(timeline_.Take(),
              ElementsAre("10s later notice", "10s later end 14"));
}

TEST_F(DrainSequencerTest, SyncHandlersPoll) {
  Start();
  std::unique_ptr<DrainCall> call = sequencer_->Register(DrainHooks{});
  EXPECT_FALSE(call->TakeNotice());
  EXPECT_FALSE(call->WaitForSignal(absl::ZeroDuration()));
  sequencer_->Begin();
  clock_->AdvanceBy(absl::Seconds(5));
  EXPECT_TRUE(call->WaitForSignal(absl::ZeroDuration()));
  EXPECT_TRUE(call->TakeNotice());
  EXPECT_FALSE(call->TakeNotice()) << "a notice is taken once";
  EXPECT_TRUE(call->notice_due());
  EXPECT_FALSE(call->WaitForSignal(absl::ZeroDuration()));
  EXPECT_FALSE(call->end_status().has_value());
  clock_->AdvanceBy(absl::Seconds(5));
  EXPECT_TRUE(call->WaitForSignal(absl::ZeroDuration()));
  ASSERT_TRUE(call->end_status().has_value());
  EXPECT_EQ(call->end_status()->error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(DrainSequencerTest, BeginOnlyOnce) {
  Start();
  EXPECT_TRUE(sequencer_->Begin());
  EXPECT_FALSE(sequencer_->Begin());
  clock_->AdvanceBy(absl::Seconds(3));
  EXPECT_FALSE(sequencer_->Begin());
  EXPECT_THAT(timeline_.Take(),
              ElementsAre("0 driver NOT_SERVING", "0 observer unready 5s"));
}

TEST_F(DrainSequencerTest, StopFreezesTheDrain) {
  Start();
  auto a = Call("a");
  sequencer_->Begin();
  timeline_.Take();
  sequencer_->Stop();
  clock_->AdvanceBy(absl::Hours(1));
  EXPECT_THAT(timeline_.Take(), ElementsAre());
  EXPECT_EQ(clock_->PendingTimers(), 0u);
  EXPECT_FALSE(sequencer_->Begin());
}

TEST_F(DrainSequencerTest, ACallMayOutliveItsDrain) {
  Start();
  std::unique_ptr<DrainCall> call = Call("a");
  sequencer_->Begin();
  clock_->AdvanceBy(absl::Seconds(5));
  EXPECT_TRUE(call->notice_due());
  sequencer_->Stop();
  sequencer_.reset();  // the controller is gone; the handler still runs
  EXPECT_TRUE(call->notice_due());
  EXPECT_FALSE(call->end_status().has_value());
  call.reset();  // unregisters from nothing
  clock_->AdvanceBy(absl::Hours(1));
  EXPECT_EQ(clock_->PendingTimers(), 0u);
}

TEST_F(DrainSequencerTest, ACallMayEndInsideItsOwnHook) {
  Start();
  std::unique_ptr<DrainCall> call;
  DrainHooks hooks;
  hooks.send_notice = [&] { call.reset(); };  // e.g. Finish then OnDone
  call = sequencer_->Register(std::move(hooks));
  sequencer_->Begin();
  clock_->AdvanceBy(absl::Seconds(5));
  EXPECT_EQ(call, nullptr);
  EXPECT_EQ(sequencer_->open_calls(), 0u);
  // The last call left, so the GOAWAY came at once.
  EXPECT_EQ(sequencer_->phase(), DrainPhase::kGoaway);
}

TEST_F(DrainSequencerTest, EndingACallWaitsForItsHookOnAnotherThread) {
  Start();
  OneShot in_hook, release;
  std::atomic<bool> hook_returned{false};
  DrainHooks hooks;
  hooks.send_notice = [&] {
    in_hook.Signal();
    ASSERT_TRUE(release.Wait(absl::Seconds(30)));
    hook_returned = true;
  };
  std::unique_ptr<DrainCall> call = sequencer_->Register(std::move(hooks));
  sequencer_->Begin();
  std::thread advancer([&] { clock_->AdvanceBy(absl::Seconds(5)); });
  ASSERT_TRUE(in_hook.Wait(absl::Seconds(30)));
  OneShot ender_started;
  std::thread ender([&] {
    ender_started.Signal();
    call.reset();
    EXPECT_TRUE(hook_returned) << "the call ended while its hook ran";
  });
  ASSERT_TRUE(ender_started.Wait(absl::Seconds(30)));
  release.Signal();
  ender.join();
  advancer.join();
}

TEST_F(DrainSequencerTest, AHookThatBlocksDoesNotHoldUpTheShutdown) {
  Start();
  OneShot in_hook, release;
  DrainHooks hooks;
  hooks.send_notice = [&] {
    in_hook.Signal();
    EXPECT_TRUE(release.Wait(absl::Seconds(30)));
  };
  std::unique_ptr<DrainCall> call = sequencer_->Register(std::move(hooks));
  sequencer_->Begin();
  std::thread advancer([&] { clock_->AdvanceBy(absl::Seconds(5)); });
  ASSERT_TRUE(in_hook.Wait(absl::Seconds(30)));
  // The fake clock runs the notice-grace timer on this thread while the
  // advancer is stuck in the hook.
  clock_->AdvanceBy(absl::Seconds(4));
  bool shutdown_called = false;
  for (const std::string& e : timeline_.Take()) {
    if (e.find("driver Shutdown") != std::string::npos) shutdown_called = true;
  }
  EXPECT_TRUE(shutdown_called);
  release.Signal();
  advancer.join();
}

}  // namespace
}  // namespace internal
}  // namespace tether
