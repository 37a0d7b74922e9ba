// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Logic tests of general positions (sparse, batches, progress, None, opaque
// cursors) and resync on ReconnectingStream: fake attempts, fake
// connections, a fake clock. A resync runs on tether's worker thread: those
// tests wait for it on events with a deadline, never a sleep.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tether/position.h"
#include "tether/reconnecting_stream.h"
#include "tether/testing/fake_clock.h"
#include "tether/testing/fake_transport.h"

namespace tether {
namespace {

// A one-shot event on std::mutex (Debian's abseil is not TSan-built, so
// TSan could not see Notification's synchronization).
class Notification {
 public:
  void Notify() {
    std::lock_guard<std::mutex> l(mu_);
    done_ = true;
    cv_.notify_all();
  }
  bool WaitForNotificationWithTimeout(absl::Duration timeout) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, absl::ToChronoNanoseconds(timeout),
                        [this] { return done_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Req {
  std::uint64_t after = 0;
  bool has_cursor = false;
  std::string cursor;
};

// One response: items at positions (a batch when several), a progress
// notice, a control message, a cursor, or a "cannot resume" message.
struct Resp {
  enum Kind { kItems, kProgress, kNone, kResync, kBackwardsBatch } kind = kItems;
  std::vector<std::uint64_t> items;
  std::uint64_t at = 0;
  std::string cursor;
};

Resp Items(std::vector<std::uint64_t> items) {
  Resp r;
  r.items = std::move(items);
  return r;
}
Resp Progress(std::uint64_t at) {
  Resp r;
  r.kind = Resp::kProgress;
  r.at = at;
  return r;
}
Resp Control() {
  Resp r;
  r.kind = Resp::kNone;
  return r;
}
Resp Cannot() {
  Resp r;
  r.kind = Resp::kResync;
  return r;
}
Resp Cur(std::string c) {
  Resp r;
  r.cursor = std::move(c);
  return r;
}

Position PositionOf(const Resp& r) {
  switch (r.kind) {
    case Resp::kProgress:
      return Position::Progress(r.at);
    case Resp::kNone:
    case Resp::kResync:
      return Position::None();
    case Resp::kBackwardsBatch:
      return Position::Items(9, 3);
    case Resp::kItems:
      break;
  }
  if (r.items.size() == 1) return Position::Item(r.items[0]);
  return Position::Items(r.items.front(), r.items.back());
}

using Stream = ReconnectingStream<Req, Resp>;
using Transport = fakes::FakeTransport<Req, Resp>;

class Observer : public StreamObserver {
 public:
  void OnResync(const absl::Status& why, std::uint64_t after) override {
    std::lock_guard<std::mutex> l(mu);
    resyncs.push_back({why.code(), after});
  }
  void OnDuplicateDropped(std::uint64_t, std::uint64_t) override {
    std::lock_guard<std::mutex> l(mu);
    ++duplicates;
  }
  void OnGap(std::uint64_t, std::uint64_t) override {
    std::lock_guard<std::mutex> l(mu);
    ++gaps;
  }
  std::mutex mu;
  std::vector<std::pair<absl::StatusCode, std::uint64_t>> resyncs;
  int duplicates = 0;
  int gaps = 0;
};

class PositionsTest : public ::testing::Test {
 protected:
  PositionsTest()
      : clock_(std::make_shared<fakes::FakeClock>()),
        source_(std::make_shared<fakes::FakeConnectionSource>()),
        transport_(std::make_shared<Transport>(source_, clock_)),
        observer_(std::make_shared<Observer>()) {
    options_.clock = clock_;
    options_.observer = observer_;
    options_.random_seed = 7;
    options_.reopen_after_progress_jitter = absl::ZeroDuration();
  }

  void TearDown() override { clock_->RunDue(); }

  Stream::Spec PositionSpec() {
    Stream::Spec spec;
    spec.attempt_factory = transport_;
    spec.position_of = PositionOf;
    spec.spacing = PositionSpacing::kSparse;
    spec.resume_after = [](Req& r, std::uint64_t after) { r.after = after; };
    spec.trim_delivered = [](Resp& r, std::uint64_t last) {
      std::vector<std::uint64_t> kept;
      for (std::uint64_t i : r.items) {
        if (i > last) kept.push_back(i);
      }
      r.items = kept;
    };
    return spec;
  }

  Stream::Spec CursorSpec() {
    Stream::Spec spec;
    spec.attempt_factory = transport_;
    spec.cursor_of = [](const Resp& r) -> absl::optional<std::string> {
      if (r.cursor.empty()) return absl::nullopt;
      return r.cursor;
    };
    spec.resume_from_cursor = [](Req& r, const std::string& c) {
      r.has_cursor = true;
      r.cursor = c;
    };
    return spec;
  }

  // Adds a resync triggered by `Cannot()` messages and by OUT_OF_RANGE ends;
  // `resync` is the app's.
  void AddResync(Stream::Spec& spec, std::function<void(ResyncDone)> resync) {
    spec.resync_on_message = [](const Resp& r) {
      return r.kind == Resp::kResync;
    };
    spec.resync_on_end = [](const absl::Status& s) {
      return s.code() == absl::StatusCode::kOutOfRange;
    };
    spec.resync = std::move(resync);
  }

  std::unique_ptr<Stream> StartStream(Stream::Spec spec) {
    auto s = Stream::Start(
        source_, std::move(spec), options_,
        [this](Resp&& r) {
          std::lock_guard<std::mutex> l(mu_);
          if (r.kind == Resp::kProgress) {
            got_.push_back("p" + std::to_string(r.at));
          } else if (r.kind == Resp::kNone) {
            got_.push_back("none");
          } else if (!r.cursor.empty()) {
            got_.push_back(r.cursor);
          } else {
            for (std::uint64_t i : r.items) got_.push_back(std::to_string(i));
          }
        },
        [this](const absl::Status& s) {
          std::lock_guard<std::mutex> l(mu_);
          done_.push_back(s);
          cv_.notify_all();
        });
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  std::vector<std::string> got() {
    std::lock_guard<std::mutex> l(mu_);
    return got_;
  }
  std::vector<absl::Status> done() {
    std::lock_guard<std::mutex> l(mu_);
    return done_;
  }
  // A server whose every attempt asks for a resync once the attempt is
  // `age` old (and healthy: it settled). Returns the resyncs that ran, after
  // at most `rounds` of them or the stream's end. The resync's `done` is
  // called from the test thread, so each next attempt starts here, in order
  // with the clock.
  int ResyncEachAttemptAtAge(absl::Duration age, std::size_t rounds);

  // Waits (bounded) until the stream's end has been reported.
  bool WaitDone() {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(30),
                        [this] { return !done_.empty(); });
  }

  std::shared_ptr<fakes::FakeClock> clock_;
  std::shared_ptr<fakes::FakeConnectionSource> source_;
  std::shared_ptr<Transport> transport_;
  std::shared_ptr<Observer> observer_;
  ReconnectingStreamOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> got_;
  std::vector<absl::Status> done_;
};

TEST_F(PositionsTest, SparsePositionsHaveNoGapsAndResumeAfterTheLast) {
  auto stream = StartStream(PositionSpec());
  auto first = transport_->attempt(0);
  first->Send(Items({10}));
  first->Send(Items({20}));
  first->Send(Items({35}));
  first->Finish(absl::UnavailableError("bye"));
  clock_->RunDue();
  ASSERT_EQ(transport_->attempt_count(), 2u);
  auto second = transport_->attempt(1);
  EXPECT_EQ(second->request().after, 35u);
  second->Send(Items({20}));  // a replay: duplicate
  second->Send(Items({35}));
  second->Send(Items({50}));
  EXPECT_THAT(got(), ElementsAre("10", "20", "35", "50"));
  EXPECT_EQ(stream->stats().gaps, 0u);
  EXPECT_EQ(observer_->gaps, 0);
  EXPECT_EQ(stream->stats().duplicates_dropped, 2u);
  EXPECT_EQ(stream->stats().last_delivered_seq, 50u);
}

TEST_F(PositionsTest, DenseSpacingStillReportsGapsWithPositionOf) {
  Stream::Spec spec = PositionSpec();
  spec.spacing = PositionSpacing::kDense;
  auto stream = StartStream(std::move(spec));
  transport_->attempt(0)->Send(Items({1}));
  transport_->attempt(0)->Send(Items({4, 5}));
  EXPECT_THAT(got(), ElementsAre("1", "4", "5"));
  EXPECT_EQ(stream->stats().gaps, 1u);
}

// A migration's overlap returns a batch that
// straddles the last delivered position; each item is delivered once.
TEST_F(PositionsTest, BatchStraddlingAMigrationOverlapIsTrimmed) {
  options_.migration_hold_fallback = false;  // the old attempt delivers on
  auto stream = StartStream(PositionSpec());
  auto old = transport_->attempt(0);
  old->Send(Items({1, 2, 3}));
  source_->Drain(old->connection_id());
  ASSERT_EQ(transport_->attempt_count(), 2u);
  auto fresh = transport_->attempt(1);
  EXPECT_EQ(fresh->request().after, 3u);
  // The old attempt delivers on during the overlap...
  old->Send(Items({4, 6}));
  // ...so the replacement's first batch (it resumed after 3) straddles 6.
  fresh->Send(Items({4, 6, 7, 9}));
  EXPECT_TRUE(old->cancelled());
  fresh->Send(Items({9}));      // duplicate
  fresh->Send(Items({10, 12}));
  EXPECT_THAT(got(), ElementsAre("1", "2", "3", "4", "6", "7", "9", "10", "12"));
  EXPECT_EQ(stream->stats().last_delivered_seq, 12u);
  EXPECT_EQ(stream->stats().duplicates_dropped, 1u);
  EXPECT_TRUE(done().empty());
}

TEST_F(PositionsTest, BatchWhollyDeliveredIsADuplicate) {
  auto stream = StartStream(PositionSpec());
  auto a = transport_->attempt(0);
  a->Send(Items({1, 2, 3}));
  a->Finish(absl::UnavailableError("bye"));
  clock_->RunDue();
  transport_->attempt(1)->Send(Items({2, 3}));
  transport_->attempt(1)->Send(Items({4}));
  EXPECT_THAT(got(), ElementsAre("1", "2", "3", "4"));
  EXPECT_EQ(stream->stats().duplicates_dropped, 1u);
}

TEST_F(PositionsTest, StraddlingBatchWithoutTrimHookEndsTheStream) {
  Stream::Spec spec = PositionSpec();
  spec.trim_delivered = nullptr;
  auto stream = StartStream(std::move(spec));
  auto a = transport_->attempt(0);
  a->Send(Items({1, 2, 3}));
  a->Finish(absl::UnavailableError("bye"));
  clock_->RunDue();
  transport_->attempt(1)->Send(Items({3, 4}));
  clock_->RunDue();
  EXPECT_THAT(got(), ElementsAre("1", "2", "3"));
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(done()[0].message()), HasSubstr("trim_delivered"));
}

TEST_F(PositionsTest, ProgressMovesTheResumePositionWithoutDelivering) {
  auto stream = StartStream(PositionSpec());
  auto a = transport_->attempt(0);
  a->Send(Items({5}));
  a->Send(Progress(9));
  a->Send(Progress(7));  // behind: backwards within the attempt
  clock_->RunDue();
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(done()[0].message()), HasSubstr("backwards"));
  EXPECT_THAT(got(), ElementsAre("5"));
}

TEST_F(PositionsTest, ProgressOnlyAttemptResumesAfterTheProgress) {
  auto stream = StartStream(PositionSpec());
  auto a = transport_->attempt(0);
  a->Send(Items({5}));
  a->Send(Progress(9));
  a->Send(Progress(12));
  a->Finish(absl::UnavailableError("bye"));
  clock_->RunDue();
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_EQ(transport_->attempt(1)->request().after, 12u);
  EXPECT_THAT(got(), ElementsAre("5"));
  EXPECT_EQ(stream->stats().last_delivered_seq, 12u);
  EXPECT_EQ(stream->stats().messages_delivered, 1u);
  // A progress notice behind the position (a new attempt's replay) drops.
  transport_->attempt(1)->Send(Progress(10));
  transport_->attempt(1)->Send(Items({13}));
  EXPECT_THAT(got(), ElementsAre("5", "13"));
  EXPECT_TRUE(done().empty());
}

TEST_F(PositionsTest, ProgressIsDeliveredWhenAsked) {
  Stream::Spec spec = PositionSpec();
  spec.deliver_progress = true;
  auto stream = StartStream(std::move(spec));
  auto a = transport_->attempt(0);
  a->Send(Items({5}));
  a->Send(Progress(9));
  a->Send(Progress(9));  // not new: not delivered again
  EXPECT_THAT(got(), ElementsAre("5", "p9"));
}

TEST_F(PositionsTest, ControlMessagesAreDeliveredAndNeverMoveThePosition) {
  auto stream = StartStream(PositionSpec());
  auto a = transport_->attempt(0);
  a->Send(Control());
  a->Send(Items({3}));
  a->Send(Control());
  a->Finish(absl::UnavailableError("bye"));
  clock_->RunDue();
  transport_->attempt(1)->Send(Control());
  EXPECT_THAT(got(), ElementsAre("none", "3", "none", "none"));
  EXPECT_EQ(transport_->attempt(1)->request().after, 3u);
  EXPECT_EQ(stream->stats().duplicates_dropped, 0u);
}

TEST_F(PositionsTest, BackwardsBatchEndsTheStream) {
  auto stream = StartStream(PositionSpec());
  Resp bad;
  bad.kind = Resp::kBackwardsBatch;
  transport_->attempt(0)->Send(bad);
  clock_->RunDue();
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(done()[0].message()), HasSubstr("Items(9, 3)"));
}

TEST_F(PositionsTest, CursorsThroughAMigrationOverlap) {
  auto stream = StartStream(CursorSpec());
  auto old = transport_->attempt(0);
  old->Send(Cur("a"));
  old->Send(Cur("b"));
  source_->Drain(old->connection_id());
  ASSERT_EQ(transport_->attempt_count(), 2u);
  auto fresh = transport_->attempt(1);
  EXPECT_TRUE(fresh->request().has_cursor);
  EXPECT_EQ(fresh->request().cursor, "b");
  old->Send(Cur("c"));  // delivered during the overlap
  old->Send(Cur("d"));
  fresh->Send(Cur("c"));  // replays of what the old attempt delivered
  EXPECT_TRUE(old->cancelled());
  fresh->Send(Cur("d"));
  fresh->Send(Cur("e"));
  fresh->Send(Cur("c"));  // caught up: a cursor seen again is new (no order)
  EXPECT_THAT(got(), ElementsAre("a", "b", "c", "d", "e", "c"));
  EXPECT_EQ(stream->stats().duplicates_dropped, 2u);
  fresh->Finish(absl::UnavailableError("bye"));
  clock_->RunDue();
  ASSERT_EQ(transport_->attempt_count(), 3u);
  EXPECT_EQ(transport_->attempt(2)->request().cursor, "c");
}

TEST_F(PositionsTest, InitialCursorIsWhereTheFirstReopenResumesWithout) {
  Stream::Spec spec = CursorSpec();
  spec.initial_cursor = "start";
  auto stream = StartStream(std::move(spec));
  EXPECT_FALSE(transport_->attempt(0)->request().has_cursor);
  transport_->attempt(0)->Finish(absl::UnavailableError("bye"));
  clock_->AdvanceToNextTimer();
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_EQ(transport_->attempt(1)->request().cursor, "start");
}

// --- Resync ----------------------------------------------------------------

TEST_F(PositionsTest, ResyncOnMessageResumesAfterTheNewPosition) {
  Notification called;
  Stream::Spec spec = PositionSpec();
  AddResync(spec, [&](ResyncDone done) {
    done(100);
    called.Notify();
  });
  auto stream = StartStream(std::move(spec));
  auto a = transport_->attempt(0);
  a->Send(Items({1}));
  a->Send(Items({2}));
  a->Send(Cannot());
  EXPECT_TRUE(a->cancelled());
  ASSERT_TRUE(called.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_EQ(transport_->attempt_count(), 2u);
  auto b = transport_->attempt(1);
  EXPECT_EQ(b->request().after, 100u);
  b->Send(Items({50}));  // at or below the new baseline: a duplicate
  b->Send(Items({101}));
  EXPECT_THAT(got(), ElementsAre("1", "2", "101"));
  EXPECT_EQ(stream->stats().resyncs, 1u);
  ASSERT_EQ(observer_->resyncs.size(), 1u);
  EXPECT_EQ(observer_->resyncs[0].second, 100u);
  EXPECT_TRUE(done().empty());
}

TEST_F(PositionsTest, ResyncMayMoveThePositionBackwards) {
  Notification called;
  Stream::Spec spec = PositionSpec();
  AddResync(spec, [&](ResyncDone done) {
    done(1);
    called.Notify();
  });
  auto stream = StartStream(std::move(spec));
  transport_->attempt(0)->Send(Items({40}));
  transport_->attempt(0)->Finish(absl::OutOfRangeError("compacted"));
  ASSERT_TRUE(called.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_EQ(transport_->attempt(1)->request().after, 1u);
  transport_->attempt(1)->Send(Items({2}));
  EXPECT_THAT(got(), ElementsAre("40", "2"));
  ASSERT_EQ(observer_->resyncs.size(), 1u);
  EXPECT_EQ(observer_->resyncs[0].first, absl::StatusCode::kOutOfRange);
}

TEST_F(PositionsTest, ResyncErrorEndsTheStreamWithIt) {
  Notification called;
  Stream::Spec spec = PositionSpec();
  AddResync(spec, [&](ResyncDone done) {
    done(absl::PermissionDeniedError("cannot list"));
    called.Notify();
  });
  auto stream = StartStream(std::move(spec));
  transport_->attempt(0)->Send(Cannot());
  ASSERT_TRUE(called.WaitForNotificationWithTimeout(absl::Seconds(30)));
  clock_->RunDue();  // the cancelled attempt ends; then the stream does
  ASSERT_TRUE(WaitDone());
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(transport_->attempt_count(), 1u);
  EXPECT_EQ(stream->stats().resyncs, 0u);
}

TEST_F(PositionsTest, CancelDuringAPendingResyncEndsAtOnce) {
  // The events are shared with the resync, which runs on tether's worker and
  // is still inside release->Wait... when the test body ends.
  auto in_resync = std::make_shared<Notification>();
  auto release = std::make_shared<Notification>();
  auto returned = std::make_shared<Notification>();
  std::shared_ptr<ResyncDone> later = std::make_shared<ResyncDone>();
  Stream::Spec spec = PositionSpec();
  AddResync(spec, [in_resync, release, returned, later](ResyncDone done) {
    *later = done;
    in_resync->Notify();
    release->WaitForNotificationWithTimeout(absl::Seconds(30));
    returned->Notify();
  });
  auto stream = StartStream(std::move(spec));
  transport_->attempt(0)->Send(Cannot());
  ASSERT_TRUE(in_resync->WaitForNotificationWithTimeout(absl::Seconds(30)));
  stream->Cancel();  // the resync still blocks on the worker
  clock_->RunDue();
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kCancelled);
  stream.reset();  // destroy while the resync runs: returns at once
  (*later)(7);     // too late: ignored
  release->Notify();
  EXPECT_TRUE(returned->WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(transport_->attempt_count(), 1u);
  EXPECT_EQ(done().size(), 1u);  // the late done delivered nothing more
}

TEST_F(PositionsTest, ResyncThatNeverCallsDoneEndsWithinTheTimeBound) {
  options_.max_time_without_progress = absl::Minutes(2);
  Notification in_resync;
  Stream::Spec spec = PositionSpec();
  AddResync(spec, [&](ResyncDone) { in_resync.Notify(); });  // never done
  auto stream = StartStream(std::move(spec));
  transport_->attempt(0)->Send(Cannot());
  ASSERT_TRUE(in_resync.WaitForNotificationWithTimeout(absl::Seconds(30)));
  clock_->AdvanceBy(absl::Minutes(2) - absl::Milliseconds(1));
  EXPECT_TRUE(done().empty());
  clock_->AdvanceBy(absl::Milliseconds(1));
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(done()[0].message()), HasSubstr("resync"));
  EXPECT_EQ(transport_->attempt_count(), 1u);
  EXPECT_EQ(stream->stats().resyncs, 0u);
}

TEST_F(PositionsTest, ResyncsWithoutProgressSpendTheBudget) {
  options_.max_attempts_without_progress = 3;
  int calls = 0;  // guarded by mu_
  Stream::Spec spec = PositionSpec();
  AddResync(spec, [&](ResyncDone done) {
    done(0);  // starts the next attempt, which asks again (or gives up)
    std::lock_guard<std::mutex> l(mu_);
    ++calls;
    cv_.notify_all();
  });
  for (int i = 0; i < 10; ++i) {
    // A control message first (etcd's "created") is no progress.
    transport_->Expect(
        Transport::Script().Message(Control()).Message(Cannot()));
  }
  auto stream = StartStream(std::move(spec));
  // Every attempt says "cannot resume" at once: the resyncs after the first
  // wait out backoffs and count as failed attempts, until the budget ends.
  int seen = 0;
  for (int i = 0; i < 20; ++i) {
    {
      std::unique_lock<std::mutex> l(mu_);
      ASSERT_TRUE(cv_.wait_for(l, std::chrono::seconds(30), [&] {
        return calls > seen || !done_.empty();
      }));
      if (!done_.empty()) break;
      seen = calls;
    }
    clock_->AdvanceBy(absl::Seconds(11));  // the backoff (<= 10 s) first
  }
  ASSERT_TRUE(WaitDone());
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(done()[0].message()), HasSubstr("gave up"));
  std::lock_guard<std::mutex> l(mu_);
  EXPECT_GE(calls, 3);
  EXPECT_LE(calls, 4);
}

TEST_F(PositionsTest, ResyncsAskedAfterEachAttemptSettledStillEnd) {
  // Settling resets the reopen budget; the resyncs are counted on their own.
  options_.max_attempts_without_progress = 3;
  EXPECT_EQ(ResyncEachAttemptAtAge(
                options_.attempt_settle_time + absl::Milliseconds(1), 10),
            3);
  ASSERT_TRUE(WaitDone());
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(done()[0].message()),
              HasSubstr("gave up after 3 resyncs without a new item"));
  EXPECT_EQ(transport_->attempt_count(), 4u);
}

TEST_F(PositionsTest, AResyncAfterAHealthyTimeBoundStartsTheCountOver) {
  // A quiet watch that finds its position compacted after each long healthy
  // stretch is no loop: it never ends for that.
  options_.max_attempts_without_progress = 3;
  EXPECT_EQ(ResyncEachAttemptAtAge(options_.max_time_without_progress, 8), 8);
  EXPECT_TRUE(done().empty());
  EXPECT_EQ(transport_->attempt_count(), 9u);
}

int PositionsTest::ResyncEachAttemptAtAge(absl::Duration age,
                                          std::size_t rounds) {
  struct Shared {
    std::vector<ResyncDone> pending;  // guarded by the fixture's mu_
    int calls = 0;                    // likewise
  };
  auto shared = std::make_shared<Shared>();
  Stream::Spec spec = PositionSpec();
  AddResync(spec, [this, shared](ResyncDone done) {
    std::lock_guard<std::mutex> l(mu_);
    ++shared->calls;
    shared->pending.push_back(std::move(done));
    cv_.notify_all();
  });
  auto stream = StartStream(std::move(spec));
  for (std::size_t k = 0; k < rounds; ++k) {
    EXPECT_EQ(transport_->attempt_count(), k + 1);
    clock_->AdvanceBy(age);  // the attempt settles (healthy) meanwhile
    EXPECT_TRUE(done().empty());
    transport_->attempt(k)->Send(Cannot());
    // The resync runs after its backoff (<= 10 s), on tether's worker; or
    // the stream gives up (reported once the cancelled attempt is done).
    clock_->AdvanceBy(absl::Seconds(11));
    ResyncDone next;
    {
      std::unique_lock<std::mutex> l(mu_);
      const bool woke = cv_.wait_for(l, std::chrono::seconds(30), [&] {
        return !shared->pending.empty() || !done_.empty();
      });
      EXPECT_TRUE(woke);
      if (!woke || !done_.empty()) break;
      next = std::move(shared->pending.front());
      shared->pending.clear();
    }
    next(0);  // starts the next attempt on this thread
  }
  std::lock_guard<std::mutex> l(mu_);
  return shared->calls;
}

// --- Validation --------------------------------------------------------------

TEST_F(PositionsTest, InvalidSpecCombinationsAreRejected) {
  auto start = [this](Stream::Spec spec) {
    return Stream::Open(source_, std::move(spec), options_).status();
  };
  {
    Stream::Spec spec = PositionSpec();
    spec.sequence_of = [](const Resp&) -> absl::optional<std::uint64_t> {
      return 1;
    };
    absl::Status s = start(std::move(spec));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("at most one"));
  }
  {
    Stream::Spec spec = PositionSpec();
    spec.resume_after = nullptr;
    EXPECT_THAT(std::string(start(std::move(spec)).message()),
                HasSubstr("position_of is set but resume_after is empty"));
  }
  {
    Stream::Spec spec = CursorSpec();
    spec.resume_from_cursor = nullptr;
    EXPECT_THAT(std::string(start(std::move(spec)).message()),
                HasSubstr("resume_from_cursor is empty"));
  }
  {
    Stream::Spec spec = CursorSpec();
    spec.trim_delivered = [](Resp&, std::uint64_t) {};
    EXPECT_THAT(std::string(start(std::move(spec)).message()),
                HasSubstr("trim_delivered needs position_of"));
  }
  {
    Stream::Spec spec = CursorSpec();
    spec.deliver_progress = true;
    EXPECT_THAT(std::string(start(std::move(spec)).message()),
                HasSubstr("deliver_progress needs position_of"));
  }
  {
    Stream::Spec spec = PositionSpec();
    spec.resync = [](ResyncDone) {};
    EXPECT_THAT(std::string(start(std::move(spec)).message()),
                HasSubstr("neither resync_on_message nor resync_on_end"));
  }
  {
    Stream::Spec spec = PositionSpec();
    spec.resync_on_end = [](const absl::Status&) { return true; };
    EXPECT_THAT(std::string(start(std::move(spec)).message()),
                HasSubstr("resync_on_end is set but resync is empty"));
  }
  {
    Stream::Spec spec = CursorSpec();
    AddResync(spec, [](ResyncDone) {});
    EXPECT_THAT(std::string(start(std::move(spec)).message()),
                HasSubstr("resync needs integer positions"));
  }
  {
    Stream::Spec spec = PositionSpec();
    spec.position_of = nullptr;
    spec.trim_delivered = nullptr;
    spec.spacing = PositionSpacing::kDense;
    spec.initial_cursor = "x";
    spec.resume_after = nullptr;
    EXPECT_THAT(std::string(start(std::move(spec)).message()),
                HasSubstr("initial_cursor needs cursor_of"));
  }
  EXPECT_TRUE(start(PositionSpec()).ok());
  EXPECT_TRUE(start(CursorSpec()).ok());
}

TEST_F(PositionsTest, MaxOutboxExtremesAreValidated) {
  ReconnectingStreamOptions o;
  o.max_outbox = 0;
  EXPECT_EQ(Validate(o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(Validate(o).message()), HasSubstr("max_outbox"));
  o.max_outbox = (std::size_t{1} << 20) + 1;
  EXPECT_EQ(Validate(o).code(), absl::StatusCode::kInvalidArgument);
  o.max_outbox = std::size_t{1} << 20;
  EXPECT_TRUE(Validate(o).ok());
  o.max_outbox = 1;
  EXPECT_TRUE(Validate(o).ok());
}

}  // namespace
}  // namespace tether
