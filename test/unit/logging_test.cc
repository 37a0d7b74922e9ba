// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// The logging observer: lines and severities, and the storm limit under the
// fake clock.
#include "tether/logging.h"

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "observability/readable_duration.h"
#include "tether/circuit_breaker.h"
#include "tether/testing/fake_clock.h"

namespace tether {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

class RecordingSink : public LogSink {
 public:
  void Write(LogSeverity severity, absl::string_view line) override {
    internal::MutexLock lock(&mu);
    lines.emplace_back(severity, std::string(line));
  }
  std::vector<std::string> Texts() {
    internal::MutexLock lock(&mu);
    std::vector<std::string> out;
    for (auto& l : lines) out.push_back(l.second);
    return out;
  }
  internal::Mutex mu;
  std::vector<std::pair<LogSeverity, std::string>> lines;
};

class LoggingTest : public ::testing::Test {
 protected:
  std::shared_ptr<LoggingObserver> Make(int per_window = 3) {
    LoggingOptions o;
    o.sink = sink_;
    o.clock = clock_;
    o.prefix = "watch/alice";
    o.max_lines_per_window = per_window;
    return LoggingObserver::Create(o).value();
  }
  std::shared_ptr<fakes::FakeClock> clock_ =
      std::make_shared<fakes::FakeClock>();
  std::shared_ptr<RecordingSink> sink_ = std::make_shared<RecordingSink>();
};

TEST_F(LoggingTest, LinesCarryPrefixFactsAndSeverity) {
  auto log = Make();
  AttemptInfo info;
  info.attempt = 2;
  info.connection_id = 7;
  info.reason = AttemptReason::kMigration;
  info.resumed = true;
  info.resume_after_seq = 41;
  log->OnAttemptStarted(info);
  log->OnAttemptEnded(info, absl::InternalError("boom"), EndClass::kTransient,
                      false);
  log->OnGaveUp(absl::UnavailableError("budget spent"));
  log->OnResync(absl::OutOfRangeError("compacted"), 90);
  log->OnStateChange("ledger", BreakerState::kClosed, BreakerState::kOpen,
                     BreakerCounts{});
  ASSERT_THAT(sink_->lines, SizeIs(5));
  EXPECT_EQ(sink_->lines[0].second,
            "watch/alice: attempt 2 started on connection 7 (migration, "
            "resume after 41)");
  EXPECT_EQ(sink_->lines[0].first, LogSeverity::kInfo);
  EXPECT_THAT(sink_->lines[1].second, HasSubstr("INTERNAL: boom (transient)"));
  EXPECT_EQ(sink_->lines[1].first, LogSeverity::kWarning);
  EXPECT_EQ(sink_->lines[2].first, LogSeverity::kError);
  EXPECT_EQ(sink_->lines[3].second,
            "watch/alice: resync after OUT_OF_RANGE: compacted: resuming "
            "after 90");
  EXPECT_EQ(sink_->lines[3].first, LogSeverity::kWarning);
  EXPECT_THAT(sink_->lines[4].second,
              HasSubstr("breaker ledger: closed -> open"));
  EXPECT_EQ(sink_->lines[4].first, LogSeverity::kWarning);
}

// Each stream's lines say which stream; a drain is the pool's line, once;
// durations read as a person reads them; a status is not said twice.
TEST_F(LoggingTest, StreamLinesCarryTheStreamsName) {
  auto log = Make();
  std::shared_ptr<StreamObserver> a = log->ForStream("ledger/Watch#1");
  std::shared_ptr<StreamObserver> b = log->ForStream("ledger/Watch#2");
  AttemptInfo info;
  info.attempt = 1;
  info.connection_id = 3;
  a->OnAttemptStarted(info);
  b->OnAttemptStarted(info);
  a->OnConnectionDraining(3, "GOAWAY");  // the pool says it
  b->OnConnectionDraining(3, "GOAWAY");
  log->OnConnectionDraining(3, "GOAWAY");  // as the pool's observer
  a->OnBackoff(absl::Microseconds(662.20575),
               absl::CancelledError("CANCELLED"));
  b->OnStalled(info, absl::Milliseconds(12345.678));
  EXPECT_THAT(
      sink_->Texts(),
      ElementsAre(
          "watch/alice: stream ledger/Watch#1: attempt 1 started on "
          "connection 3 (first)",
          "watch/alice: stream ledger/Watch#2: attempt 1 started on "
          "connection 3 (first)",
          "watch/alice: connection 3 draining: GOAWAY",
          "watch/alice: stream ledger/Watch#1: next attempt in 662us after "
          "CANCELLED",
          "watch/alice: stream ledger/Watch#2: attempt 1 on connection 3 "
          "stalled (silent for 12.3s)"));
  // The rate limit is the parent's: both streams' lines count in one window.
  for (int i = 0; i < 5; ++i) a->OnGap(1, 3);
  for (int i = 0; i < 5; ++i) b->OnGap(1, 3);
  EXPECT_EQ(log->suppressed_total(), 7u);
}

// A drain reported by the pool and by each stream through one observer (the
// observer given to both by hand) is one line; another connection's, or
// another reason, is a line of its own.
TEST_F(LoggingTest, OneDrainIsOneLineThroughASharedObserver) {
  auto log = Make();
  log->OnConnectionDraining(4, "GOAWAY");  // the pool
  log->OnConnectionDraining(4, "GOAWAY");  // stream 1
  log->OnConnectionDraining(4, "GOAWAY");  // stream 2
  log->OnConnectionDraining(5, "GOAWAY");
  log->OnConnectionDraining(4, "health check reports NOT_SERVING");
  EXPECT_THAT(sink_->Texts(),
              ElementsAre("watch/alice: connection 4 draining: GOAWAY",
                          "watch/alice: connection 5 draining: GOAWAY",
                          "watch/alice: connection 4 draining: health check "
                          "reports NOT_SERVING"));
}

// The breaker's lines name the rule that moved it, read from a real breaker
// (the counts of a transition are taken after its window was reset, so a
// rate read from them would say "0.0% of 0").
TEST_F(LoggingTest, BreakerLinesNameTheRuleThatTripped) {
  auto log = Make(/*per_window=*/100);
  CircuitBreakerOptions o;
  o.name = "ledger";
  o.consecutive_failures = 5;
  o.break_duration = absl::Seconds(5);
  o.break_jitter = 0;
  o.half_open_permits = 2;
  o.observer = log;
  auto breaker = CircuitBreaker::Create(o, clock_).value();
  for (int i = 0; i < 5; ++i) {
    breaker->Record(breaker->TryAcquire().value(), Outcome::kFailure);
  }
  const absl::Status refused = breaker->TryAcquire().status();
  clock_->AdvanceBy(absl::Seconds(5));
  for (int i = 0; i < 2; ++i) {
    breaker->Record(breaker->TryAcquire().value(), Outcome::kSuccess);
  }
  std::vector<std::string> lines;
  for (const std::string& l : sink_->Texts()) {
    if (l.find("->") != std::string::npos) lines.push_back(l);
  }
  EXPECT_THAT(lines, ElementsAre("watch/alice: breaker ledger: closed -> open "
                                 "(5 consecutive failures)",
                                 "watch/alice: breaker ledger: open -> "
                                 "half-open (break over)",
                                 "watch/alice: breaker ledger: half-open -> "
                                 "closed (2 probes succeeded)"));
  // The refusal's wait reads as a person reads it.
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("is open for another 5s (5 consecutive failures)"));

  CircuitBreakerOptions rate;
  rate.name = "rate";
  rate.minimum_calls = 4;
  rate.window_size = 4;
  rate.failure_rate_threshold = 50;
  rate.observer = log;
  auto by_rate = CircuitBreaker::Create(rate, clock_).value();
  for (Outcome x : {Outcome::kSuccess, Outcome::kFailure, Outcome::kSuccess,
                    Outcome::kFailure}) {
    by_rate->Record(by_rate->TryAcquire().value(), x);
  }
  EXPECT_THAT(sink_->Texts().back(),
              HasSubstr("breaker rate: closed -> open (failure rate 50.0% >= "
                        "50% over 4 calls)"));
  by_rate->SetForcedOpen(true);
  EXPECT_EQ(sink_->Texts().back(),
            "watch/alice: breaker rate: open -> forced-open (forced open)");
}

TEST(ReadableDurationTest, TruncatesToWhatAPersonReads) {
  using internal::ReadableDuration;
  EXPECT_EQ(ReadableDuration(absl::Nanoseconds(662205)), "662us");
  EXPECT_EQ(ReadableDuration(absl::Microseconds(459991.85575)), "459ms");
  EXPECT_EQ(ReadableDuration(absl::Milliseconds(1234.9)), "1.234s");
  EXPECT_EQ(ReadableDuration(absl::Milliseconds(12345.678)), "12.3s");
  EXPECT_EQ(ReadableDuration(absl::Minutes(6)), "6m");
  EXPECT_EQ(ReadableDuration(absl::ZeroDuration()), "0");
  EXPECT_EQ(ReadableDuration(absl::InfiniteDuration()), "inf");
  EXPECT_EQ(ReadableDuration(-absl::Milliseconds(1500)), "-1.5s");
}

TEST_F(LoggingTest, MinSeverityDropsLowerLines) {
  LoggingOptions o;
  o.sink = sink_;
  o.clock = clock_;
  o.min_severity = LogSeverity::kWarning;
  auto log = LoggingObserver::Create(o).value();
  log->OnConnectionOpened(1, "a:1");  // INFO
  log->OnGap(3, 5);                   // WARNING
  EXPECT_THAT(sink_->Texts(), ElementsAre("gap: expected seq 3, got 5"));
}

TEST_F(LoggingTest, StormIsCappedPerKindAndSummarizedOnTheTimer) {
  auto log = Make(3);
  for (int i = 0; i < 1000; ++i) log->OnConnectionDraining(i, "GOAWAY");
  log->OnGap(1, 3);  // another kind has its own budget
  EXPECT_THAT(sink_->Texts(), SizeIs(4));
  EXPECT_EQ(log->suppressed_total(), 997u);
  clock_->AdvanceBy(absl::Milliseconds(999));
  EXPECT_THAT(sink_->Texts(), SizeIs(4));  // the window is still open
  clock_->AdvanceBy(absl::Milliseconds(1));
  ASSERT_THAT(sink_->Texts(), SizeIs(5));
  EXPECT_EQ(sink_->Texts()[4],
            "watch/alice: suppressed 997 draining lines in the last 1s");
  EXPECT_EQ(sink_->lines[4].first, LogSeverity::kWarning);
  // A new window: lines flow again.
  log->OnConnectionDraining(5000, "GOAWAY");
  EXPECT_THAT(sink_->Texts(), SizeIs(6));
  EXPECT_EQ(clock_->PendingTimers(), 0u);
}

TEST_F(LoggingTest, NextWindowsLineWritesTheSummaryFirst) {
  auto log = Make(1);
  log->OnGap(1, 3);
  log->OnGap(4, 6);  // suppressed; a summary timer is armed
  clock_->AdvanceBy(absl::Milliseconds(400));
  log->OnGap(7, 9);  // suppressed, same window
  EXPECT_THAT(sink_->Texts(), SizeIs(1));
  clock_->AdvanceBy(absl::Milliseconds(600));  // the timer reports 2
  EXPECT_THAT(sink_->Texts()[1], HasSubstr("suppressed 2 gap lines"));
  log->OnGap(10, 12);
  EXPECT_THAT(sink_->Texts(), SizeIs(3));
}

// A clock whose first `RunAfter` lets `between` run first: what another
// thread does between a caller's decision to arm a timer and the arming.
class InterleavingClock final : public Clock {
 public:
  explicit InterleavingClock(std::shared_ptr<fakes::FakeClock> clock)
      : clock_(std::move(clock)) {}
  absl::Time Now() override { return clock_->Now(); }
  TimerId RunAfter(absl::Duration delay, std::function<void()> fn) override {
    std::function<void()> between = std::move(between_);
    between_ = nullptr;
    if (between) between();
    return clock_->RunAfter(delay, std::move(fn));
  }
  bool Cancel(TimerId id) override { return clock_->Cancel(id); }
  std::function<void()> between_;

 private:
  const std::shared_ptr<fakes::FakeClock> clock_;
};

TEST_F(LoggingTest, ATimerArmedAcrossTheWindowsEndDoesNotResetTheNext) {
  auto clock = std::make_shared<InterleavingClock>(clock_);
  LoggingOptions o;
  o.sink = sink_;
  o.clock = clock;
  o.max_lines_per_window = 2;
  auto log = LoggingObserver::Create(o).value();
  log->OnGap(1, 3);
  clock_->AdvanceBy(absl::Milliseconds(500));
  log->OnGap(4, 6);
  // The third line of the window is suppressed and arms the summary timer
  // (due at 1 s). Before it is armed, "another thread" finds the window over
  // and opens the next one (at 1.5 s) with a line.
  clock->between_ = [&] {
    clock_->AdvanceBy(absl::Seconds(1));
    log->OnGap(7, 9);
  };
  log->OnGap(10, 12);
  // The timer went in at 2 s, inside the second window (1.5 s - 2.5 s).
  log->OnGap(13, 15);  // the second window's second line
  log->OnGap(16, 18);  // suppressed: 2 per window
  clock_->AdvanceBy(absl::Milliseconds(600));  // 2.1 s
  log->OnGap(19, 21);  // still the second window: suppressed
  int gap_lines = 0;
  for (const std::string& t : sink_->Texts()) {
    if (t.rfind("gap: expected seq", 0) == 0) ++gap_lines;
  }
  EXPECT_EQ(gap_lines, 4) << ::testing::PrintToString(sink_->Texts());
  clock_->AdvanceBy(absl::Seconds(1));  // the second window's own summary
  EXPECT_THAT(sink_->Texts().back(), HasSubstr("suppressed 2 gap lines"));
  EXPECT_EQ(clock_->PendingTimers(), 0u);
}

TEST_F(LoggingTest, DestructionWritesPendingSummaries) {
  auto log = Make(1);
  log->OnStalled(AttemptInfo{}, absl::Seconds(3));
  log->OnStalled(AttemptInfo{}, absl::Seconds(3));
  log.reset();
  EXPECT_THAT(sink_->Texts(), SizeIs(2));
  EXPECT_THAT(sink_->Texts()[1], HasSubstr("suppressed 1 stalled lines"));
  clock_->AdvanceBy(absl::Seconds(5));  // the cancelled timer does nothing
  EXPECT_THAT(sink_->Texts(), SizeIs(2));
}

TEST_F(LoggingTest, OptionsAreValidated) {
  LoggingOptions o;
  EXPECT_TRUE(Validate(o).ok());
  o.max_lines_per_window = 0;
  EXPECT_EQ(Validate(o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(Validate(o).message()),
              HasSubstr("max_lines_per_window"));
  o.max_lines_per_window = 1000001;
  EXPECT_FALSE(Validate(o).ok());
  o.max_lines_per_window = 1000000;
  EXPECT_TRUE(Validate(o).ok());
  o.rate_window = absl::ZeroDuration();
  EXPECT_FALSE(LoggingObserver::Create(o).ok());
  o.rate_window = absl::InfiniteDuration();
  EXPECT_FALSE(Validate(o).ok());
  o.rate_window = absl::Hours(1);
  EXPECT_TRUE(Validate(o).ok());
  o.rate_window = absl::Milliseconds(1);
  EXPECT_TRUE(Validate(o).ok());
}

TEST(StderrLogSinkTest, IsSharedAndWrites) {
  EXPECT_EQ(StderrLogSink(), StderrLogSink());
  ::testing::internal::CaptureStderr();
  StderrLogSink()->Write(LogSeverity::kWarning, "hello");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "tether W: hello\n");
}

}  // namespace
}  // namespace tether
