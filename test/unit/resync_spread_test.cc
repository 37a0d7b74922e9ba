// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Logic tests of the spread of resyncs (`ReconnectingStreamOptions::
// resync_jitter`): a mass compaction (every stream of a process must list
// again at once) reaches the listing service as a ramp, each listing still
// bounded by the resync pool, and nothing of a stream's resync contract
// changes: it resumes where the listing says, its wait is reported, a
// cancel ends it, and a hung listing still ends after its own time bound.
// Fake attempts, fake connections, the shared fixture's fake clock; the
// pool's workers live on that clock, so nothing here runs on a thread of its
// own or sleeps.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/stream_fixture.h"
#include "tether/resync_pool.h"

namespace tether {
namespace stream_test {
namespace resync_spread {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kListing = absl::Milliseconds(20);
constexpr std::uint64_t kListedUpTo = 100;

class ResyncSpreadTest : public StreamFixture {
 protected:
  // A listing that takes `kListing` on the fake clock (it holds its pool
  // worker that long) and says the state is current up to `kListedUpTo`;
  // each start is recorded.
  std::function<void(ResyncDone)> Listing() {
    return [clock = clock_, starts = starts_](ResyncDone done) {
      starts->push_back(clock->Now());
      clock->RunAfter(kListing, [done] { done(kListedUpTo); });
    };
  }

  // `n` streams, each with its own seed, on one pool of 8 workers (the
  // default pool's bound); the server compacts and ends every first
  // attempt at once. Then the clock runs for `run_for`.
  std::vector<std::unique_ptr<Stream>> CompactAll(int n,
                                                  absl::Duration run_for) {
    ResyncPoolOptions pool_options;
    pool_options.max_threads = 8;
    pool_ = ResyncPool::OnClock(pool_options, clock_).value();
    options_.resync_pool = pool_;
    std::vector<std::unique_ptr<Stream>> streams;
    for (int i = 0; i < n; ++i) {
      options_.random_seed = 1000 + i;  // each stream draws its own point
      streams.push_back(Start(WithResync(SeqSpec(), Listing())));
      transport_->attempt(i)->Send(M(1));
    }
    compacted_at_ = clock_->Now();
    for (int i = 0; i < n; ++i) {
      transport_->attempt(i)->Finish(absl::OutOfRangeError("compacted"));
    }
    clock_->AdvanceBy(run_for);
    return streams;
  }

  // Listings started in each `bucket` after the compaction.
  std::vector<int> StartsPer(absl::Duration bucket) const {
    std::vector<int> per;
    for (absl::Time t : *starts_) {
      const auto b =
          static_cast<std::size_t>((t - compacted_at_) / bucket);
      if (per.size() <= b) per.resize(b + 1, 0);
      ++per[b];
    }
    return per;
  }

  // Every stream listed once and resumed after the listing's position.
  void ExpectAllResumed(int n) {
    EXPECT_EQ(starts_->size(), static_cast<std::size_t>(n));
    ASSERT_EQ(transport_->attempt_count(), static_cast<std::size_t>(2 * n));
    for (int i = n; i < 2 * n; ++i) {
      EXPECT_EQ(transport_->attempt(i)->request().after, kListedUpTo);
      EXPECT_EQ(transport_->attempt(i)->info().reason, AttemptReason::kResync);
    }
    EXPECT_TRUE(done().empty());
    EXPECT_EQ(pool_->running(), 0u);
    EXPECT_EQ(pool_->queued(), 0u);
  }

  const std::shared_ptr<std::vector<absl::Time>> starts_ =
      std::make_shared<std::vector<absl::Time>>();
  std::shared_ptr<ResyncPool> pool_;
  absl::Time compacted_at_;
};

// Without a spread, 400 streams list as fast as the pool lets them: 8 at a
// time, 400 a second for 20 ms listings.
TEST_F(ResyncSpreadTest, WithoutASpreadEveryStreamListsAtOnceUpToThePool) {
  constexpr int kStreams = 400;
  auto streams = CompactAll(kStreams, absl::Seconds(2));
  const std::vector<int> per_100ms = StartsPer(absl::Milliseconds(100));
  ExpectAllResumed(kStreams);
  // 400 listings of 20 ms on 8 workers: all within 1 s, 40 per 100 ms.
  EXPECT_EQ(per_100ms.size(), 10u);
  EXPECT_EQ(*std::max_element(per_100ms.begin(), per_100ms.end()), 40);
}

// With a 10 s spread the same compaction is an even ramp: the pool places
// the streams in the window in van der Corput order, so each second takes
// 40 listings and each 100 ms about 4 (independent draws: 20-60 a second
// and up to 11 in some 100 ms); none after the window (plus one listing),
// every stream resumed.
TEST_F(ResyncSpreadTest, AMassCompactionListsAsARampOverTheWindow) {
  constexpr int kStreams = 400;
  options_.resync_jitter = absl::Seconds(10);
  auto streams = CompactAll(kStreams, absl::Seconds(11));
  const std::vector<int> per_second = StartsPer(absl::Seconds(1));
  const std::vector<int> per_100ms = StartsPer(absl::Milliseconds(100));
  ExpectAllResumed(kStreams);
  ASSERT_EQ(per_second.size(), 10u);  // every second of the window, no more
  for (int n : per_second) {
    EXPECT_GE(n, 38);
    EXPECT_LE(n, 42);
  }
  const int peak = *std::max_element(per_100ms.begin(), per_100ms.end());
  EXPECT_LE(peak, 6);  // 40 without the spread
  std::printf(
      "[figure] %d streams compacted at once, 10 s resync_jitter: listings "
      "per second %d..%d, peak per 100 ms %d (40 without the spread)\n",
      kStreams, *std::min_element(per_second.begin(), per_second.end()),
      *std::max_element(per_second.begin(), per_second.end()), peak);
}

TEST_F(ResyncSpreadTest, TheWaitIsReportedAsABackoffAndACancelEndsIt) {
  options_.resync_jitter = absl::Seconds(10);
  options_.resync_pool = ResyncPool::Inline();
  auto stream = Start(WithResync(SeqSpec(), Listing()));
  transport_->attempt(0)->Send(M(1));
  transport_->attempt(0)->Finish(absl::OutOfRangeError("compacted"));
  ASSERT_EQ(events_->backoffs().size(), 1u);
  const absl::Duration wait = events_->backoffs()[0];
  EXPECT_GT(wait, absl::ZeroDuration());
  EXPECT_LT(wait, absl::Seconds(10));
  clock_->AdvanceBy(wait - absl::Nanoseconds(1));
  EXPECT_TRUE(starts_->empty()) << "listed before its point";
  stream->Cancel();
  clock_->AdvanceBy(absl::Seconds(10));
  EXPECT_TRUE(starts_->empty()) << "listed after a cancel";
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kCancelled);
}

// The wait comes before the resync's own bound: a listing that hangs ends
// the stream `max_time_without_progress` after it was due to start.
TEST_F(ResyncSpreadTest, AHungListingStillEndsAfterItsOwnBound) {
  options_.resync_jitter = absl::Seconds(10);
  options_.max_time_without_progress = absl::Seconds(30);
  options_.resync_pool = ResyncPool::Inline();
  auto kept = std::make_shared<ResyncDone>();
  auto stream =
      Start(WithResync(SeqSpec(), [kept, starts = starts_, clock = clock_](
                                      ResyncDone done) {
        starts->push_back(clock->Now());
        *kept = std::move(done);  // never answers
      }));
  transport_->attempt(0)->Send(M(1));
  const absl::Time compacted = clock_->Now();
  transport_->attempt(0)->Finish(absl::OutOfRangeError("compacted"));
  const absl::Duration wait = events_->backoffs().at(0);
  clock_->AdvanceBy(wait + absl::Seconds(30) - absl::Milliseconds(1));
  ASSERT_EQ(starts_->size(), 1u);
  EXPECT_EQ((*starts_)[0] - compacted, wait);
  EXPECT_TRUE(done().empty());
  clock_->AdvanceBy(absl::Milliseconds(1));
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(ResyncSpreadTest, TheJitterIsValidatedAtItsExtremes) {
  auto error = [&](absl::Duration jitter) {
    options_.resync_jitter = jitter;
    return Stream::Open(source_, WithResync(SeqSpec(), Listing()), options_)
        .status();
  };
  EXPECT_TRUE(error(absl::ZeroDuration()).ok());
  EXPECT_TRUE(error(absl::Nanoseconds(1)).ok());
  EXPECT_TRUE(error(ReconnectingStreamOptions::kMaxResyncJitter).ok());
  const std::size_t started = transport_->attempt_count();
  for (absl::Duration bad :
       {-absl::Nanoseconds(1), -absl::InfiniteDuration(),
        ReconnectingStreamOptions::kMaxResyncJitter + absl::Nanoseconds(1),
        absl::InfiniteDuration()}) {
    const absl::Status s = error(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("ReconnectingStreamOptions.resync_jitter must be "
                          "in [0, 10m]"));
  }
  EXPECT_EQ(transport_->attempt_count(), started) << "a rejected one started";
}

}  // namespace
}  // namespace resync_spread
}  // namespace stream_test
}  // namespace tether
