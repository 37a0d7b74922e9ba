// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Regression tests for the stream core's defects: quiet streams,
// cancels that complete late, re-entrant observers, callbacks after destroy,
// make-before-break lost, throwing callbacks, the receive limit, events
// after the end. Fake attempts and a fake clock; the threads used below only
// create the interleavings that gRPC's threads create.
#include <malloc.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/stream_fixture.h"
#include "tether/circuit_breaker.h"
#include "tether/reconnecting_stream.h"

namespace tether {
namespace stream_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// An attempt whose cancel completes only when the test says so, as gRPC's
// `TryCancel` completes later: `OnEnd` comes after other events.
class LateCancelAttempt final : public Attempt {
 public:
  LateCancelAttempt(std::uint64_t connection, Req request,
                    std::shared_ptr<AttemptListener<Resp>> listener)
      : connection_(connection),
        request_(request),
        listener_(std::move(listener)) {}
  void Resume() override {}
  void Cancel() override { cancel_requested_ = true; }

  // Test side.
  bool Send(std::uint64_t seq) {
    if (done_) return false;
    return listener_->OnMessage(M(seq));
  }
  void Finish(absl::Status status) {
    if (done_) return;
    done_ = true;
    auto l = std::move(listener_);
    l->OnEnd(status, Metadata());
  }
  void CompleteCancel() {
    if (cancel_requested_) Finish(absl::CancelledError("cancelled"));
  }
  bool cancel_requested() const { return cancel_requested_; }
  bool done() const { return done_; }
  std::uint64_t connection() const { return connection_; }
  const Req& request() const { return request_; }

 private:
  const std::uint64_t connection_;
  const Req request_;
  std::shared_ptr<AttemptListener<Resp>> listener_;
  std::atomic<bool> cancel_requested_{false};
  std::atomic<bool> done_{false};
};

// Starts `LateCancelAttempt`s and hands each to `Keep`.
class LateCancelAttempts : public AttemptFactory<Req, Resp> {
 public:
  std::shared_ptr<Attempt> StartAttempt(
      const ConnectionPick& pick, const AttemptInfo& /*info*/,
      const Req& request,
      std::shared_ptr<AttemptListener<Resp>> listener) final {
    auto a = std::make_shared<LateCancelAttempt>(pick.connection_id, request,
                                                 std::move(listener));
    Keep(a);
    return a;
  }

 protected:
  virtual void Keep(std::shared_ptr<LateCancelAttempt> attempt) = 0;
};

class LateCancelFactory final : public LateCancelAttempts {
 public:
  std::shared_ptr<LateCancelAttempt> at(std::size_t i) {
    std::lock_guard<std::mutex> l(mu_);
    return i < attempts_.size() ? attempts_[i] : nullptr;
  }
  std::size_t count() {
    std::lock_guard<std::mutex> l(mu_);
    return attempts_.size();
  }

 private:
  void Keep(std::shared_ptr<LateCancelAttempt> attempt) override {
    std::lock_guard<std::mutex> l(mu_);
    attempts_.push_back(std::move(attempt));
  }

  std::mutex mu_;
  std::vector<std::shared_ptr<LateCancelAttempt>> attempts_;
};

class StreamDefectsTest : public StreamFixture {
 protected:
  StreamDefectsTest() : factory_(std::make_shared<LateCancelFactory>()) {
    options_.observer = nullptr;  // some tests count allocations
  }

  // Completes the cancels that streams destroyed by the test left pending
  // (gRPC always completes them), so no attempt keeps its stream alive.
  void TearDown() override {
    for (std::size_t i = 0; i < factory_->count(); ++i) {
      factory_->at(i)->CompleteCancel();
    }
    StreamFixture::TearDown();
  }

  Stream::Spec Spec() {
    Stream::Spec spec = SeqSpec();
    spec.attempt_factory = factory_;
    return spec;
  }
  using StreamFixture::Start;
  std::unique_ptr<Stream> Start() { return Start(Spec()); }

  std::shared_ptr<LateCancelFactory> factory_;
};

// Defect 1: quiet time on a healthy attempt is not time without progress.
TEST_F(StreamDefectsTest, QuietStreamRetriesAfterSilenceLongerThanTheBudget) {
  options_.max_time_without_progress = absl::Minutes(2);
  auto stream = Start();
  ASSERT_EQ(factory_->count(), 1u);
  factory_->at(0)->Send(1);
  factory_->at(0)->Finish(absl::UnavailableError("rollout"));
  clock_->AdvanceBy(absl::Seconds(1));
  ASSERT_EQ(factory_->count(), 2u);
  // The reopened attempt is healthy and quiet for longer than the budget,
  // then the connection is reset: one failure, not "no progress for 5 min".
  clock_->AdvanceBy(absl::Minutes(5));
  factory_->at(1)->Finish(absl::UnavailableError("connection reset"));
  clock_->AdvanceBy(absl::Seconds(1));
  ASSERT_TRUE(rec_->done().empty()) << rec_->done()[0];
  ASSERT_EQ(factory_->count(), 3u);
  EXPECT_EQ(factory_->at(2)->request().after, 1u);
}

// Defect 1, without any message at all: a healthy, silent first attempt.
TEST_F(StreamDefectsTest, SilentFromTheStartStillRetriesAfterALongQuiet) {
  options_.max_time_without_progress = absl::Seconds(30);
  auto stream = Start();
  clock_->AdvanceBy(absl::Minutes(10));
  factory_->at(0)->Finish(absl::UnavailableError("reset"));
  clock_->AdvanceBy(absl::Seconds(1));
  EXPECT_TRUE(rec_->done().empty());
  EXPECT_EQ(factory_->count(), 2u);
}

// Defect 1, the other side: an attempt whose connection never connects is
// failing from its start: it is not healthy however long it stays open, and
// the budget's time bound ends the stream while it is still connecting.
TEST_F(StreamDefectsTest, AttemptsThatNeverConnectEndWithinTheTimeBound) {
  options_.max_time_without_progress = absl::Seconds(3);
  options_.attempt_open_timeout = absl::Seconds(10);
  for (std::uint64_t id = 1; id <= 64; ++id) source_->SetConnected(id, false);
  auto stream = Start();
  clock_->AdvanceBy(absl::Milliseconds(2900));
  EXPECT_TRUE(rec_->done().empty());
  clock_->AdvanceBy(absl::Milliseconds(100));
  for (std::size_t i = 0; i < factory_->count(); ++i) {
    factory_->at(i)->CompleteCancel();
  }
  ASSERT_EQ(rec_->done().size(), 1u);
  EXPECT_EQ(rec_->done()[0].code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(rec_->done()[0].message()), HasSubstr("gave up"));
  EXPECT_THAT(std::string(rec_->done()[0].message()),
              HasSubstr("not connected"));
}

// Defect 2: the replacement ends before the old attempt's cancel completes.
TEST_F(StreamDefectsTest, ReplacementEndsBeforeTheOldCancelCompletes) {
  auto stream = Start();
  auto a0 = factory_->at(0);
  a0->Send(1);
  source_->Drain(a0->connection());
  ASSERT_EQ(factory_->count(), 2u);
  auto a1 = factory_->at(1);
  a1->Send(2);  // hand-off: a0 is asked to cancel
  EXPECT_TRUE(a0->cancel_requested());
  a1->Finish(absl::UnavailableError("replacement lost"));
  // The stream must not fall back to a0, which is going away.
  clock_->AdvanceBy(absl::Seconds(1));
  ASSERT_EQ(factory_->count(), 3u) << "no attempt after the replacement ended";
  EXPECT_EQ(factory_->at(2)->request().after, 2u);
  a0->CompleteCancel();
  factory_->at(2)->Send(3);
  EXPECT_THAT(rec_->got(), ElementsAre(1, 2, 3));
  EXPECT_TRUE(rec_->done().empty());
  stream->Cancel();
  factory_->at(2)->CompleteCancel();
  ASSERT_EQ(rec_->done().size(), 1u);
  EXPECT_EQ(source_->held(1) + source_->held(2) + source_->held(3), 0u);
}

// Defect 2, the app's cancel: on_done waits for every late cancel, and the
// stream ends exactly once.
TEST_F(StreamDefectsTest, CancelWaitsForLateCancelsThenEndsOnce) {
  auto stream = Start();
  factory_->at(0)->Send(1);
  source_->Drain(1);
  stream->Cancel();
  EXPECT_TRUE(rec_->done().empty());  // two cancels outstanding
  factory_->at(1)->CompleteCancel();
  EXPECT_TRUE(rec_->done().empty());
  factory_->at(0)->CompleteCancel();
  ASSERT_EQ(rec_->done().size(), 1u);
  EXPECT_EQ(rec_->done()[0].code(), absl::StatusCode::kCancelled);
}

// Defect 3: a quiet stream holding a half-open probe resolves it.
TEST_F(StreamDefectsTest, QuietStreamResolvesItsHalfOpenProbe) {
  CircuitBreakerOptions bo;
  bo.minimum_calls = 1;
  bo.window_size = 1;
  bo.half_open_permits = 1;
  bo.break_duration = absl::Seconds(5);
  bo.break_jitter = 0;
  auto breaker = CircuitBreaker::Create(bo, clock_, 1).value();
  {
    auto p = breaker->TryAcquire();
    ASSERT_TRUE(p.ok());
    breaker->Record(*std::move(p), Outcome::kFailure,
                    absl::UnavailableError("x"));
  }
  ASSERT_EQ(breaker->counts().state, BreakerState::kOpen);
  clock_->AdvanceBy(absl::Seconds(5));
  options_.breaker = breaker;
  auto quiet = Start();  // takes the only probe, then says nothing
  ASSERT_EQ(factory_->count(), 1u);
  clock_->AdvanceBy(options_.attempt_settle_time);
  EXPECT_EQ(breaker->counts().state, BreakerState::kClosed);
  EXPECT_TRUE(breaker->TryAcquire().ok());
}

// Defect 4: observers that call back into the stream from inside the
// breaker's and the stream's callbacks.
class ReentrantBreakerObserver : public BreakerObserver {
 public:
  void OnNotPermitted(absl::string_view, const BreakerCounts&) override {
    Poke();
  }
  void OnRecorded(absl::string_view, Outcome, const BreakerCounts&) override {
    Poke();
  }
  void OnStateChange(absl::string_view, BreakerState, BreakerState,
                     const BreakerCounts&) override {
    Poke();
  }
  void Poke() {
    Stream* s = stream.load();
    if (s == nullptr) return;
    (void)s->stats();
    ++pokes;
    if (cancel) s->Cancel();
  }
  std::atomic<Stream*> stream{nullptr};
  std::atomic<bool> cancel{false};
  std::atomic<int> pokes{0};
};

TEST_F(StreamDefectsTest, BreakerObserverMayCallStatsAndCancel) {
  auto observer = std::make_shared<ReentrantBreakerObserver>();
  CircuitBreakerOptions bo;
  bo.observer = observer;
  auto breaker = CircuitBreaker::Create(bo, clock_, 1).value();
  options_.breaker = breaker;
  auto stream = Start();
  observer->stream = stream.get();
  factory_->at(0)->Send(1);  // success recorded: OnRecorded -> stats()
  breaker->SetForcedOpen(true);
  factory_->at(0)->Finish(absl::UnavailableError("bye"));
  clock_->AdvanceBy(absl::Seconds(1));  // refused: OnNotPermitted -> stats()
  EXPECT_GE(observer->pokes.load(), 2);
  observer->cancel = true;
  clock_->AdvanceBy(absl::Seconds(10));  // refused again -> Cancel()
  ASSERT_EQ(rec_->done().size(), 1u);
  EXPECT_EQ(rec_->done()[0].code(), absl::StatusCode::kCancelled);
  observer->stream = nullptr;
}

class ReentrantStreamObserver : public StreamObserver {
 public:
  void OnAttemptStarted(const AttemptInfo&) override { Poke(); }
  void OnFirstMessage(const AttemptInfo&, absl::Duration) override { Poke(); }
  void OnAttemptEnded(const AttemptInfo&, const absl::Status&, EndClass,
                      bool) override {
    Poke();
  }
  void OnBackoff(absl::Duration, const absl::Status&) override { Poke(); }
  void OnConnectionDraining(std::uint64_t, absl::string_view) override {
    Poke();
  }
  void Poke() {
    ++calls;
    if (destroy_in != nullptr && *destroy_in) {
      destroy_in->reset();
      return;
    }
    Stream* s = stream.load();
    if (s == nullptr) return;
    (void)s->stats();
    if (cancel) s->Cancel();
  }
  std::atomic<Stream*> stream{nullptr};
  std::atomic<bool> cancel{false};
  std::unique_ptr<Stream>* destroy_in = nullptr;
  std::atomic<int> calls{0};
};

TEST_F(StreamDefectsTest, StreamObserverMayCallStatsCancelAndDestroy) {
  auto observer = std::make_shared<ReentrantStreamObserver>();
  options_.observer = observer;
  auto stream = Start();
  observer->stream = stream.get();
  factory_->at(0)->Send(1);
  source_->Drain(1);  // OnConnectionDraining -> stats()
  ASSERT_EQ(factory_->count(), 2u);
  observer->cancel = true;
  factory_->at(1)->Send(2);  // OnFirstMessage -> Cancel()
  factory_->at(0)->CompleteCancel();
  factory_->at(1)->CompleteCancel();
  ASSERT_EQ(rec_->done().size(), 1u);
  observer->stream = nullptr;

  // Destroying the stream from inside an observer call.
  auto observer2 = std::make_shared<ReentrantStreamObserver>();
  options_.observer = observer2;
  Recorder second;
  auto s2 = Stream::Start(
      source_, Spec(), options_, [&](Resp&& r) { second.Message(r); },
      [&](const absl::Status& s) { second.Done(s); });
  ASSERT_TRUE(s2.ok());
  std::unique_ptr<Stream> holder = *std::move(s2);
  observer2->destroy_in = &holder;
  const std::size_t before = factory_->count();
  factory_->at(before - 1)->Send(5);  // OnFirstMessage destroys it
  EXPECT_EQ(holder, nullptr);
  factory_->at(before - 1)->CompleteCancel();
  EXPECT_TRUE(second.done().empty());  // no callback after the destructor
}

// Defect 5: the destructor, called from inside on_message, waits for an
// observer call that runs on another thread.
TEST_F(StreamDefectsTest, DestroyInsideOnMessageWaitsForObserverElsewhere) {
  struct BlockingObserver : StreamObserver {
    void OnConnectionDraining(std::uint64_t, absl::string_view) override {
      std::unique_lock<std::mutex> l(mu);
      entered = true;
      cv.notify_all();
      cv.wait_for(l, std::chrono::seconds(20), [&] { return release; });
      finished_at = ++clock;
    }
    std::mutex mu;
    std::condition_variable cv;
    bool entered = false;
    bool release = false;
    int clock = 0;
    int finished_at = 0;
    int destroyed_at = 0;
  };
  auto observer = std::make_shared<BlockingObserver>();
  options_.observer = observer;
  std::unique_ptr<Stream> stream;
  auto s = Stream::Start(
      source_, Spec(), options_,
      [&](Resp&&) {
        stream.reset();
        std::lock_guard<std::mutex> l(observer->mu);
        observer->destroyed_at = ++observer->clock;
        observer->cv.notify_all();
      },
      [&](const absl::Status&) {});
  ASSERT_TRUE(s.ok());
  stream = *std::move(s);
  auto a0 = factory_->at(0);
  std::thread drainer([&] { source_->Drain(1); });
  {
    std::unique_lock<std::mutex> l(observer->mu);
    ASSERT_TRUE(observer->cv.wait_for(l, std::chrono::seconds(20),
                                      [&] { return observer->entered; }));
  }
  std::thread deliverer([&] { a0->Send(1); });
  {
    // Give a wrong destructor the chance to return early; the assertion is
    // on order, not on time.
    std::unique_lock<std::mutex> l(observer->mu);
    observer->cv.wait_for(l, std::chrono::milliseconds(200),
                          [&] { return observer->destroyed_at != 0; });
    observer->release = true;
    observer->cv.notify_all();
  }
  deliverer.join();
  drainer.join();
  EXPECT_LT(observer->finished_at, observer->destroyed_at)
      << "the destructor returned while an observer call still ran";
  for (std::size_t i = 0; i < factory_->count(); ++i) {
    factory_->at(i)->CompleteCancel();
  }
}

// Defect 6: nothing grows per migration. A source that hands out a new
// connection id for every pick (as a server-side max connection age does)
// and a factory that keeps only live attempts, so that any growth is the
// stream's own.
class RollingSource final : public ConnectionSource {
 public:
  absl::StatusOr<ConnectionPick> Pick(
      std::weak_ptr<DrainListener> listener) override {
    listener_ = std::move(listener);
    ConnectionPick p;
    p.connection_id = ++last_;
    return p;
  }
  void Release(std::uint64_t, const std::weak_ptr<DrainListener>&) override {}
  void ReportDrainEnd(std::uint64_t, const absl::Status&) override {}
  void DrainNewest() {
    if (auto l = listener_.lock()) l->OnConnectionDraining(last_, "GOAWAY");
  }

 private:
  std::uint64_t last_ = 0;
  std::weak_ptr<DrainListener> listener_;
};

class LiveOnlyFactory final : public LateCancelAttempts {
 public:
  void Prune() {
    std::deque<std::shared_ptr<LateCancelAttempt>> keep;
    for (auto& a : live) {
      if (!a->done()) keep.push_back(a);
    }
    live.swap(keep);
  }
  std::deque<std::shared_ptr<LateCancelAttempt>> live;

 private:
  void Keep(std::shared_ptr<LateCancelAttempt> attempt) override {
    live.push_back(std::move(attempt));
  }
};

TEST_F(StreamDefectsTest, NoMemoryGrowthPerMigration) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "heap figures are the sanitizer's own under sanitizers";
#endif
  auto source = std::make_shared<RollingSource>();
  auto factory = std::make_shared<LiveOnlyFactory>();
  auto spec = Spec();
  spec.attempt_factory = factory;
  std::uint64_t delivered = 0;
  auto s = Stream::Start(
      source, spec, options_, [&](Resp&&) { ++delivered; },
      [](const absl::Status&) {});
  ASSERT_TRUE(s.ok());
  auto stream = *std::move(s);
  std::uint64_t seq = 0;
  auto migrate = [&] {
    source->DrainNewest();  // the replacement starts
    auto fresh = factory->live.back();
    auto old = factory->live.front();
    fresh->Send(++seq);  // hand-off: the old one is asked to cancel
    old->CompleteCancel();
    factory->Prune();
  };
  factory->live.back()->Send(++seq);
  for (int i = 0; i < 300; ++i) migrate();  // warm up
  const std::size_t before = mallinfo2().uordblks;
  constexpr int kMigrations = 3000;
  for (int i = 0; i < kMigrations; ++i) migrate();
  const std::size_t after = mallinfo2().uordblks;
  EXPECT_EQ(delivered, seq);
  EXPECT_EQ(stream->stats().migrations, 300u + kMigrations);
  const double per_migration =
      (static_cast<double>(after) - static_cast<double>(before)) / kMigrations;
  EXPECT_LT(per_migration, 4.0) << "bytes kept per migration";
}

// Defect 7: the replacement's connection drains while the old attempt is
// still live: the stream moves again instead of staying put.
TEST_F(StreamDefectsTest, ReplacementDrainingBeforeItDeliversMovesAgain) {
  auto stream = Start();
  auto a0 = factory_->at(0);
  a0->Send(1);
  source_->Drain(a0->connection());
  ASSERT_EQ(factory_->count(), 2u);
  auto a1 = factory_->at(1);
  source_->Drain(a1->connection());
  ASSERT_EQ(factory_->count(), 3u) << "the second drain was dropped";
  auto a2 = factory_->at(2);
  EXPECT_NE(a2->connection(), a1->connection());
  EXPECT_NE(a2->connection(), a0->connection());
  EXPECT_TRUE(a1->cancel_requested());
  EXPECT_FALSE(a0->cancel_requested());  // still the fallback
  a0->Send(2);                           // the fallback still delivers
  a2->Send(2);
  a2->Send(3);
  EXPECT_TRUE(a0->cancel_requested());
  EXPECT_THAT(rec_->got(), ElementsAre(1, 2, 3));
  a0->CompleteCancel();
  a1->CompleteCancel();
  stream->Cancel();
  a2->CompleteCancel();
  ASSERT_EQ(rec_->done().size(), 1u);
}

// Defect 8: exceptions from the app's callbacks end the stream with
// INTERNAL naming the callback; nothing is left hanging.
TEST_F(StreamDefectsTest, ThrowingOnMessageEndsWithInternal) {
  std::vector<absl::Status> done;
  auto s = Stream::Start(
      source_, Spec(), options_,
      [](Resp&& r) {
        if (r.seq == 2) throw std::runtime_error("boom");
      },
      [&](const absl::Status& st) { done.push_back(st); });
  ASSERT_TRUE(s.ok());
  auto stream = *std::move(s);
  auto a0 = factory_->at(0);
  a0->Send(1);
  a0->Send(2);
  EXPECT_TRUE(a0->cancel_requested());
  a0->CompleteCancel();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(done[0].message()), HasSubstr("on_message threw"));
  EXPECT_THAT(std::string(done[0].message()), HasSubstr("boom"));
  EXPECT_EQ(stream->stats().messages_delivered, 2u);
}

TEST_F(StreamDefectsTest, ThrowingSequenceOfAndResumeAfterEndWithInternal) {
  auto spec = Spec();
  spec.sequence_of = [](const Resp& r) -> absl::optional<std::uint64_t> {
    if (r.seq == 9) throw std::runtime_error("bad message");
    return r.seq;
  };
  auto stream = Start(spec);
  factory_->at(0)->Send(1);
  factory_->at(0)->Send(9);
  factory_->at(0)->CompleteCancel();
  ASSERT_EQ(rec_->done().size(), 1u);
  EXPECT_THAT(std::string(rec_->done()[0].message()),
              HasSubstr("sequence_of threw: bad message"));

  Recorder second;
  auto spec2 = Spec();
  spec2.resume_after = [](Req&, std::uint64_t) {
    throw std::runtime_error("cannot resume");
  };
  auto s2 = Stream::Start(
      source_, spec2, options_, [&](Resp&& r) { second.Message(r); },
      [&](const absl::Status& st) { second.Done(st); });
  ASSERT_TRUE(s2.ok());
  const std::size_t first = factory_->count() - 1;
  factory_->at(first)->Send(1);
  factory_->at(first)->Finish(absl::UnavailableError("bye"));
  clock_->AdvanceBy(absl::Seconds(1));
  ASSERT_EQ(second.done().size(), 1u);
  EXPECT_THAT(std::string(second.done()[0].message()),
              HasSubstr("resume_after threw: cannot resume"));
  EXPECT_EQ(factory_->count(), first + 1);  // no attempt was started
  EXPECT_EQ(source_->held(source_->current()), 0u);
}

TEST_F(StreamDefectsTest, ThrowingOnDoneIsContained) {
  auto s = Stream::Start(
      source_, Spec(), options_, [](Resp&&) {},
      [](const absl::Status&) { throw std::runtime_error("late"); });
  ASSERT_TRUE(s.ok());
  auto stream = *std::move(s);
  factory_->at(0)->Finish(absl::NotFoundError("gone"));
  EXPECT_EQ(stream->stats().attempts, 1u);
  stream->Cancel();  // still usable, does nothing
}

// Defect 9: the client's receive limit is not worth retrying.
TEST_F(StreamDefectsTest, ReceiveLimitEndsTheStreamWithoutRetrying) {
  auto stream = Start();
  factory_->at(0)->Send(1);
  factory_->at(0)->Finish(absl::ResourceExhaustedError(
      "Received message larger than max (4194305 vs. 4194304)"));
  clock_->AdvanceBy(absl::Minutes(1));
  EXPECT_EQ(factory_->count(), 1u);
  ASSERT_EQ(rec_->done().size(), 1u);
  EXPECT_EQ(rec_->done()[0].code(), absl::StatusCode::kResourceExhausted);
  // Other RESOURCE_EXHAUSTED (a server's quota) is still transient.
  AttemptEnd quota;
  quota.status = absl::ResourceExhaustedError("quota exceeded");
  EXPECT_EQ(DefaultClassify(quota), EndClass::kTransient);
}

// Defect 10: a drain notice that races with the end reaches nobody.
class CapturingSource final : public ConnectionSource {
 public:
  absl::StatusOr<ConnectionPick> Pick(
      std::weak_ptr<DrainListener> listener) override {
    last_listener = listener;
    ConnectionPick p;
    p.connection_id = 1;
    return p;
  }
  void Release(std::uint64_t, const std::weak_ptr<DrainListener>&) override {}
  void ReportDrainEnd(std::uint64_t, const absl::Status&) override {}
  std::weak_ptr<DrainListener> last_listener;
};

TEST_F(StreamDefectsTest, NoObserverCallAfterOnDone) {
  struct CountingObserver : StreamObserver {
    void OnConnectionDraining(std::uint64_t, absl::string_view) override {
      ++drains;
    }
    int drains = 0;
  };
  auto observer = std::make_shared<CountingObserver>();
  options_.observer = observer;
  auto source = std::make_shared<CapturingSource>();
  auto s = Stream::Start(
      source, Spec(), options_, [this](Resp&& r) { rec_->Message(r); },
      [this](const absl::Status& st) { rec_->Done(st); });
  ASSERT_TRUE(s.ok());
  auto stream = *std::move(s);
  auto listener = source->last_listener.lock();
  ASSERT_NE(listener, nullptr);
  factory_->at(0)->Finish(absl::NotFoundError("gone"));
  ASSERT_EQ(rec_->done().size(), 1u);
  // The pool had collected this stream as a holder before the end.
  listener->OnConnectionDraining(1, "GOAWAY");
  EXPECT_EQ(observer->drains, 0);
  EXPECT_EQ(factory_->count(), 1u);
}

}  // namespace
}  // namespace stream_test
}  // namespace tether
