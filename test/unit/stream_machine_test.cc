// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Rules of the stream machine that hold for both kinds of stream: the
// reason each attempt reports, bidi writes across a move, and resyncs that
// run side by side (server pushback: pushback_test.cc). Fake attempts, fake
// connections, a fake clock; a resync runs on tether's threads, so those
// tests wait for it on events with a deadline, never a sleep.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/stream_fixture.h"
#include "tether/resync_pool.h"

namespace tether {
namespace stream_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class StreamMachineTest : public StreamFixture {};

// --- The attempt after a resync says so ------------------------------------

TEST_F(StreamMachineTest, TheAttemptAfterAResyncReportsReasonResync) {
  auto resynced = std::make_shared<Event>();
  auto stream = Start(WithResync(SeqSpec(), [resynced](ResyncDone done) {
    done(40);  // starts the next attempt, on this thread
    resynced->Signal();
  }));
  transport_->attempt(0)->Send(M(1));
  transport_->attempt(0)->Finish(absl::OutOfRangeError("compacted"));
  ASSERT_TRUE(resynced->Wait(kWaitLimit));
  std::shared_ptr<Transport::FakeAttempt> next = transport_->attempt(1);
  ASSERT_TRUE(next) << "no attempt after the resync";
  EXPECT_EQ(next->request().after, 40u);
  EXPECT_EQ(next->info().reason, AttemptReason::kResync);
  EXPECT_THAT(events_->reasons(),
              ElementsAre(AttemptReason::kFirst, AttemptReason::kResync));
}

TEST_F(StreamMachineTest, AnEndThatAsksForAResyncIsReportedAsSuch) {
  auto resynced = std::make_shared<Event>();
  auto stream = Start(WithResync(SeqSpec(), [resynced](ResyncDone done) {
    done(40);
    resynced->Signal();
  }));
  transport_->attempt(0)->Finish(absl::OutOfRangeError("compacted"));
  ASSERT_TRUE(resynced->Wait(kWaitLimit));
  auto ended = events_->ended();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(ended[0].cls, EndClass::kResync);  // not "ok": it did not end
  EXPECT_FALSE(ended[0].by_client);
  EXPECT_EQ(EndClassName(EndClass::kResync), "resync");
}

TEST_F(StreamMachineTest, AClassifierThatAnswersResyncIsTakenAsTransient) {
  options_.classifier = [](const AttemptEnd&) { return EndClass::kResync; };
  auto stream = Start(SeqSpec());  // no resync hook at all
  transport_->attempt(0)->Send(M(1));
  transport_->attempt(0)->Finish(absl::InternalError("odd"));
  clock_->RunDue();
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_EQ(transport_->attempt(1)->request().after, 1u);
  ASSERT_EQ(events_->ended().size(), 1u);
  EXPECT_EQ(events_->ended()[0].cls, EndClass::kTransient);
  EXPECT_TRUE(done().empty());
}

// --- Spec checks -------------------------------------------------------------

TEST_F(StreamMachineTest, AStartPositionNeedsIntegerPositions) {
  Stream::Spec spec;
  spec.attempt_factory = transport_;
  spec.initial_last_seq = 5;  // nothing to compare it with
  const absl::Status s = StartError(std::move(spec));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("StreamSpec.initial_last_seq needs sequence_of or "
                        "position_of"));
  EXPECT_EQ(transport_->attempt_count(), 0u);
  BidiStream::Spec bidi = BidiSpec();
  bidi.position_of = nullptr;
  bidi.initial_position = 5;
  EXPECT_THAT(std::string(StartError(std::move(bidi)).message()),
              HasSubstr("BidiStreamSpec.initial_position needs sequence_of or "
                        "position_of"));
}

// --- Bidi writes
// --------------------------------------------------------------

// Drains connection `id` from inside the observer's report of an attempt
// starting there: the interleaving in which a replacement is cancelled
// before its start has run, and the stream moves on to another.
class DrainWhenStartedOn final : public StreamObserver {
 public:
  DrainWhenStartedOn(std::shared_ptr<fakes::FakeConnectionSource> source,
                     std::uint64_t id)
      : source_(std::move(source)), id_(id) {}
  void OnAttemptStarted(const AttemptInfo& info) override {
    if (info.connection_id == id_ && !fired_.exchange(true)) {
      source_->Drain(id_);
    }
  }

 private:
  const std::shared_ptr<fakes::FakeConnectionSource> source_;
  const std::uint64_t id_;
  std::atomic<bool> fired_{false};
};

TEST_F(StreamMachineTest, ACancelledReplacementNeverTakesTheOutbox) {
  options_.observer = std::make_shared<DrainWhenStartedOn>(source_, 2);
  auto stream = StartBidi(BidiSpec());
  auto first = bidi_->attempt(0);
  first->Send(M(1));
  ASSERT_TRUE(stream->Write(W(1)).ok());
  // Connection 1 drains: the replacement lands on 2, which drains as it
  // starts; the stream falls back and moves again, to 3, before the
  // cancelled replacement's own start has run.
  source_->Drain(1);
  clock_->RunDue();  // the cancelled replacement ends
  ASSERT_EQ(bidi_->attempt_count(), 3u);
  std::shared_ptr<BidiTransport::FakeAttempt> live;
  std::size_t live_index = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    if (bidi_->attempt(i)->connection_id() == 3) {
      live = bidi_->attempt(i);
      live_index = i;
    }
  }
  ASSERT_TRUE(live);
  live->Send(M(2));  // the hand-off: the first attempt retires
  clock_->RunDue();
  ASSERT_TRUE(stream->Write(W(2)).ok());
  stream->WritesDone();
  EXPECT_THAT(bidi_->writes(live_index), ElementsAre(Open(1), W(1), W(2)));
  EXPECT_TRUE(bidi_->half_closed(live_index));
  live->Send(Ack(1));
  live->Send(Ack(2));
  EXPECT_EQ(stream->outbox_size(), 0u);
  EXPECT_THAT(got(), ElementsAre(1, 2));
  EXPECT_TRUE(done().empty());
}

TEST_F(StreamMachineTest, OnWritableSetAfterTheRoomCameBackRunsAtOnce) {
  options_.max_outbox = 1;
  auto stream = StartBidi(BidiSpec());
  ASSERT_TRUE(stream->Write(W(1)).ok());
  EXPECT_EQ(stream->Write(W(2)).code(), absl::StatusCode::kResourceExhausted);
  bidi_->attempt(0)->Send(Ack(1));  // room, before the app asks to be told
  Event woke;
  stream->SetOnWritable([&woke] { woke.Signal(); });
  EXPECT_TRUE(woke.Wait(absl::ZeroDuration()));
  EXPECT_TRUE(stream->Write(W(2)).ok());
}

TEST_F(StreamMachineTest, OnWritableWaitsWhileTheOutboxIsFull) {
  options_.max_outbox = 1;
  auto stream = StartBidi(BidiSpec());
  Event early;
  stream->SetOnWritable([&early] { early.Signal(); });  // nothing refused yet
  EXPECT_FALSE(early.Wait(absl::ZeroDuration()));
  ASSERT_TRUE(stream->Write(W(1)).ok());
  EXPECT_EQ(stream->Write(W(2)).code(), absl::StatusCode::kResourceExhausted);
  Event woke;
  stream->SetOnWritable([&woke] { woke.Signal(); });
  EXPECT_FALSE(woke.Wait(absl::ZeroDuration()));  // still full
  bidi_->attempt(0)->Send(Ack(1));
  EXPECT_TRUE(woke.Wait(absl::ZeroDuration()));
  EXPECT_FALSE(early.Wait(absl::ZeroDuration()));
}

// --- Resyncs run side by side ----------------------------------------------

// Everything a resync that hangs shares with the test (it may outlive it).
struct HungResync {
  Event entered;
  Event release;
  Event returned;
};

// A resync that blocks until the test releases it (or for longer than the
// test waits for anything else), and never calls `done`.
std::function<void(ResyncDone)> Hang(std::shared_ptr<HungResync> hung) {
  return [hung](ResyncDone) {
    hung->entered.Signal();
    hung->release.Wait(4 * kWaitLimit);
    hung->returned.Signal();
  };
}

// Stream A's resync hangs; then stream B (its own transport and recorder)
// asks for one that answers at once (resume after 100).
struct TwoResyncs {
  std::shared_ptr<HungResync> hung = std::make_shared<HungResync>();
  std::shared_ptr<Transport> other;
  std::shared_ptr<Recorder> other_rec = std::make_shared<Recorder>();
  std::shared_ptr<Event> b_called = std::make_shared<Event>();
  std::unique_ptr<Stream> a;
  std::unique_ptr<Stream> b;
};

class ResyncsSideBySideTest : public StreamMachineTest {
 protected:
  // Starts both; returns once A's resync runs and B's end asked for one.
  TwoResyncs StartBoth() {
    options_.max_time_without_progress = absl::InfiniteDuration();
    TwoResyncs t;
    t.other = std::make_shared<Transport>(source_, clock_);
    Stream::Spec b_spec =
        WithResync(SeqSpec(), [called = t.b_called](ResyncDone done) {
          done(100);
          called->Signal();
        });
    b_spec.attempt_factory = t.other;
    t.a = Start(WithResync(SeqSpec(), Hang(t.hung)));
    t.b = Start(std::move(b_spec), t.other_rec);
    transport_->attempt(0)->Finish(absl::OutOfRangeError("compacted"));
    EXPECT_TRUE(t.hung->entered.Wait(kWaitLimit));
    t.other->attempt(0)->Finish(absl::OutOfRangeError("compacted"));
    return t;
  }
};

TEST_F(ResyncsSideBySideTest, AHungResyncBlocksNoOtherStream) {
  TwoResyncs t = StartBoth();
  EXPECT_TRUE(t.b_called->Wait(kWaitLimit)) << "B's resync waited for A's";
  t.hung->release.Signal();
  EXPECT_TRUE(t.hung->returned.Wait(kWaitLimit));
  clock_->RunDue();
  ASSERT_EQ(t.other->attempt_count(), 2u);
  EXPECT_EQ(t.other->attempt(1)->request().after, 100u);
  EXPECT_TRUE(t.other_rec->done().empty());
}

TEST_F(ResyncsSideBySideTest, TheResyncPoolBoundsHowManyRunAtOnce) {
  ResyncPoolOptions pool_options;
  pool_options.max_threads = 1;
  auto pool = ResyncPool::Create(pool_options);
  ASSERT_TRUE(pool.ok()) << pool.status();
  options_.resync_pool = *pool;
  TwoResyncs t = StartBoth();
  // B's resync waits for the pool's only thread.
  EXPECT_EQ((*pool)->queued(), 1u);
  EXPECT_EQ((*pool)->running(), 1u);
  EXPECT_FALSE(t.b_called->Wait(absl::ZeroDuration()));
  t.hung->release.Signal();
  EXPECT_TRUE(t.b_called->Wait(kWaitLimit));
  EXPECT_TRUE(t.hung->returned.Wait(kWaitLimit));
}

// An inline pool runs each resync on the thread that asks for it: under a
// fake clock the whole resync happens within the call that ended the
// attempt, with no other thread (what a deterministic simulation needs).
TEST_F(StreamMachineTest, AnInlinePoolResyncsOnTheAskingThread) {
  std::shared_ptr<ResyncPool> pool = ResyncPool::Inline();
  EXPECT_EQ(pool->max_threads(), 0);
  options_.resync_pool = pool;
  const std::thread::id test_thread = std::this_thread::get_id();
  std::thread::id resync_thread;
  auto stream = Start(WithResync(SeqSpec(), [&](ResyncDone done) {
    resync_thread = std::this_thread::get_id();
    EXPECT_EQ(pool->running(), 1u);
    done(40);
  }));
  transport_->attempt(0)->Send(M(1));
  transport_->attempt(0)->Finish(absl::OutOfRangeError("compacted"));
  EXPECT_EQ(resync_thread, test_thread);
  ASSERT_EQ(transport_->attempt_count(), 2u);
  EXPECT_EQ(transport_->attempt(1)->request().after, 40u);
  EXPECT_EQ(transport_->attempt(1)->info().reason, AttemptReason::kResync);
  EXPECT_EQ(pool->running(), 0u);
  EXPECT_EQ(pool->queued(), 0u);
}

TEST(ResyncPoolTest, MaxThreadsIsValidatedAtItsExtremes) {
  for (int bad : {0, -1, 1025, std::numeric_limits<int>::max(),
                  std::numeric_limits<int>::min()}) {
    ResyncPoolOptions o;
    o.max_threads = bad;
    auto pool = ResyncPool::Create(o);
    ASSERT_FALSE(pool.ok()) << bad;
    EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(
        std::string(pool.status().message()),
        HasSubstr("ResyncPoolOptions.max_threads must be in [1, 1024]"));
  }
  for (int good : {1, 1024}) {
    ResyncPoolOptions o;
    o.max_threads = good;
    auto pool = ResyncPool::Create(o);
    ASSERT_TRUE(pool.ok()) << pool.status();
    EXPECT_EQ((*pool)->max_threads(), good);
  }
  EXPECT_EQ(ResyncPool::Default()->max_threads(),
            ResyncPoolOptions().max_threads);
}

// --- A pool whose workers live on the fake clock ----------------------------

// Two streams that resync on `pool`: A's listing keeps its `done` (it hangs
// until the test answers), B's answers at once (resume after 100).
struct ClockResyncs {
  std::shared_ptr<ResyncDone> a_done = std::make_shared<ResyncDone>();
  std::shared_ptr<int> b_calls = std::make_shared<int>(0);
  std::shared_ptr<Transport> other;
  std::unique_ptr<Stream> a;
  std::unique_ptr<Stream> b;
};

class ClockPoolTest : public StreamMachineTest {
 protected:
  std::shared_ptr<ResyncPool> Pool(int workers) {
    ResyncPoolOptions o;
    o.max_threads = workers;
    auto pool = ResyncPool::OnClock(o, clock_);
    EXPECT_TRUE(pool.ok()) << pool.status();
    return *pool;
  }
  // Both streams end their first attempt asking for a resync, A first.
  ClockResyncs StartBoth(const std::shared_ptr<ResyncPool>& pool) {
    options_.resync_pool = pool;
    options_.max_time_without_progress = absl::InfiniteDuration();
    ClockResyncs t;
    t.other = std::make_shared<Transport>(source_, clock_);
    Stream::Spec b_spec =
        WithResync(SeqSpec(), [calls = t.b_calls](ResyncDone done) {
          ++*calls;
          done(100);
        });
    b_spec.attempt_factory = t.other;
    t.a = Start(WithResync(SeqSpec(), [keep = t.a_done](ResyncDone done) {
      *keep = std::move(done);
    }));
    t.b = Start(std::move(b_spec));
    transport_->attempt(0)->Finish(absl::OutOfRangeError("compacted"));
    clock_->RunDue();
    t.other->attempt(0)->Finish(absl::OutOfRangeError("compacted"));
    clock_->RunDue();
    return t;
  }
  // B's listing ran once and its next attempt resumes after 100.
  static void ExpectBResynced(const ClockResyncs& t) {
    EXPECT_EQ(*t.b_calls, 1) << "B's resync waited for A's";
    ASSERT_EQ(t.other->attempt_count(), 2u);
    EXPECT_EQ(t.other->attempt(1)->request().after, 100u);
  }
};

TEST_F(ClockPoolTest, AHungListingDelaysNoOtherStreamWhileAWorkerIsFree) {
  auto pool = Pool(2);
  ClockResyncs t = StartBoth(pool);
  ASSERT_TRUE(*t.a_done) << "A's resync never ran";
  ExpectBResynced(t);
  EXPECT_EQ(pool->running(), 1u);  // A's listing holds its worker
  EXPECT_EQ(pool->queued(), 0u);
}

TEST_F(ClockPoolTest, AResyncHoldsItsWorkerUntilItAnswers) {
  auto pool = Pool(1);
  ClockResyncs t = StartBoth(pool);
  ASSERT_TRUE(*t.a_done);
  // One worker, held by A's listing: B's resync waits, in order.
  EXPECT_EQ(*t.b_calls, 0);
  EXPECT_EQ(pool->running(), 1u);
  EXPECT_EQ(pool->queued(), 1u);
  clock_->AdvanceBy(absl::Hours(1));
  EXPECT_EQ(*t.b_calls, 0);
  (*t.a_done)(40);  // A's listing answers: its worker goes to B
  EXPECT_EQ(transport_->attempt(1)->request().after, 40u);
  clock_->RunDue();
  ExpectBResynced(t);
  EXPECT_EQ(pool->running(), 0u);
  EXPECT_EQ(pool->queued(), 0u);
}

TEST_F(ClockPoolTest, ADroppedDoneGivesItsWorkerBack) {
  auto pool = Pool(1);
  ClockResyncs t = StartBoth(pool);
  ASSERT_TRUE(*t.a_done);
  *t.a_done = nullptr;  // A's listing gives up without an answer
  clock_->RunDue();
  ExpectBResynced(t);
  EXPECT_EQ(pool->running(), 0u);
}

TEST_F(ClockPoolTest, ATaskRunHoldsItsWorkerUntilItReturns) {
  auto pool = Pool(1);
  std::vector<int> ran;
  pool->Run([&ran] { ran.push_back(1); });
  pool->Run([&ran] { ran.push_back(2); });
  EXPECT_TRUE(ran.empty());  // on the clock, not inside Run
  EXPECT_EQ(pool->queued(), 1u);
  clock_->RunDue();
  EXPECT_THAT(ran, ElementsAre(1, 2));
  EXPECT_EQ(pool->running(), 0u);
  EXPECT_EQ(pool->max_threads(), 1);
}

TEST(ResyncPoolTest, OnClockIsValidatedAtItsExtremes) {
  auto clock = std::make_shared<fakes::FakeClock>();
  for (int bad : {0, -1, 1025, std::numeric_limits<int>::max(),
                  std::numeric_limits<int>::min()}) {
    ResyncPoolOptions o;
    o.max_threads = bad;
    auto pool = ResyncPool::OnClock(o, clock);
    ASSERT_FALSE(pool.ok()) << bad;
    EXPECT_THAT(
        std::string(pool.status().message()),
        HasSubstr("ResyncPoolOptions.max_threads must be in [1, 1024]"));
  }
  auto none = ResyncPool::OnClock(ResyncPoolOptions(), nullptr);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("clock"));
  for (int good : {1, 1024}) {
    ResyncPoolOptions o;
    o.max_threads = good;
    auto pool = ResyncPool::OnClock(o, clock);
    ASSERT_TRUE(pool.ok()) << pool.status();
    EXPECT_EQ((*pool)->max_threads(), good);
  }
}

TEST(ResyncPoolTest, RunsEveryTaskItIsGiven) {
  ResyncPoolOptions o;
  o.max_threads = 3;
  auto pool = ResyncPool::Create(o).value();
  std::mutex mu;
  std::condition_variable cv;
  int ran = 0;
  for (int i = 0; i < 50; ++i) {
    pool->Run([&] {
      std::lock_guard<std::mutex> l(mu);
      ++ran;
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> l(mu);
  EXPECT_TRUE(cv.wait_for(l, absl::ToChronoNanoseconds(kWaitLimit),
                          [&] { return ran == 50; }));
}

}  // namespace
}  // namespace stream_test
}  // namespace tether
