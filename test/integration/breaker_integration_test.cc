// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// The circuit breaker against real gRPC servers on 127.0.0.1: a two-replica
// service (each replica a FaultProxy in front of its pods) behind an
// address-list ConnectionPool. A rollout must leave the
// breaker closed; all replicas down must open it and end every stream within
// its give-up bound; replicas back must close it again. Every wait is on an
// event with a generous deadline; nothing sleeps.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "support/fault_proxy.h"
#include "test/integration/stream_test_util.h"
#include "test/support/test_server.h"
#include "tether/circuit_breaker.h"
#include "tether/connection_pool.h"

namespace tether {
namespace testsupport {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::tether::support::FaultProxy;
using Transition = std::pair<BreakerState, BreakerState>;

constexpr absl::Duration kWait = absl::Seconds(30);
constexpr int kStreams = 64;
constexpr BreakerState kClosed = BreakerState::kClosed;
constexpr BreakerState kOpen = BreakerState::kOpen;
constexpr BreakerState kHalfOpen = BreakerState::kHalfOpen;

// Wakes waiters on every pool event, so a test can wait for the pool to
// reach a state without polling.
class PoolEvents : public ConnectionObserver {
 public:
  void OnConnectionOpened(std::uint64_t, absl::string_view) override { Bump(); }
  void OnConnectionReady(std::uint64_t) override { Bump(); }
  void OnConnectionDraining(std::uint64_t, absl::string_view) override {
    Bump();
  }
  void OnConnectionSuspect(std::uint64_t, const absl::Status&) override {
    Bump();
  }
  void OnConnectionRetired(std::uint64_t) override { Bump(); }

  // Waits until `pred` holds (checked after every pool event), up to
  // `timeout`.
  bool WaitFor(const std::function<bool()>& pred, absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), pred);
  }

 private:
  void Bump() {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
};

// A condition variable to wait on for a predicate over atomics.
class Notifier {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  bool WaitFor(const std::function<bool()>& pred, absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), pred);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

// Records a breaker's transitions and lets a test wait for one.
class BreakerLog {
 public:
  void Attach(const std::shared_ptr<CircuitBreaker>& breaker) {
    breaker->AddListener([this](BreakerState from, BreakerState to) {
      std::lock_guard<std::mutex> lock(mu_);
      log_.emplace_back(from, to);
      cv_.notify_all();
    });
  }
  bool WaitFor(Transition t, absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] {
      for (const Transition& x : log_) {
        if (x == t) return true;
      }
      return false;
    });
  }
  std::vector<Transition> Get() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Transition> log_;
};

// One stream's collector, plus when (wall clock) it ended.
struct Tracked {
  Collector collector;
  std::atomic<int> messages{0};
  std::mutex mu;
  absl::Time ended_at = absl::InfiniteFuture();
};

class BreakerIntegrationTest : public ::testing::Test {
 protected:
  // Each replica is a FaultProxy (its Service address, which the pool dials)
  // in front of two pods that take turns: a rollout starts the new pod,
  // points the proxy at it and drains the old one with a GOAWAY.
  struct Replica {
    FaultProxy proxy;
    std::unique_ptr<TestServer> pods[2];
    int current = 0;
    TestServer& pod() { return *pods[current]; }
  };

  void SetUp() override {
    for (int r = 0; r < 2; ++r) {
      replicas_[r] = std::make_unique<Replica>();
      for (int p = 0; p < 2; ++p) {
        TestServerOptions o;
        o.name = absl::StrCat("r", r, "-pod", p);
        o.tick = absl::Milliseconds(50);  // 64 streams x 20 msg/s
        replicas_[r]->pods[p] = std::make_unique<TestServer>(o);
      }
      ASSERT_TRUE(replicas_[r]->pod().Start().ok());
      ASSERT_TRUE(replicas_[r]->proxy.Start().ok());
      ASSERT_TRUE(
          replicas_[r]->proxy.SetBackend(replicas_[r]->pod().address()).ok());
    }
    events_ = std::make_shared<PoolEvents>();
    ConnectionPoolOptions po;
    po.addresses = {replicas_[0]->proxy.address(),
                    replicas_[1]->proxy.address()};
    po.observer = events_;
    auto pool = ConnectionPool::Create(std::move(po));
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = *std::move(pool);

    CircuitBreakerOptions bo;
    bo.name = "seqstream-replicas";
    bo.window_size = 20;
    bo.minimum_calls = 10;
    bo.failure_rate_threshold = 50;
    bo.break_duration = absl::Milliseconds(500);
    bo.max_break_duration = absl::Seconds(2);
    bo.half_open_permits = 3;
    auto breaker = CircuitBreaker::Create(bo);
    ASSERT_TRUE(breaker.ok()) << breaker.status();
    breaker_ = *std::move(breaker);
    log_.Attach(breaker_);
  }

  void TearDown() override {
    streams_.clear();  // before the collectors they call
    tracked_.clear();
  }

  ReconnectingStreamOptions Options(absl::Duration give_up) {
    ReconnectingStreamOptions o;
    ExponentialBackoffOptions b;
    b.initial_delay = absl::Milliseconds(20);
    b.max_delay = absl::Milliseconds(500);
    o.backoff = ExponentialBackoff::Create(b).value();
    o.max_attempts_without_progress = 1000;  // only the time bound counts
    o.max_time_without_progress = give_up;
    o.breaker = breaker_;
    return o;
  }

  void StartStreams(int n, const ReconnectingStreamOptions& options) {
    for (int i = 0; i < n; ++i) {
      auto t = std::make_unique<Tracked>();
      Tracked* raw = t.get();
      auto s = SeqStream::Start(
          pool_, WatchSpec(absl::StrCat("k", tracked_.size())), options,
          [this, raw](tether::test::Event&& e) {
            raw->collector.OnMessage(std::move(e));
            ++raw->messages;
            progress_.Notify();
          },
          [raw](const absl::Status& st) {
            {
              std::lock_guard<std::mutex> lock(raw->mu);
              raw->ended_at = absl::Now();
            }
            raw->collector.OnDone(st);
          });
      ASSERT_TRUE(s.ok()) << s.status();
      tracked_.push_back(std::move(t));
      streams_.push_back(*std::move(s));
    }
  }

  // Every stream from `first` on delivers `n` more messages (all counted
  // from now, in parallel).
  void ExpectAllProgress(std::size_t first, int n) {
    std::vector<int> base;
    for (std::size_t i = first; i < tracked_.size(); ++i) {
      base.push_back(tracked_[i]->messages.load());
    }
    const bool all = progress_.WaitFor(
        [&] {
          for (std::size_t i = first; i < tracked_.size(); ++i) {
            if (tracked_[i]->messages.load() < base[i - first] + n) {
              return false;
            }
          }
          return true;
        },
        kWait);
    for (std::size_t i = first; i < tracked_.size(); ++i) {
      ASSERT_GE(tracked_[i]->messages.load(), base[i - first] + n)
          << "stream " << i << " stalled (all: " << all << "); ended: "
          << tracked_[i]->collector.done().value_or(absl::OkStatus());
    }
  }

  bool WaitForReady(std::size_t n) {
    return events_->WaitFor([&] { return pool_->Stats().ready >= n; }, kWait);
  }

  // One replica's turn in a rollout, new pod first: start it, send new
  // connections to it, drain the old pod (GOAWAY, short grace, stop), and
  // wait until the pool has a READY connection to the replica again (a
  // readiness gate: the next replica goes only once this one serves).
  void Replace(Replica& r) {
    const int next = 1 - r.current;
    ASSERT_TRUE(r.pods[next]->Start().ok());
    ASSERT_TRUE(r.proxy.SetBackend(r.pods[next]->address()).ok());
    r.pod().Shutdown(absl::Milliseconds(500));
    r.current = next;
    ASSERT_TRUE(WaitForReady(2))
        << "pool never reconnected to " << r.pod().name();
  }

  std::unique_ptr<Replica> replicas_[2];
  std::shared_ptr<PoolEvents> events_;
  std::shared_ptr<ConnectionPool> pool_;
  std::shared_ptr<CircuitBreaker> breaker_;
  BreakerLog log_;
  Notifier progress_;
  std::vector<std::unique_ptr<Tracked>> tracked_;
  std::vector<std::unique_ptr<SeqStream>> streams_;
};

TEST_F(BreakerIntegrationTest, RolloutOfBothReplicasLeavesItClosed) {
  ASSERT_TRUE(WaitForReady(2));
  StartStreams(kStreams, Options(absl::Seconds(30)));
  ExpectAllProgress(0, 3);
  const BreakerCounts before = breaker_->counts();
  EXPECT_GE(before.successful, static_cast<std::uint64_t>(kStreams));

  for (int round = 0; round < 2; ++round) {
    for (auto& replica : replicas_) {
      Replace(*replica);
      ExpectAllProgress(0, 3);
    }
  }

  for (std::size_t i = 0; i < tracked_.size(); ++i) {
    EXPECT_EQ(tracked_[i]->collector.out_of_order(), 0) << "stream " << i;
    EXPECT_FALSE(tracked_[i]->collector.done().has_value()) << "stream " << i;
  }
  const BreakerCounts after = breaker_->counts();
  EXPECT_EQ(after.state, kClosed);
  EXPECT_EQ(after.transitions, 0u);
  EXPECT_TRUE(log_.Get().empty());
  EXPECT_EQ(after.failed, 0u) << "an attempt during the rollout was counted "
                                 "as a failure";
  EXPECT_EQ(after.not_permitted, 0u);
  // The streams really moved: many attempts, all counted as healthy.
  EXPECT_GT(after.successful, before.successful);
}

TEST_F(BreakerIntegrationTest, AllReplicasDownOpensItThenReplicasBackCloseIt) {
  constexpr absl::Duration kGiveUp = absl::Seconds(3);
  ASSERT_TRUE(WaitForReady(2));
  StartStreams(kStreams, Options(kGiveUp));
  ExpectAllProgress(0, 3);

  // Every replica dies at once.
  const absl::Time down = absl::Now();
  for (auto& replica : replicas_) replica->pod().Kill();
  ASSERT_TRUE(log_.WaitFor({kClosed, kOpen}, kWait));
  for (std::size_t i = 0; i < tracked_.size(); ++i) {
    ASSERT_TRUE(tracked_[i]->collector.WaitForDone(kWait)) << "stream " << i;
  }
  absl::Duration slowest = absl::ZeroDuration();
  for (std::size_t i = 0; i < tracked_.size(); ++i) {
    absl::Status s = *tracked_[i]->collector.done();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable)
        << "stream " << i << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("gave up after"))
        << "stream " << i;
    std::lock_guard<std::mutex> lock(tracked_[i]->mu);
    slowest = std::max(slowest, tracked_[i]->ended_at - down);
  }
  EXPECT_LE(slowest, kGiveUp + absl::Seconds(1));
  // The breaker stopped the retrying: most streams never saw another
  // attempt once it opened, and were refused instead.
  BreakerCounts open = breaker_->counts();
  EXPECT_GE(open.failed, 10u);
  EXPECT_GT(open.not_permitted, 0u);
  RecordProperty("slowest_end_ms",
                 static_cast<int>(absl::ToInt64Milliseconds(slowest)));

  // The replicas come back; new streams (which wait for the breaker rather
  // than fail fast) get through once a probe succeeds.
  for (auto& replica : replicas_) ASSERT_TRUE(replica->pod().Start().ok());
  const std::size_t first_new = tracked_.size();
  StartStreams(16, Options(absl::Seconds(60)));
  ASSERT_TRUE(log_.WaitFor({kOpen, kHalfOpen}, kWait));
  ASSERT_TRUE(log_.WaitFor({kHalfOpen, kClosed}, kWait));
  ExpectAllProgress(first_new, 5);
  EXPECT_EQ(breaker_->state(), kClosed);
  std::vector<Transition> t = log_.Get();
  ASSERT_FALSE(t.empty());
  EXPECT_EQ(t.front(), Transition(kClosed, kOpen));
  EXPECT_EQ(t.back(), Transition(kHalfOpen, kClosed));
  for (std::size_t i = first_new; i < tracked_.size(); ++i) {
    EXPECT_EQ(tracked_[i]->collector.out_of_order(), 0) << "stream " << i;
  }
}

}  // namespace
}  // namespace testsupport
}  // namespace tether
