// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Logic tests of the spread window of moves
// (`ReconnectingStreamOptions::migration_jitter`): which moves wait in it,
// how evenly they spread, what ends the wait, and that nothing is lost or
// repeated meanwhile. Fake attempts, fake connections, the fake clock of
// the shared stream fixture; nothing here opens a socket or sleeps.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/stream_fixture.h"

namespace tether {
namespace stream_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kWindow = absl::Seconds(10);

class MigrationSpreadTest : public StreamFixture {
 protected:
  MigrationSpreadTest() { options_.migration_jitter = kWindow; }

  // A stream whose first attempt delivered 1, then whose connection
  // drained: its move waits in the window (no second attempt yet).
  std::unique_ptr<Stream> StartAndDrain() {
    auto stream = Start(SeqSpec());
    transport_->attempt(0)->Send(M(1));
    source_->Drain(transport_->attempt(0)->connection_id());
    EXPECT_EQ(transport_->attempt_count(), 1u) << "the move was not spread";
    return stream;
  }
};

// 400 streams leave one connection: their moves start over the window, in
// each tenth of it about a tenth of them, and all before its end.
TEST_F(MigrationSpreadTest, MovesSpreadUniformlyOverTheWindow) {
  constexpr int kStreams = 400;
  constexpr int kBuckets = 10;
  options_.migration_jitter = absl::Seconds(1);
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    options_.random_seed = 1000 + i;  // each stream draws its own point
    streams.push_back(Start(SeqSpec()));
    transport_->attempt(i)->Send(M(1));
  }
  source_->Drain(1);
  std::vector<std::size_t> per_bucket;
  std::size_t seen = kStreams;
  for (int b = 0; b < kBuckets; ++b) {
    clock_->AdvanceBy(absl::Milliseconds(100));
    per_bucket.push_back(transport_->attempt_count() - seen);
    seen = transport_->attempt_count();
  }
  EXPECT_EQ(seen, 2u * kStreams) << "every stream moved within the window";
  // 40 expected per bucket; a uniform draw stays within 20..60 (over 3
  // standard deviations) with these seeds and nearly any others.
  for (int b = 0; b < kBuckets; ++b) {
    EXPECT_GE(per_bucket[b], 20u) << "bucket " << b;
    EXPECT_LE(per_bucket[b], 60u) << "bucket " << b;
  }
  for (std::size_t i = kStreams; i < 2u * kStreams; ++i) {
    EXPECT_NE(transport_->attempt(i)->connection_id(), 1u);
    EXPECT_EQ(transport_->attempt(i)->request().after, 1u);
  }
  EXPECT_EQ(events_->gave_up(), 0);
  EXPECT_TRUE(events_->backoffs().empty());
}

// A source that places the streams in the window (a pool does, evenly)
// is followed: each stream waits its share of the window, asked once when
// told of the drain. Without an answer a stream draws its own point.
TEST_F(MigrationSpreadTest, TheSourcesSharePlacesTheMove) {
  source_->SetSpreadShares({0.5, 0.1, 0.9});
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < 4; ++i) {
    streams.push_back(Start(SeqSpec()));
    transport_->attempt(i)->Send(M(1));
  }
  source_->Drain(1);
  EXPECT_EQ(source_->spread_asks(), 4u);
  // Stream i asked i-th: 5 s, 1 s, 9 s; the fourth draws in [0, 10 s).
  std::vector<absl::Duration> moved(4, absl::InfiniteDuration());
  for (absl::Duration t = absl::ZeroDuration(); t <= kWindow;
       t += absl::Milliseconds(100)) {
    for (int i = 0; i < 4; ++i) {
      if (moved[i] == absl::InfiniteDuration() &&
          streams[i]->stats().migrations == 1) {
        moved[i] = t;
      }
    }
    clock_->AdvanceBy(absl::Milliseconds(100));
  }
  EXPECT_EQ(moved[0], absl::Milliseconds(5'000));
  EXPECT_EQ(moved[1], absl::Milliseconds(1'000));
  EXPECT_EQ(moved[2], absl::Milliseconds(9'000));
  EXPECT_LT(moved[3], kWindow);
  EXPECT_EQ(transport_->attempt_count(), 8u);
}

// A timer thread that falls behind (a starved process): the timers that
// fall due while it is held fire together when it is let go, at that time.
class HeldTimerClock final : public Clock {
 public:
  explicit HeldTimerClock(std::shared_ptr<fakes::FakeClock> fake)
      : fake_(std::move(fake)) {}
  absl::Time Now() override { return fake_->Now(); }
  TimerId RunAfter(absl::Duration delay, std::function<void()> fn) override {
    return fake_->RunAfter(delay, [this, fn = std::move(fn)]() mutable {
      if (holding_) {
        held_.push_back(std::move(fn));
      } else {
        fn();
      }
    });
  }
  bool Cancel(TimerId id) override { return fake_->Cancel(id); }
  void Hold() { holding_ = true; }
  void LetGo() {
    holding_ = false;
    std::vector<std::function<void()>> backlog = std::move(held_);
    held_.clear();
    for (auto& fn : backlog) fn();
  }

 private:
  const std::shared_ptr<fakes::FakeClock> fake_;
  bool holding_ = false;  // the test's thread only
  std::vector<std::function<void()>> held_;
};

// The points a late timer thread fires together are put off by as long as
// they were late, so the moves still reach the servers as a ramp.
TEST_F(MigrationSpreadTest, LatePointsArePutOffByTheirLateness) {
  constexpr int kStreams = 400;
  options_.migration_jitter = absl::Seconds(1);
  auto held = std::make_shared<HeldTimerClock>(clock_);
  options_.clock = held;
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    options_.random_seed = 1000 + i;
    streams.push_back(Start(SeqSpec()));
    transport_->attempt(i)->Send(M(1));
  }
  source_->Drain(1);
  held->Hold();
  clock_->AdvanceBy(absl::Milliseconds(500));  // about half fall due
  ASSERT_EQ(transport_->attempt_count(), static_cast<std::size_t>(kStreams));
  held->LetGo();
  // Only the points late by at most 5 ms (about 1 % of them) start now;
  // without putting them off, about 200 would.
  const std::size_t at_once = transport_->attempt_count() - kStreams;
  EXPECT_LE(at_once, 10u);
  // The rest: the window's second half (about 40 per 100 ms) and the
  // overdue ones, each put off by its lateness: the first half's pace again
  // (about 40 per 100 ms).
  std::size_t seen = transport_->attempt_count();
  for (int b = 0; b < 5; ++b) {
    clock_->AdvanceBy(absl::Milliseconds(100));
    const std::size_t started = transport_->attempt_count() - seen;
    EXPECT_LE(started, 120u) << "bucket " << b;
    seen = transport_->attempt_count();
  }
  EXPECT_EQ(seen, 2u * kStreams) << "every stream moved";
  for (std::size_t i = kStreams; i < 2u * kStreams; ++i) {
    EXPECT_EQ(transport_->attempt(i)->request().after, 1u);
  }
  streams.clear();
  clock_->RunDue();
}

// A server that cancels its streams before its GOAWAY leaves nothing to
// serve: the stream reopens as without a window.
TEST_F(MigrationSpreadTest, CancelFirstEndIsNotSpread) {
  options_.reopen_after_progress_jitter = absl::ZeroDuration();
  auto stream = Start(SeqSpec());
  auto first = transport_->attempt(0);
  first->Send(M(1));
  first->Finish(absl::UnavailableError("server is shutting down"));
  clock_->RunDue();
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_EQ(transport_->attempt(1)->request().after, 1u);
  EXPECT_THAT(events_->reasons(),
              ElementsAre(AttemptReason::kFirst, AttemptReason::kReopen));
}

// After progress a stream reopens at the point of its window that the
// source gives (a pool sizes it to the herd the connection lost); an end
// without progress is a failure's and asks nothing.
TEST_F(MigrationSpreadTest, ReopenAfterProgressTakesTheSourcesShare) {
  options_.reopen_after_progress_jitter = absl::Milliseconds(10);
  source_->SetReopenShares({0.0, 0.5});
  auto stream = Start(SeqSpec());
  transport_->attempt(0)->Send(M(1));
  transport_->attempt(0)->Finish(absl::CancelledError("server cut it"));
  // Share 0 starts the reopen with the end, after the end's report (the
  // fake marks the connection suspect): not from a timer, which could pick
  // the connection before the source heard.
  ASSERT_EQ(transport_->attempt_count(), 2u) << "share 0 waited";
  EXPECT_NE(transport_->attempt(1)->connection_id(),
            transport_->attempt(0)->connection_id());
  transport_->attempt(1)->Send(M(2));
  transport_->attempt(1)->Finish(absl::CancelledError("server cut it"));
  clock_->AdvanceBy(absl::Microseconds(4999));
  ASSERT_EQ(transport_->attempt_count(), 2u) << "before its share";
  clock_->AdvanceBy(absl::Microseconds(1));
  ASSERT_EQ(transport_->attempt_count(), 3u) << "half the window passed";
  EXPECT_EQ(transport_->attempt(2)->request().after, 2u);
  EXPECT_EQ(source_->reopen_asks(), 2u);
  transport_->attempt(2)->Finish(absl::UnavailableError("refused"));
  EXPECT_EQ(source_->reopen_asks(), 2u) << "a failure asked for a share";
  EXPECT_THAT(got(), ElementsAre(1, 2));
}

// A lost connection: the pool reports it, and its call ends at once. The
// move that started waiting in the window starts now.
TEST_F(MigrationSpreadTest, AbruptEndIsNotSpread) {
  auto stream = StartAndDrain();
  transport_->attempt(0)->Finish(absl::UnavailableError("connection reset"));
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_NE(transport_->attempt(1)->connection_id(),
            transport_->attempt(0)->connection_id());
  EXPECT_EQ(transport_->attempt(1)->request().after, 1u);
  EXPECT_TRUE(events_->backoffs().empty());
}

// An attempt that went silent serves nothing: a stall moves it after the
// stall's backoff, not at the point the window drew for it.
TEST_F(MigrationSpreadTest, StalledAttemptIsNotSpread) {
  options_.stall_timeout = absl::Seconds(1);
  auto stream = StartAndDrain();
  clock_->AdvanceBy(absl::Milliseconds(999));
  ASSERT_EQ(transport_->attempt_count(), 1u) << "drawn too early to tell";
  clock_->AdvanceBy(absl::Milliseconds(1));  // the stall
  ASSERT_EQ(events_->stalled().size(), 1u);
  // The stall's delay is the backoff's first (100 ms, full jitter).
  clock_->AdvanceBy(absl::Milliseconds(100));
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_EQ(transport_->attempt(1)->request().after, 1u);
}

// The server ends the old attempt (its drain deadline) while the move
// still waits: the move starts at once, not after a reopen delay.
TEST_F(MigrationSpreadTest, OldAttemptEndingInTheWindowMovesAtOnce) {
  options_.reopen_after_progress_jitter = absl::Milliseconds(5);
  auto stream = StartAndDrain();
  clock_->AdvanceBy(absl::Milliseconds(100));
  auto old = transport_->attempt(0);
  old->Send(M(2));
  old->Finish(absl::UnavailableError("drain deadline"));
  ASSERT_EQ(transport_->attempt_count(), 2u) << "the end added a delay";
  auto fresh = transport_->attempt(1);
  EXPECT_EQ(fresh->request().after, 2u);
  EXPECT_NE(fresh->connection_id(), old->connection_id());
  // The window's timer is gone: no third attempt later.
  clock_->AdvanceBy(kWindow);
  EXPECT_EQ(transport_->attempt_count(), 2u);
  fresh->Send(M(3));
  EXPECT_THAT(got(), ElementsAre(1, 2, 3));
  EXPECT_TRUE(done().empty());
}

// The same for a quiet stream that settled (healthy, nothing new since):
// no failure's backoff either.
TEST_F(MigrationSpreadTest, QuietAttemptEndingInTheWindowMovesAtOnce) {
  auto stream = Start(SeqSpec());
  auto old = transport_->attempt(0);
  clock_->AdvanceBy(absl::Seconds(1));  // attempt_settle_time: healthy
  source_->Drain(old->connection_id());
  ASSERT_EQ(transport_->attempt_count(), 1u);
  old->Finish(absl::UnavailableError("drain deadline"));
  ASSERT_EQ(transport_->attempt_count(), 2u) << "the end added a delay";
  EXPECT_TRUE(events_->backoffs().empty());
}

// A failure (not a drain) of the old attempt in the window is a failure:
// the stream reopens after the backoff as it would without a window.
TEST_F(MigrationSpreadTest, FailureInTheWindowBacksOff) {
  auto stream = Start(SeqSpec());
  auto old = transport_->attempt(0);
  clock_->AdvanceBy(absl::Seconds(1));  // healthy, nothing new since
  source_->Drain(old->connection_id());
  old->Finish(absl::InternalError("bug"));
  EXPECT_EQ(transport_->attempt_count(), 1u);
  ASSERT_EQ(events_->backoffs().size(), 1u);
}

// While its move waits, the old attempt delivers; the move resumes after
// what was delivered, and the overlap repeats and loses nothing.
TEST_F(MigrationSpreadTest, NothingLostOrRepeatedWhileWaiting) {
  auto stream = StartAndDrain();
  auto old = transport_->attempt(0);
  old->Send(M(2));
  old->Send(M(3));
  EXPECT_THAT(got(), ElementsAre(1, 2, 3));
  clock_->AdvanceBy(kWindow);
  ASSERT_EQ(transport_->attempt_count(), 2u);
  auto fresh = transport_->attempt(1);
  EXPECT_EQ(fresh->request().after, 3u);
  old->Send(M(4));  // held: the replacement sends it again
  fresh->Send(M(4));
  fresh->Send(M(5));
  EXPECT_TRUE(old->cancelled());
  EXPECT_THAT(got(), ElementsAre(1, 2, 3, 4, 5));
  EXPECT_EQ(stream->stats().duplicates_dropped, 0u);
  EXPECT_EQ(stream->stats().migrations, 1u);
  EXPECT_THAT(events_->reasons(),
              ElementsAre(AttemptReason::kFirst, AttemptReason::kMigration));
}

// A stream cancelled while its move waits ends at once; the window's timer
// starts nothing later.
TEST_F(MigrationSpreadTest, CancelWhileWaitingEndsTheStream) {
  auto stream = StartAndDrain();
  stream->Cancel();
  clock_->AdvanceBy(kWindow);
  EXPECT_EQ(transport_->attempt_count(), 1u);
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kCancelled);
}

TEST_F(MigrationSpreadTest, TheWindowIsValidatedAtItsExtremes) {
  auto error = [&](absl::Duration window) {
    options_.migration_jitter = window;
    return Stream::Open(source_, SeqSpec(), options_).status();
  };
  EXPECT_TRUE(error(absl::ZeroDuration()).ok());
  EXPECT_TRUE(error(absl::Nanoseconds(1)).ok());
  EXPECT_TRUE(error(ReconnectingStreamOptions::kMaxMigrationJitter).ok());
  const std::size_t started = transport_->attempt_count();
  for (absl::Duration bad :
       {-absl::Nanoseconds(1), -absl::InfiniteDuration(),
        ReconnectingStreamOptions::kMaxMigrationJitter + absl::Nanoseconds(1),
        absl::InfiniteDuration()}) {
    const absl::Status s = error(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("ReconnectingStreamOptions.migration_jitter must be "
                          "in [0, 1m]"));
  }
  EXPECT_EQ(transport_->attempt_count(), started) << "a rejected one started";
}

}  // namespace
}  // namespace stream_test
}  // namespace tether
