// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The spread window of moves (`ReconnectingStreamOptions::migration_jitter`)
// against real gRPC servers on 127.0.0.1: a graceful `Shutdown(deadline)`
// sends a real GOAWAY, and the streams reach the new server as a ramp over
// the window, before the deadline, with nothing lost or repeated; a
// deadline shorter than the window moves the rest at once. Every wait is
// on an event with a generous deadline; nothing sleeps.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "support/fault_proxy.h"
#include "test/integration/rollout_fixture.h"
#include "test/support/one_shot.h"
#include "test/support/test_server.h"
#include "tether/connection_pool.h"
#include "tether/observer.h"

namespace tether {
namespace testsupport {
namespace {

using ::tether::support::FaultProxy;

constexpr absl::Duration kWait = absl::Seconds(30);

// Tells `gone` when the pool (its owner) is destroyed.
class PoolGone final : public ConnectionObserver {
 public:
  explicit PoolGone(std::shared_ptr<OneShot> gone) : gone_(std::move(gone)) {}
  ~PoolGone() override { gone_->Signal(); }

 private:
  const std::shared_ptr<OneShot> gone_;
};

class SpreadRollout : public ::testing::Test {
 protected:
  // Servers A and B, a Service-like proxy sending new connections to A, a
  // pool on the proxy, and `n` streams with `window` delivering from A.
  void StartOnA(int n, absl::Duration window) {
    StartOnA(n, [window](ReconnectingStreamOptions& o) {
      o.migration_jitter = window;
    });
  }
  // The same with the options `tune` makes of `FastOptions`.
  void StartOnA(int n,
                const std::function<void(ReconnectingStreamOptions&)>& tune) {
    a_ = StartServer("A");
    b_ = StartServer("B");
    ASSERT_TRUE(a_ && b_);
    ASSERT_TRUE(proxy_.Start().ok());
    ASSERT_TRUE(proxy_.SetBackend(a_->address()).ok());
    ConnectionPoolOptions po;
    po.target = proxy_.address();
    po.observer = std::make_shared<PoolGone>(pool_gone_);
    pool_ = MakePool(std::move(po));
    ASSERT_NE(pool_, nullptr);
    streams_ = std::make_unique<Streams>(n);
    streams_->StartAll(pool_, [tune](std::shared_ptr<StreamObserver> obs) {
      ReconnectingStreamOptions o = FastOptions(std::move(obs));
      tune(o);
      return o;
    });
    ASSERT_TRUE(streams_->fleet.WaitMoreFrom("A", 3, kWait));
    ASSERT_TRUE(a_->WaitForOpenStreams(n, kWait));
  }

  // The rollout: new connections go to B, A shuts down gracefully with
  // `grace` (a real GOAWAY now, its streams cut at the deadline). Returns
  // when each stream first delivered from B, counted from the shutdown,
  // sorted; empty if some stream did not deliver twice from B in time.
  std::vector<absl::Duration> RollToB(absl::Duration grace) {
    return RollToB([grace](TestServer& a) { a.ShutdownAsync(grace); });
  }
  // The same with A leaving as `leave` makes it.
  std::vector<absl::Duration> RollToB(
      const std::function<void(TestServer&)>& leave) {
    std::vector<absl::Duration> out;
    if (!proxy_.SetBackend(b_->address()).ok()) return out;
    const absl::Time shutdown_at = absl::Now();
    leave(*a_);
    if (!streams_->fleet.WaitAll(
            [](const Delivered& d) { return d.From("B") >= 2; }, kWait)) {
      return out;
    }
    for (int i = 0; i < streams_->fleet.size(); ++i) {
      const Delivered d = streams_->fleet.Get(i);
      out.push_back(d.first_from.at("B") - shutdown_at);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // Nothing lost, repeated or ended; every stream moved once to B.
  void ExpectCleanMoves() {
    Streams& s = *streams_;
    s.ExpectClean();
    for (int i = 0; i < s.fleet.size(); ++i) {
      EXPECT_EQ(s.streams[i]->stats().duplicates_dropped, 0u) << "stream " << i;
      EXPECT_GE(s.fleet.Get(i).From("B"), 1) << "stream " << i;
    }
  }

  void TearDown() override {
    if (streams_) StopStreamsAndWaitForPool(*streams_, pool_, *pool_gone_);
  }

  // Declared in teardown order: streams, then pool, proxy and servers.
  std::unique_ptr<TestServer> a_, b_;
  FaultProxy proxy_;
  std::shared_ptr<ConnectionPool> pool_;
  std::unique_ptr<Streams> streams_;
  std::shared_ptr<OneShot> pool_gone_ = std::make_shared<OneShot>();
};

// A real GOAWAY with a 20 s deadline and a 2 s window: the streams reach B
// spread evenly over the window (the pool's order: each tenth of it takes
// 10 of them, give or take the arrival delays; 100 independent uniform
// draws put fewer than 5 or more than 15 into some tenth about half the
// time; without the window all arrive within a few ms), every one long
// before the deadline, and A sees no new call.
TEST_F(SpreadRollout, GoawayMovesStreamsAsARampBeforeTheDeadline) {
  constexpr int kStreams = 100;
  constexpr absl::Duration kWindow = absl::Seconds(2);
  constexpr absl::Duration kGrace = absl::Seconds(20);
  StartOnA(kStreams, kWindow);
  ASSERT_FALSE(HasFatalFailure());
  const std::int64_t watches_on_a = a_->stats().watches_started;

  const std::vector<absl::Duration> at_b = RollToB(kGrace);
  ASSERT_EQ(at_b.size(), static_cast<std::size_t>(kStreams));

  // A ramp: arrivals per 200 ms (a tenth of the window), 10 expected each.
  std::map<std::int64_t, int> buckets;
  for (absl::Duration t : at_b) ++buckets[t / absl::Milliseconds(200)];
  int peak = 0;
  for (const auto& b : buckets) peak = std::max(peak, b.second);
  EXPECT_LE(peak, kStreams / 4) << "the moves came as a spike";
  for (std::int64_t tenth = 0; tenth < 10; ++tenth) {
    const int n = buckets.count(tenth) ? buckets[tenth] : 0;
    EXPECT_GE(n, 5) << "tenth " << tenth << " of the window";
    EXPECT_LE(n, 15) << "tenth " << tenth << " of the window";
  }
  EXPECT_GE(at_b[kStreams * 9 / 10] - at_b[kStreams / 10], kWindow / 2)
      << "the moves were not spread over the window";
  // Every stream moved before the deadline, with room to spare.
  EXPECT_LT(at_b.back(), kGrace / 2);
  ExpectCleanMoves();
  EXPECT_EQ(a_->stats().watches_started, watches_on_a);
  // With every old attempt cancelled, A stops long before its deadline.
  EXPECT_TRUE(a_->WaitForStopped(kWait));
}

// The server's deadline (1 s) comes before most of the window (20 s): at
// the deadline the streams still waiting move at once, and lose nothing.
TEST_F(SpreadRollout, DeadlineBeforeTheWindowEndsMovesTheRestAtOnce) {
  constexpr int kStreams = 20;
  constexpr absl::Duration kWindow = absl::Seconds(20);
  constexpr absl::Duration kGrace = absl::Seconds(1);
  StartOnA(kStreams, kWindow);
  ASSERT_FALSE(HasFatalFailure());

  const std::vector<absl::Duration> at_b = RollToB(kGrace);
  ASSERT_EQ(at_b.size(), static_cast<std::size_t>(kStreams));
  // Far below the window: the deadline moved them (plus a loaded machine's
  // slack), not their drawn points.
  EXPECT_LT(at_b.back(), kGrace + absl::Seconds(5));
  ExpectCleanMoves();
}

// A server that cancels its streams before its GOAWAY leaves nothing to
// serve: they reopen after `reopen_after_progress_jitter`, spread over the
// part of it that the pool sizes to the herd (16 streams: 16/128 of 10 s,
// 1.25 s), the first at once. Drawn at random from the whole 10 s instead,
// all 16 would reach B within 4 s about once in 2 million runs. (The
// `recovery_jitter` of 10 s keeps a new connection from waking them early:
// see `ReconnectingStreamOptions::recovery_jitter`.)
TEST_F(SpreadRollout, CancelFirstReopensSpreadOverTheHerdsPartOfTheJitter) {
  constexpr int kStreams = 16;
  StartOnA(kStreams, [](ReconnectingStreamOptions& o) {
    o.reopen_after_progress_jitter = absl::Seconds(10);
    o.recovery_jitter = absl::Seconds(10);
  });
  ASSERT_FALSE(HasFatalFailure());

  const std::vector<absl::Duration> at_b = RollToB(
      [](TestServer& a) { a.CancelFirstDrain(absl::Milliseconds(300)); });
  ASSERT_EQ(at_b.size(), static_cast<std::size_t>(kStreams));
  EXPECT_LT(at_b.back(), absl::Seconds(4)) << "not the herd's part";
  // Spread, not all at once: the last point is 15/16 of the 1.25 s.
  EXPECT_GE(at_b.back() - at_b.front(), absl::Milliseconds(600));
  ExpectCleanMoves();
}

}  // namespace
}  // namespace testsupport
}  // namespace tether
