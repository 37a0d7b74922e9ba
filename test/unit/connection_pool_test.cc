// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The pool's decisions, with fake connections and a fake clock: no network.
#include "tether/connection_pool.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "connections/pool_core.h"
#include "connections/tether_health.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/pool_core_fixture.h"
#include "tether/circuit_breaker.h"
#include "tether/testing/fake_clock.h"
#include "tether/transport.h"

namespace tether {
namespace {

using internal::LinkState;
using internal::PoolCore;
using pool_test::FakeDriver;
using pool_test::FakeLink;
using pool_test::Listener;
using pool_test::PoolCoreTest;
using pool_test::RecordingObserver;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using DrainListener = ConnectionSource::DrainListener;

TEST(ConnectionPoolOptionsTest, DefaultsWithATargetAreValid) {
  ConnectionPoolOptions o;
  o.target = "localhost:1";
  EXPECT_TRUE(Validate(o).ok());
  EXPECT_EQ(o.max_connections, 8);
  EXPECT_EQ(o.idle_timeout, absl::Seconds(30));
  EXPECT_EQ(o.keepalive_time, absl::Minutes(6));
  EXPECT_EQ(o.keepalive_timeout, absl::Seconds(20));
  EXPECT_FALSE(o.keepalive_permit_without_calls);
  EXPECT_FALSE(o.health_check);
}

TEST(ConnectionPoolOptionsTest, InvalidOptionsAreRejected) {
  struct Case {
    const char* name;
    std::function<void(ConnectionPoolOptions&)> mutate;
    const char* field;
  };
  const std::vector<Case> cases = {
      {"neither", [](ConnectionPoolOptions& o) { o.target.clear(); },
       "exactly one"},
      {"both", [](ConnectionPoolOptions& o) { o.addresses = {"a:1"}; },
       "exactly one"},
      {"empty address",
       [](ConnectionPoolOptions& o) {
         o.target.clear();
         o.addresses = {"a:1", ""};
       },
       "empty"},
      {"duplicate address",
       [](ConnectionPoolOptions& o) {
         o.target.clear();
         o.addresses = {"a:1", "b:1", "a:1"};
       },
       "twice"},
      {"max 0", [](ConnectionPoolOptions& o) { o.max_connections = 0; },
       "max_connections"},
      {"max big", [](ConnectionPoolOptions& o) { o.max_connections = 1025; },
       "max_connections"},
      {"idle 0",
       [](ConnectionPoolOptions& o) { o.idle_timeout = absl::ZeroDuration(); },
       "idle_timeout"},
      {"idle negative",
       [](ConnectionPoolOptions& o) { o.idle_timeout = -absl::Seconds(1); },
       "idle_timeout"},
      {"keepalive small",
       [](ConnectionPoolOptions& o) { o.keepalive_time = absl::Seconds(1); },
       "keepalive_time"},
      {"keepalive timeout 0",
       [](ConnectionPoolOptions& o) {
         o.keepalive_timeout = absl::ZeroDuration();
       },
       "keepalive_timeout"},
      {"keepalive timeout infinite",
       [](ConnectionPoolOptions& o) {
         o.keepalive_timeout = absl::InfiniteDuration();
       },
       "keepalive_timeout"},
      {"keepalive over a day",
       [](ConnectionPoolOptions& o) {
         o.keepalive_time = absl::Hours(24) + absl::Milliseconds(1);
       },
       "keepalive_time must be in [10s, 24h] or infinite, got 24h0.001s"},
      {"keepalive timeout over a day",
       [](ConnectionPoolOptions& o) { o.keepalive_timeout = absl::Hours(25); },
       "keepalive_timeout must be in (0, 24h], got 25h"},
  };
  for (const Case& c : cases) {
    ConnectionPoolOptions o;
    o.target = "localhost:1";
    c.mutate(o);
    absl::Status s = Validate(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.field)) << c.name;
    auto pool = ConnectionPool::Create(std::move(o));
    EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument)
        << c.name;
  }
}

TEST(ConnectionPoolOptionsTest, KeepaliveBoundsAreAccepted) {
  ConnectionPoolOptions o;
  o.target = "localhost:1";
  o.keepalive_time = absl::Seconds(10);
  o.keepalive_timeout = absl::Hours(24);
  EXPECT_TRUE(Validate(o).ok());
  o.keepalive_time = absl::Hours(24);
  o.keepalive_timeout = absl::Nanoseconds(1);
  EXPECT_TRUE(Validate(o).ok());
  o.keepalive_time = absl::InfiniteDuration();
  EXPECT_TRUE(Validate(o).ok());
}

TEST(ConnectionPoolOptionsTest, ProbeAndSuspectDefaults) {
  ConnectionPoolOptions o;
  EXPECT_EQ(o.probe_initial_backoff, absl::Milliseconds(50));
  EXPECT_EQ(o.probe_max_backoff, absl::Milliseconds(300));
  EXPECT_EQ(o.suspect_after_ends, 3);
  EXPECT_EQ(o.suspect_end_window, absl::Seconds(1));
  EXPECT_EQ(o.suspect_probation, absl::Seconds(30));
  EXPECT_EQ(o.breaker, nullptr);
}

TEST(ConnectionPoolOptionsTest, ProbeAndSuspectOutOfRangeAreRejected) {
  struct Case {
    const char* name;
    std::function<void(ConnectionPoolOptions&)> mutate;
    const char* field;
  };
  const std::vector<Case> cases = {
      {"initial 0",
       [](ConnectionPoolOptions& o) {
         o.probe_initial_backoff = absl::ZeroDuration();
       },
       "probe_initial_backoff"},
      {"initial below 1ms",
       [](ConnectionPoolOptions& o) {
         o.probe_initial_backoff = absl::Microseconds(999);
       },
       "probe_initial_backoff"},
      {"initial negative",
       [](ConnectionPoolOptions& o) {
         o.probe_initial_backoff = -absl::Seconds(1);
       },
       "probe_initial_backoff"},
      {"initial above max",
       [](ConnectionPoolOptions& o) {
         o.probe_initial_backoff = absl::Milliseconds(301);
       },
       "probe_initial_backoff"},
      {"max above 1h",
       [](ConnectionPoolOptions& o) {
         o.probe_max_backoff = absl::Hours(1) + absl::Milliseconds(1);
       },
       "probe_max_backoff"},
      {"max infinite",
       [](ConnectionPoolOptions& o) {
         o.probe_max_backoff = absl::InfiniteDuration();
       },
       "probe_max_backoff"},
      {"ends 0", [](ConnectionPoolOptions& o) { o.suspect_after_ends = 0; },
       "suspect_after_ends"},
      {"ends negative",
       [](ConnectionPoolOptions& o) { o.suspect_after_ends = -3; },
       "suspect_after_ends"},
      {"ends huge",
       [](ConnectionPoolOptions& o) { o.suspect_after_ends = 10001; },
       "suspect_after_ends"},
      {"ends int max",
       [](ConnectionPoolOptions& o) {
         o.suspect_after_ends = std::numeric_limits<int>::max();
       },
       "suspect_after_ends"},
      {"window 0",
       [](ConnectionPoolOptions& o) {
         o.suspect_end_window = absl::ZeroDuration();
       },
       "suspect_end_window"},
      {"window infinite",
       [](ConnectionPoolOptions& o) {
         o.suspect_end_window = absl::InfiniteDuration();
       },
       "suspect_end_window"},
      {"window above 1h",
       [](ConnectionPoolOptions& o) { o.suspect_end_window = absl::Hours(2); },
       "suspect_end_window"},
      {"probation 0",
       [](ConnectionPoolOptions& o) {
         o.suspect_probation = absl::ZeroDuration();
       },
       "suspect_probation"},
      {"probation negative",
       [](ConnectionPoolOptions& o) {
         o.suspect_probation = -absl::Seconds(1);
       },
       "suspect_probation"},
      {"probation above 24h",
       [](ConnectionPoolOptions& o) {
         o.suspect_probation = absl::Hours(24) + absl::Seconds(1);
       },
       "suspect_probation"},
  };
  for (const Case& c : cases) {
    ConnectionPoolOptions o;
    o.target = "localhost:1";
    c.mutate(o);
    absl::Status s = Validate(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.field)) << c.name;
    EXPECT_EQ(ConnectionPool::Create(std::move(o)).status().code(),
              absl::StatusCode::kInvalidArgument)
        << c.name;
  }
}

TEST(ConnectionPoolOptionsTest, ProbeAndSuspectExtremesAreValid) {
  ConnectionPoolOptions o;
  o.target = "localhost:1";
  o.probe_initial_backoff = absl::Milliseconds(1);
  o.probe_max_backoff = absl::Milliseconds(1);
  o.suspect_after_ends = 1;
  o.suspect_end_window = absl::Nanoseconds(1);
  o.suspect_probation = absl::Nanoseconds(1);
  EXPECT_TRUE(Validate(o).ok()) << Validate(o);
  o.probe_max_backoff = absl::Hours(1);
  o.probe_initial_backoff = absl::Hours(1);
  o.suspect_after_ends = 10000;
  o.suspect_end_window = absl::Hours(1);
  o.suspect_probation = absl::Hours(24);
  EXPECT_TRUE(Validate(o).ok()) << Validate(o);
  o.suspect_probation = absl::InfiniteDuration();
  EXPECT_TRUE(Validate(o).ok()) << Validate(o);
}

TEST(ConnectionPoolOptionsTest, InfiniteIdleAndKeepaliveAreValid) {
  ConnectionPoolOptions o;
  o.target = "localhost:1";
  o.idle_timeout = absl::InfiniteDuration();
  o.keepalive_time = absl::InfiniteDuration();
  EXPECT_TRUE(Validate(o).ok());
}

TEST_F(PoolCoreTest, StartOpensOneConnectionPerAddress) {
  ConnectionPoolOptions o;
  o.addresses = {"a:1", "b:1", "c:1"};
  Make(std::move(o));
  ASSERT_EQ(driver_.opened(), 3u);
  EXPECT_EQ(driver_.link(1)->address(), "a:1");
  EXPECT_EQ(driver_.link(2)->address(), "b:1");
  EXPECT_EQ(driver_.link(3)->address(), "c:1");
  EXPECT_THAT(observer_->events(),
              ElementsAre("opened 1 a:1", "opened 2 b:1", "opened 3 c:1"));
}

TEST_F(PoolCoreTest, NewConnectionIsPickableAtOnce) {
  MakeTarget();
  auto l = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(l), 1u);  // still IDLE: the call will connect it
  EXPECT_EQ(driver_.opened(), 1u);
}

TEST_F(PoolCoreTest, SpreadsLeastLoadedOverAddresses) {
  ConnectionPoolOptions o;
  o.addresses = {"a:1", "b:1"};
  Make(std::move(o));
  core_->OnLinkState(1, LinkState::kReady);
  core_->OnLinkState(2, LinkState::kReady);
  std::vector<std::shared_ptr<Listener>> ls;
  std::map<std::uint64_t, int> count;
  for (int i = 0; i < 6; ++i) {
    ls.push_back(std::make_shared<Listener>());
    ++count[MustPick(ls.back())];
  }
  EXPECT_EQ(count[1], 3);
  EXPECT_EQ(count[2], 3);
  // Free two on connection 1: the next two picks go there.
  core_->Release(1, ls[0]);
  core_->Release(1, ls[2]);
  auto x = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(x), 1u);
  EXPECT_EQ(MustPick(x), 1u);
  EXPECT_EQ(MustPick(x), 1u);  // tie 3-3: lower id first
  EXPECT_EQ(MustPick(x), 2u);
  EXPECT_EQ(driver_.opened(), 2u);
}

TEST_F(PoolCoreTest, ReadyPreferredOverConnecting) {
  ConnectionPoolOptions o;
  o.addresses = {"a:1", "b:1"};
  Make(std::move(o));
  core_->OnLinkState(1, LinkState::kConnecting);
  core_->OnLinkState(2, LinkState::kReady);
  auto l = std::make_shared<Listener>();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(MustPick(l), 2u);
}

TEST_F(PoolCoreTest, DrainingConnectionNeverPickedAndListenersToldOnce) {
  MakeTarget();
  Serve(1);
  auto a = std::make_shared<Listener>();
  auto b = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(a), 1u);
  EXPECT_EQ(MustPick(a), 1u);  // the same listener twice: told once
  EXPECT_EQ(MustPick(b), 1u);

  core_->OnLinkState(1, LinkState::kIdle);  // GOAWAY
  EXPECT_THAT(a->calls(), ElementsAre(1u));
  EXPECT_THAT(b->calls(), ElementsAre(1u));
  EXPECT_THAT(a->last_why(), HasSubstr("READY"));
  EXPECT_EQ(core_->Stats().draining, 1u);

  // Later changes on the draining connection tell nobody again.
  core_->OnLinkState(1, LinkState::kConnecting);
  Serve(1);
  core_->OnLinkState(1, LinkState::kTransientFailure);
  EXPECT_THAT(a->calls(), ElementsAre(1u));
  EXPECT_THAT(b->calls(), ElementsAre(1u));

  // Never picked again, even when it says READY and has fewest picks.
  auto c = std::make_shared<Listener>();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(MustPick(c), 2u);
  EXPECT_EQ(driver_.opened(), 2u);

  // Retired when its last pick is released, not before.
  core_->Release(1, a);
  core_->Release(1, b);
  EXPECT_TRUE(core_->IsOpen(1));
  EXPECT_EQ(driver_.link(1)->closes(), 0);
  core_->Release(1, a);
  EXPECT_FALSE(core_->IsOpen(1));
  EXPECT_EQ(driver_.link(1)->closes(), 1);
  EXPECT_THAT(observer_->events(),
              ElementsAre("opened 1 svc.example:443", "ready 1", "draining 1",
                          "opened 2 svc.example:443", "retired 1"));
}

TEST_F(PoolCoreTest, BurstOfEightMovesSharesOneReplacement) {
  MakeTarget();
  Serve(1);
  std::vector<std::shared_ptr<Listener>> ls;
  std::mutex mu;
  std::vector<std::uint64_t> moved_to;
  for (int i = 0; i < 8; ++i) {
    auto l = std::make_shared<Listener>();
    // Like a stream: from inside the callback (no pool lock held), pick a
    // new connection, then release the old one.
    std::weak_ptr<Listener> weak = l;
    l->hook_ = [this, weak, &mu, &moved_to](std::uint64_t old) {
      auto self = weak.lock();
      auto pick = core_->Pick(self);
      ASSERT_TRUE(pick.ok());
      {
        std::lock_guard<std::mutex> lock(mu);
        moved_to.push_back(pick->connection_id);
      }
      core_->Release(old, self);
    };
    EXPECT_EQ(MustPick(l), 1u);
    ls.push_back(std::move(l));
  }
  core_->OnLinkState(1, LinkState::kIdle);
  EXPECT_THAT(moved_to, ::testing::Each(2u));
  EXPECT_EQ(moved_to.size(), 8u);
  EXPECT_EQ(driver_.opened(), 2u);
  EXPECT_EQ(core_->Stats().total_opened, 2u);
  EXPECT_FALSE(core_->IsOpen(1));  // all eight released it
  for (auto& l : ls) EXPECT_EQ(l->calls().size(), 1u);
}

TEST_F(PoolCoreTest, SuspectNeverPickedAndOthersKeepRunning) {
  MakeTarget();
  Serve(1);
  auto a = std::make_shared<Listener>();
  auto b = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(a), 1u);
  EXPECT_EQ(MustPick(b), 1u);
  core_->ReportDrainEnd(1, absl::UnavailableError("server is shutting down"));
  EXPECT_EQ(core_->Stats().suspect, 1u);
  EXPECT_TRUE(a->calls().empty());
  EXPECT_TRUE(b->calls().empty());
  EXPECT_EQ(driver_.opened(), 2u);  // replacement opened at once
  auto c = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(c), 2u);
  EXPECT_EQ(MustPick(c), 2u);
  core_->Release(1, a);
  EXPECT_TRUE(core_->IsOpen(1));
  core_->Release(1, b);
  EXPECT_FALSE(core_->IsOpen(1));
  EXPECT_EQ(driver_.link(1)->closes(), 1);
  EXPECT_THAT(observer_->events(), ::testing::Contains("suspect 1"));
}

TEST_F(PoolCoreTest, SuspectThatLeavesReadyBecomesDraining) {
  MakeTarget();
  Serve(1);
  auto a = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(a), 1u);
  core_->ReportDrainEnd(1, absl::UnavailableError("x"));
  EXPECT_TRUE(a->calls().empty());
  core_->OnLinkState(1, LinkState::kIdle);
  EXPECT_THAT(a->calls(), ElementsAre(1u));
  EXPECT_EQ(core_->Stats().draining, 1u);
  EXPECT_EQ(driver_.opened(), 2u);  // still just the one replacement
}

TEST_F(PoolCoreTest, DrainEndOnConnectionNotReadyIsIgnored) {
  MakeTarget();
  auto a = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(a), 1u);  // IDLE, never READY
  core_->ReportDrainEnd(1, absl::UnavailableError("connect failed"));
  EXPECT_EQ(core_->Stats().suspect, 0u);
  EXPECT_EQ(MustPick(a), 1u);
  core_->ReportDrainEnd(99, absl::UnavailableError("unknown id"));
  EXPECT_EQ(driver_.opened(), 1u);
}

TEST_F(PoolCoreTest, SuspectWithNoPicksIsRetiredAtOnce) {
  MakeTarget();
  Serve(1);
  auto a = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(a), 1u);
  core_->Release(1, a);  // the stream released before reporting
  core_->ReportDrainEnd(1, absl::UnavailableError("x"));
  EXPECT_FALSE(core_->IsOpen(1));
  EXPECT_EQ(MustPick(a), 2u);
}

TEST_F(PoolCoreTest, CapHoldsAndAllDrainingGivesUnavailable) {
  MakeTarget(/*max_connections=*/2);
  Serve(1);
  auto a = std::make_shared<Listener>();
  auto b = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(a), 1u);
  core_->OnLinkState(1, LinkState::kIdle);  // draining, replacement 2
  EXPECT_EQ(driver_.opened(), 2u);
  Serve(2);
  EXPECT_EQ(MustPick(b), 2u);
  core_->OnLinkState(2, LinkState::kIdle);  // draining; at the cap
  EXPECT_EQ(driver_.opened(), 2u);
  auto c = std::make_shared<Listener>();
  auto pick = core_->Pick(c);
  EXPECT_EQ(pick.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(pick.status().message()),
              HasSubstr("no usable connection"));
  EXPECT_EQ(driver_.opened(), 2u);
  // A retired connection frees a slot.
  core_->Release(1, a);
  EXPECT_EQ(MustPick(c), 3u);
  EXPECT_EQ(core_->Stats().open, 2u);
}

TEST_F(PoolCoreTest, AtTheCapPicksReuseTheLeastLoaded) {
  ConnectionPoolOptions o;
  o.addresses = {"a:1", "b:1"};
  o.max_connections = 1;
  Make(std::move(o));
  core_->OnLinkState(1, LinkState::kReady);
  core_->OnLinkState(2, LinkState::kReady);
  auto l = std::make_shared<Listener>();
  std::map<std::uint64_t, int> count;
  for (int i = 0; i < 20; ++i) ++count[MustPick(l)];
  EXPECT_EQ(count[1], 10);
  EXPECT_EQ(count[2], 10);
  EXPECT_EQ(driver_.opened(), 2u);
}

TEST_F(PoolCoreTest, ListenerMayCallThePoolFromItsCallback) {
  MakeTarget();
  core_->OnLinkState(1, LinkState::kReady);
  auto l = std::make_shared<Listener>();
  bool ran = false;
  l->hook_ = [&](std::uint64_t id) {
    // Would deadlock if called under the pool lock.
    EXPECT_EQ(core_->Stats().draining, 1u);
    core_->ReportDrainEnd(id, absl::UnavailableError("x"));
    core_->Release(id, l);
    ran = true;
  };
  EXPECT_EQ(MustPick(l), 1u);
  core_->OnLinkState(1, LinkState::kTransientFailure);
  EXPECT_TRUE(ran);
  EXPECT_FALSE(core_->IsOpen(1));
}

TEST_F(PoolCoreTest, ExpiredListenerIsSkipped) {
  MakeTarget();
  core_->OnLinkState(1, LinkState::kReady);
  auto l = std::make_shared<Listener>();
  std::weak_ptr<DrainListener> weak = l;
  EXPECT_EQ(MustPick(l), 1u);
  l.reset();
  core_->OnLinkState(1, LinkState::kIdle);  // nothing to call; no crash
  EXPECT_TRUE(core_->IsOpen(1));
  core_->Release(1, weak);  // an expired weak_ptr still matches its pick
  EXPECT_FALSE(core_->IsOpen(1));
}

TEST_F(PoolCoreTest, IdleConnectionClosesAfterIdleTimeout) {
  MakeTarget();  // idle_timeout 30 s
  core_->OnLinkState(1, LinkState::kReady);
  clock_->AdvanceBy(absl::Seconds(29));
  EXPECT_TRUE(core_->IsOpen(1));
  auto l = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(l), 1u);
  clock_->AdvanceBy(absl::Minutes(5));  // held: never idle
  EXPECT_TRUE(core_->IsOpen(1));
  core_->Release(1, l);
  clock_->AdvanceBy(absl::Seconds(29));
  EXPECT_TRUE(core_->IsOpen(1));
  clock_->AdvanceBy(absl::Seconds(1));
  EXPECT_FALSE(core_->IsOpen(1));
  EXPECT_EQ(driver_.link(1)->closes(), 1);
  EXPECT_THAT(observer_->events(), ::testing::Contains("retired 1"));
  // The next pick opens a new connection.
  EXPECT_EQ(MustPick(l), 2u);
  EXPECT_EQ(clock_->PendingTimers(), 0u);  // held: no idle timer armed
}

TEST_F(PoolCoreTest, InfiniteIdleTimeoutKeepsConnections) {
  ConnectionPoolOptions o;
  o.target = "t:1";
  o.idle_timeout = absl::InfiniteDuration();
  Make(std::move(o));
  EXPECT_EQ(clock_->PendingTimers(), 0u);
  clock_->AdvanceBy(absl::Hours(24));
  EXPECT_TRUE(core_->IsOpen(1));
}

TEST_F(PoolCoreTest, HealthNotServingDrainsLikeGoaway) {
  MakeTarget();
  Serve(1);
  auto l = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(l), 1u);
  core_->OnLinkHealth(1, true);
  EXPECT_TRUE(l->calls().empty());
  core_->OnLinkHealth(1, false);
  EXPECT_THAT(l->calls(), ElementsAre(1u));
  EXPECT_THAT(l->last_why(), HasSubstr("NOT_SERVING"));
  core_->OnLinkState(1, LinkState::kIdle);  // told once only
  EXPECT_THAT(l->calls(), ElementsAre(1u));
  EXPECT_EQ(MustPick(l), 2u);
}

TEST_F(PoolCoreTest, ShutdownNeverReadyConnectionIsReplaced) {
  MakeTarget();
  core_->OnLinkState(1, LinkState::kConnecting);
  core_->OnLinkState(1, LinkState::kTransientFailure);
  auto l = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(l), 1u);  // connect failures are not drains
  EXPECT_TRUE(l->calls().empty());
  core_->OnLinkState(1, LinkState::kShutdown);
  EXPECT_THAT(l->calls(), ElementsAre(1u));
  EXPECT_EQ(MustPick(l), 2u);  // the first replacement comes at once
  // 2 fails the same way: never usable, so its replacement waits for the
  // probe backoff (50 ms +- 20 %), and picks say so meanwhile.
  core_->OnLinkState(2, LinkState::kShutdown);
  auto early = core_->Pick(l);
  EXPECT_EQ(early.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(early.status().message()),
              HasSubstr("probe backoff"));
  EXPECT_EQ(driver_.opened(), 2u);
  clock_->AdvanceBy(absl::Milliseconds(60));
  EXPECT_EQ(driver_.opened(), 3u);  // opened by the probe timer
  EXPECT_EQ(MustPick(l), 3u);
}

TEST_F(PoolCoreTest, StatsCountEachKind) {
  ConnectionPoolOptions o;
  o.addresses = {"a:1", "b:1", "c:1"};
  Make(std::move(o));
  for (std::uint64_t id : {1, 2, 3}) Serve(id);
  auto l = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(l), 1u);
  EXPECT_EQ(MustPick(l), 2u);
  core_->OnLinkState(1, LinkState::kIdle);               // draining, held
  core_->ReportDrainEnd(2, absl::UnavailableError(""));  // suspect, held
  ConnectionPoolStats s = core_->Stats();
  EXPECT_EQ(s.open, 5u);  // 1, 2, 3 and replacements 4 (a) and 5 (b)
  EXPECT_EQ(s.ready, 1u);
  EXPECT_EQ(s.draining, 1u);
  EXPECT_EQ(s.suspect, 1u);
  EXPECT_EQ(s.picks, 2u);
  EXPECT_EQ(s.total_opened, 5u);
  EXPECT_EQ(driver_.link(4)->address(), "a:1");
  EXPECT_EQ(driver_.link(5)->address(), "b:1");
}

TEST_F(PoolCoreTest, ShutdownClosesEverythingAndFailsPicks) {
  MakeTarget();
  auto l = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(l), 1u);
  core_->Shutdown();
  EXPECT_EQ(driver_.link(1)->closes(), 1);
  EXPECT_TRUE(l->calls().empty());
  EXPECT_EQ(core_->Pick(l).status().code(), absl::StatusCode::kUnavailable);
  core_->Release(1, l);  // harmless
  core_->Shutdown();     // idempotent
  EXPECT_EQ(driver_.link(1)->closes(), 1);
}

// Streams pick, release and re-pick on drain from several threads while
// another thread flips connection states. Run under TSan; checks the
// invariants that must hold whatever the interleaving.
TEST_F(PoolCoreTest, ConcurrentPicksAndDrainsKeepInvariants) {
  MakeTarget(/*max_connections=*/4);
  constexpr int kThreads = 4;
  constexpr int kRounds = 300;
  std::atomic<bool> stop{false};
  std::atomic<int> told{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto l = std::make_shared<Listener>();
      l->hook_ = [&](std::uint64_t) { ++told; };
      for (int i = 0; i < kRounds; ++i) {
        auto pick = core_->Pick(l);
        if (!pick.ok()) {
          EXPECT_EQ(pick.status().code(), absl::StatusCode::kUnavailable);
          continue;
        }
        if (i % 7 == 0) {
          core_->ReportDrainEnd(pick->connection_id,
                                absl::UnavailableError("x"));
        }
        core_->Release(pick->connection_id, l);
      }
    });
  }
  std::thread states([&] {
    std::uint64_t id = 1;
    while (!stop.load()) {
      core_->OnLinkState(id, LinkState::kReady);
      core_->OnLinkState(id, LinkState::kIdle);
      id = core_->Stats().total_opened;
      (void)core_->Stats();
    }
  });
  for (auto& th : threads) th.join();
  stop = true;
  states.join();
  ConnectionPoolStats s = core_->Stats();
  EXPECT_EQ(s.picks, 0u);
  EXPECT_EQ(s.draining + s.suspect, 0u);  // all released, so all retired
  EXPECT_LE(s.open, 4u);
}

// The new paths (evidence reports, availability waiters, probe and
// probation timers) from several threads at once. Run under TSan.
TEST_F(PoolCoreTest, ConcurrentReportsWaitersAndTimersKeepInvariants) {
  ConnectionPoolOptions o;
  o.addresses = {"a:1", "b:1"};
  o.max_connections = 3;
  o.health_check = true;
  o.suspect_probation = absl::Milliseconds(200);
  Make(std::move(o));
  constexpr int kThreads = 3;
  constexpr int kRounds = 300;
  std::atomic<bool> stop{false};
  std::atomic<int> available{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto l = std::make_shared<Listener>();
      l->available_hook_ = [&] { ++available; };
      for (int i = 0; i < kRounds; ++i) {
        core_->NotifyWhenAvailable(l);
        auto pick = core_->Pick(l);
        if (!pick.ok()) continue;
        core_->Release(pick->connection_id, l);
        ConnectionSource::EndReport r;
        r.status = absl::UnavailableError("x");
        r.before_first_message = (i + t) % 5 == 0;
        core_->ReportUnannouncedEnd(pick->connection_id, r);
      }
    });
  }
  std::thread states([&] {
    std::uint64_t id = 1;
    while (!stop.load()) {
      core_->OnLinkState(id, LinkState::kReady);
      core_->OnLinkHealth(id, id % 3 != 0);
      clock_->AdvanceBy(absl::Milliseconds(20));
      if (id % 2 == 0) core_->OnLinkState(id, LinkState::kIdle);
      id = 1 + (id % core_->Stats().total_opened);
    }
  });
  for (auto& th : threads) th.join();
  stop = true;
  states.join();
  ConnectionPoolStats s = core_->Stats();
  EXPECT_EQ(s.picks, 0u);
  EXPECT_EQ(s.draining + s.suspect, 0u);  // all released: all retired
  EXPECT_LE(s.open, 6u);                  // 3 per address
  clock_->AdvanceBy(absl::Hours(1));
}

TEST_F(PoolCoreTest, IsConnectedIffReady) {
  MakeTarget();
  EXPECT_FALSE(core_->IsConnected(1));  // new: IDLE
  core_->OnLinkState(1, LinkState::kConnecting);
  EXPECT_FALSE(core_->IsConnected(1));
  core_->OnLinkState(1, LinkState::kReady);
  EXPECT_TRUE(core_->IsConnected(1));
  EXPECT_FALSE(core_->IsConnected(2));  // never opened
  EXPECT_FALSE(core_->IsConnected(0));

  auto l = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(l), 1u);
  core_->ReportDrainEnd(1, absl::UnavailableError("early end"));
  EXPECT_TRUE(core_->IsConnected(1));       // suspect, but still READY
  core_->OnLinkState(1, LinkState::kIdle);  // GOAWAY: draining
  EXPECT_FALSE(core_->IsConnected(1));
  EXPECT_TRUE(core_->IsOpen(1));  // held by `l`, yet not connected
  core_->Release(1, l);
  EXPECT_FALSE(core_->IsOpen(1));
  EXPECT_FALSE(core_->IsConnected(1));  // retired
}

// Runs `script` on its own thread and fails, instead of hanging, if it has
// not finished within a generous deadline (a deadlock).
void RunBounded(std::function<void()> script) {
  auto done = std::make_shared<absl::Notification>();
  std::thread t([script = std::move(script), done] {
    script();
    done->Notify();
  });
  if (done->WaitForNotificationWithTimeout(absl::Seconds(30))) {
    t.join();
  } else {
    ADD_FAILURE() << "deadlock: a callback calling back into the pool never "
                     "returned";
    t.detach();
  }
}

// Calls back into the pool from inside every observer callback and checks
// what it sees there; can drop the pool's owner from a callback.
class ReentrantObserver final : public ConnectionObserver {
 public:
  void OnConnectionOpened(std::uint64_t id, absl::string_view) override {
    Visit("opened", id);
  }
  void OnConnectionReady(std::uint64_t id) override {
    if (auto core = core_.lock()) {
      EXPECT_TRUE(core->IsConnected(id));  // the state is set before we run
    }
    Visit("ready", id);
  }
  void OnConnectionDraining(std::uint64_t id, absl::string_view) override {
    if (auto core = core_.lock()) {
      auto pick = core->Pick(listener_);
      if (pick.ok()) {
        EXPECT_NE(pick->connection_id, id);  // never the draining one
        core->Release(pick->connection_id, listener_);
      }
    }
    Visit("draining", id);
  }
  void OnConnectionSuspect(std::uint64_t id, const absl::Status&) override {
    Visit("suspect", id);
  }
  void OnConnectionRetired(std::uint64_t id) override {
    if (auto core = core_.lock()) {
      EXPECT_FALSE(core->IsConnected(id));
    }
    Visit("retired", id);
    if (drop_on_retire_ != nullptr && *drop_on_retire_ != nullptr) {
      (*drop_on_retire_)->Shutdown();  // what ~ConnectionPool does
      drop_on_retire_->reset();        // the owner's last reference
    }
  }

  int count(const std::string& kind) {
    std::lock_guard<std::mutex> lock(mu_);
    return counts_[kind];
  }

  std::weak_ptr<PoolCore> core_;
  std::shared_ptr<Listener> listener_ = std::make_shared<Listener>();
  std::shared_ptr<PoolCore>* drop_on_retire_ = nullptr;

 private:
  // Every callback: read the stats and pick/release once (nested callbacks
  // on this thread only count, so picks cannot recurse for ever).
  void Visit(const std::string& kind, std::uint64_t) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++counts_[kind];
    }
    thread_local int depth = 0;
    auto core = core_.lock();
    if (core == nullptr || depth > 0) return;
    ++depth;
    ConnectionPoolStats stats = core->Stats();
    EXPECT_LE(stats.ready + stats.draining + stats.suspect, stats.open);
    auto pick = core->Pick(listener_);
    if (pick.ok()) core->Release(pick->connection_id, listener_);
    --depth;
  }

  std::mutex mu_;
  std::map<std::string, int> counts_;
};

TEST_F(PoolCoreTest, ObserverMayCallBackFromEveryCallbackAndDropTheOwner) {
  auto observer = std::make_shared<ReentrantObserver>();
  observer_ = nullptr;
  ConnectionPoolOptions o;
  o.addresses = {"10.0.0.1:1", "10.0.0.2:1"};
  o.clock = clock_;
  o.observer = observer;
  core_ = PoolCore::Create(o, &driver_);
  observer->core_ = core_;
  std::weak_ptr<PoolCore> weak = core_;

  RunBounded([&] {
    core_->Start();  // opened 1, 2
    Serve(1);
    Serve(2);
    auto l = std::make_shared<Listener>();
    l->hook_ = [&](std::uint64_t id) {  // a listener calling back too
      EXPECT_GE(core_->Stats().draining, 1u);
      core_->Release(id, l);
    };
    const std::uint64_t first = MustPick(l);
    core_->OnLinkState(first, LinkState::kIdle);  // draining + replacement
    core_->ReportDrainEnd(first == 1 ? 2 : 1,
                          absl::UnavailableError("ended early"));  // suspect
    core_->OnLinkState(3, LinkState::kReady);
    core_->OnLinkHealth(3, /*serving=*/false);  // draining by health
    // Idle timers retire the rest, on the clock; the observer drops the
    // owner from the first of those callbacks. The timer holds the core
    // for the length of its call.
    observer->drop_on_retire_ = &core_;
    clock_->AdvanceBy(o.idle_timeout + absl::Seconds(1));
  });

  EXPECT_EQ(core_, nullptr);
  EXPECT_TRUE(weak.expired());  // destroyed once the timer call returned
  EXPECT_GE(observer->count("opened"), 4);
  EXPECT_GE(observer->count("ready"), 3);
  EXPECT_GE(observer->count("draining"), 2);
  EXPECT_EQ(observer->count("suspect"), 1);
  EXPECT_GE(observer->count("retired"), 3);
  clock_->AdvanceBy(absl::Hours(1));  // timers of the dead core do nothing
}

// --- Probe backoff: no storms --------------------------------------------

// Runs `seconds` of simulated time in 5 ms steps. Each connection the pool
// opens gets `react(id)` once, at the step it appears (the server's answer
// to it); `each_step` runs every step. Returns the opens per simulated
// second (the first connection counts in second 0).
std::vector<int> RunSimulated(
    PoolCoreTest* t, int seconds, std::uint64_t* handled,
    const std::function<void(std::uint64_t)>& react,
    const std::function<void()>& each_step = nullptr) {
  std::vector<int> per_second(static_cast<std::size_t>(seconds), 0);
  const absl::Time start = t->clock()->Now();
  while (t->clock()->Now() - start < absl::Seconds(seconds)) {
    while (*handled < t->driver()->opened()) {
      ++*handled;
      const auto second = static_cast<std::size_t>(
          absl::ToInt64Seconds(t->clock()->Now() - start));
      ++per_second[second];
      react(*handled);
    }
    if (each_step) each_step();
    t->clock()->AdvanceBy(absl::Milliseconds(5));
  }
  return per_second;
}

// With the defaults (two at once, then 50 ms, x1.6, max 300 ms, +-20 %)
// the first second holds at most 8 opens (0, 0, 40, 104, 206, 370, 610,
// 850 ms at the least) and every later one at most 5 (at least 240 ms
// apart), yet at least 2: the pool keeps probing.
void ExpectProbePace(const std::vector<int>& per_second) {
  ASSERT_FALSE(per_second.empty());
  EXPECT_LE(per_second[0], 8);
  for (std::size_t i = 1; i < per_second.size(); ++i) {
    EXPECT_LE(per_second[i], 5) << "second " << i;
    EXPECT_GE(per_second[i], 2) << "second " << i;
  }
}

TEST_F(PoolCoreTest, AnIdlePoolKeepsANotServingConnectionUntilItIsNeeded) {
  ConnectionPoolOptions o;
  o.target = "svc:1";
  o.health_check = true;
  o.idle_timeout = absl::InfiniteDuration();
  Make(std::move(o));
  std::uint64_t handled = 0;
  auto react = [&](std::uint64_t id) {
    core_->OnLinkState(id, LinkState::kReady);
    core_->OnLinkHealth(id, /*serving=*/false);
  };
  // No stream, no caller: the connection stays, its health watch open.
  RunSimulated(this, 10, &handled, react);
  EXPECT_EQ(driver_.opened(), 1u);
  EXPECT_TRUE(core_->IsOpen(1));
  EXPECT_EQ(core_->Stats().ready, 0u);
  // It serves again: usable at once, nothing opened.
  core_->OnLinkHealth(1, /*serving=*/true);
  auto l = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(l), 1u);
  core_->Release(1, l);
  // NOT_SERVING again, then someone needs a connection: it drains and a
  // replacement is opened for the pick, as with streams on it.
  core_->OnLinkHealth(1, /*serving=*/false);
  EXPECT_EQ(driver_.opened(), 1u);
  EXPECT_EQ(MustPick(l), 2u);
  EXPECT_EQ(driver_.opened(), 2u);
  EXPECT_FALSE(core_->IsOpen(1));
}

TEST_F(PoolCoreTest, NotServingWithAStreamWaitingOpensAtTheProbePace) {
  ConnectionPoolOptions o;
  o.target = "svc:1";
  o.health_check = true;
  Make(std::move(o));
  auto waiter = std::make_shared<Listener>();
  core_->NotifyWhenAvailable(waiter);
  std::uint64_t handled = 0;
  auto per_second = RunSimulated(this, 10, &handled, [&](std::uint64_t id) {
    core_->OnLinkState(id, LinkState::kReady);
    core_->OnLinkHealth(id, /*serving=*/false);
  });
  ExpectProbePace(per_second);
  EXPECT_LE(core_->Stats().open, 1u);
}

TEST_F(PoolCoreTest, GoawayAtAcceptOpensAtTheProbePace) {
  MakeTarget();
  std::uint64_t handled = 0;
  auto l = std::make_shared<Listener>();
  auto per_second = RunSimulated(
      this, 10, &handled,
      [&](std::uint64_t id) {
        core_->OnLinkState(id, LinkState::kConnecting);
        core_->OnLinkState(id, LinkState::kReady);
        core_->OnLinkState(id, LinkState::kIdle);  // GOAWAY at once
      },
      [&] {
        // A stream retrying every step: picks never open connections.
        auto pick = core_->Pick(l);
        if (pick.ok()) core_->Release(pick->connection_id, l);
      });
  ExpectProbePace(per_second);
}

TEST_F(PoolCoreTest, ShutdownBeforeReadyOpensAtTheProbePace) {
  MakeTarget();
  std::uint64_t handled = 0;
  auto per_second = RunSimulated(this, 10, &handled, [&](std::uint64_t id) {
    core_->OnLinkState(id, LinkState::kConnecting);
    core_->OnLinkState(id, LinkState::kTransientFailure);
    core_->OnLinkState(id, LinkState::kShutdown);
  });
  ExpectProbePace(per_second);
}

TEST_F(PoolCoreTest, FailingToConnectNeverOpensMoreWhateverTheStreamsDo) {
  MakeTarget();
  std::vector<std::shared_ptr<Listener>> streams;
  for (int i = 0; i < 50; ++i) streams.push_back(std::make_shared<Listener>());
  std::uint64_t handled = 0;
  auto per_second = RunSimulated(
      this, 10, &handled,
      [&](std::uint64_t id) {
        core_->OnLinkState(id, LinkState::kConnecting);
        core_->OnLinkState(id, LinkState::kTransientFailure);
      },
      [&] {
        // Every stream's call fails at once: UNAVAILABLE before any message.
        for (auto& s : streams) {
          auto pick = core_->Pick(s);
          ASSERT_TRUE(pick.ok()) << pick.status();
          core_->Release(pick->connection_id, s);
          ConnectionSource::EndReport r;
          r.status = absl::UnavailableError("failed to connect");
          r.before_first_message = true;
          core_->ReportUnannouncedEnd(pick->connection_id, r);
        }
      });
  // gRPC retries the one connection itself (on the probe schedule, set by
  // the driver); the pool opens nothing more.
  EXPECT_EQ(driver_.opened(), 1u);
  EXPECT_EQ(per_second[0], 1);
  EXPECT_EQ(core_->Stats().suspect, 0u);
}

TEST_F(PoolCoreTest, HealthyConnectionLostIsReplacedAtOnceAfterAStorm) {
  ConnectionPoolOptions o;
  o.target = "svc:1";
  o.health_check = true;
  Make(std::move(o));
  auto waiter = std::make_shared<Listener>();
  core_->NotifyWhenAvailable(waiter);
  bool serving = false;
  absl::Time told_at = absl::InfiniteFuture();
  waiter->available_hook_ = [&] { told_at = clock_->Now(); };
  std::uint64_t handled = 0;
  RunSimulated(this, 4, &handled, [&](std::uint64_t id) {
    core_->OnLinkState(id, LinkState::kReady);
    core_->OnLinkHealth(id, serving);
  });
  EXPECT_EQ(waiter->available.load(), 0);
  // The dependency serves again: the next probe finds it, and the waiter
  // hears of it within one probe interval (300 ms + 20 %).
  serving = true;
  const absl::Time back = clock_->Now();
  RunSimulated(this, 1, &handled, [&](std::uint64_t id) {
    core_->OnLinkState(id, LinkState::kReady);
    core_->OnLinkHealth(id, serving);
  });
  EXPECT_EQ(waiter->available.load(), 1);
  EXPECT_LE(told_at - back, absl::Milliseconds(360 + 5));
  // Usable for 1 s: a healthy connection again, so losing it to a GOAWAY
  // is replaced at once (make before break), not after a backoff.
  const std::size_t before = driver_.opened();
  core_->OnLinkState(handled, LinkState::kIdle);
  EXPECT_EQ(driver_.opened(), before + 1);
}

// --- NotifyWhenAvailable and the breaker ---------------------------------

TEST_F(PoolCoreTest, WaitersAreToldOnceWhenAConnectionBecomesUsable) {
  MakeTarget();
  core_->OnLinkState(1, LinkState::kConnecting);
  auto a = std::make_shared<Listener>();
  auto b = std::make_shared<Listener>();
  auto gone = std::make_shared<Listener>();
  core_->NotifyWhenAvailable(a);
  core_->NotifyWhenAvailable(a);  // twice: still told once
  core_->NotifyWhenAvailable(b);
  core_->NotifyWhenAvailable(gone);
  gone.reset();
  // Told with no pool lock held: a waiter picks from inside the call.
  std::uint64_t picked = 0;
  a->available_hook_ = [&] {
    auto pick = core_->Pick(a);
    ASSERT_TRUE(pick.ok());
    picked = pick->connection_id;
  };
  core_->OnLinkState(1, LinkState::kTransientFailure);
  EXPECT_EQ(a->available.load(), 0);
  core_->OnLinkState(1, LinkState::kReady);
  EXPECT_EQ(a->available.load(), 1);
  EXPECT_EQ(b->available.load(), 1);
  EXPECT_EQ(picked, 1u);
  // One-shot: the next transition tells only those registered again.
  clock_->AdvanceBy(absl::Seconds(1));
  core_->NotifyWhenAvailable(b);
  core_->OnLinkState(1, LinkState::kIdle);  // draining; 2 replaces it
  core_->OnLinkState(2, LinkState::kReady);
  EXPECT_EQ(a->available.load(), 1);
  EXPECT_EQ(b->available.load(), 2);
}

TEST_F(PoolCoreTest, RegisteringWhileUsableWaitsForTheNextTransition) {
  MakeTarget();
  Serve(1);
  auto a = std::make_shared<Listener>();
  core_->NotifyWhenAvailable(a);
  core_->OnLinkState(1, LinkState::kReady);  // no change
  EXPECT_EQ(a->available.load(), 0);
  core_->OnLinkState(1, LinkState::kIdle);   // none usable; 2 opened
  core_->OnLinkState(2, LinkState::kReady);  // usable again
  EXPECT_EQ(a->available.load(), 1);
}

TEST_F(PoolCoreTest, HealthCheckedConnectionIsAvailableOnlyWhenServing) {
  ConnectionPoolOptions o;
  o.target = "svc:1";
  o.health_check = true;
  Make(std::move(o));
  auto a = std::make_shared<Listener>();
  core_->NotifyWhenAvailable(a);
  core_->OnLinkState(1, LinkState::kReady);
  EXPECT_EQ(a->available.load(), 0);  // no health answer yet
  core_->OnLinkHealth(1, /*serving=*/true);
  EXPECT_EQ(a->available.load(), 1);
}

TEST_F(PoolCoreTest, AnAddressComingBackTellsWaitersAndSuspectsDoNotCount) {
  ConnectionPoolOptions o;
  o.addresses = {"a:1", "b:1"};
  Make(std::move(o));
  Serve(1);
  auto w = std::make_shared<Listener>();
  core_->NotifyWhenAvailable(w);
  core_->OnLinkState(2, LinkState::kReady);  // group b: none -> one
  EXPECT_EQ(w->available.load(), 1);
  // A suspect connection is not usable; its restoration is a transition.
  auto s = std::make_shared<Listener>();
  ASSERT_EQ(MustPick(s), 1u);
  core_->NotifyWhenAvailable(w);
  core_->ReportDrainEnd(1, absl::UnavailableError("ended early"));
  EXPECT_EQ(w->available.load(), 1);
  EXPECT_EQ(driver_.opened(), 3u);       // 3 replaces it in group a
  clock_->AdvanceBy(absl::Seconds(30));  // probation over: 1 restored
  EXPECT_EQ(w->available.load(), 2);
}

TEST_F(PoolCoreTest, OpenBreakerTurnsHalfOpenWhenTheDependencyIsBack) {
  CircuitBreakerOptions bo;
  bo.window_size = 1;
  bo.minimum_calls = 1;
  bo.break_duration = absl::Minutes(1);
  bo.max_break_duration = absl::Minutes(1);
  auto breaker = *CircuitBreaker::Create(bo, clock_, 1);
  auto permit = breaker->TryAcquire();
  ASSERT_TRUE(permit.ok());
  breaker->Record(*std::move(permit), Outcome::kFailure);
  ASSERT_EQ(breaker->state(), BreakerState::kOpen);
  ConnectionPoolOptions o;
  o.target = "svc:1";
  o.breaker = breaker;
  Make(std::move(o));
  core_->OnLinkState(1, LinkState::kConnecting);
  EXPECT_EQ(breaker->state(), BreakerState::kOpen);
  core_->OnLinkState(1, LinkState::kReady);
  EXPECT_EQ(breaker->state(), BreakerState::kHalfOpen);
  EXPECT_EQ(breaker->counts().transitions, 2u);
}

// --- Suspects: evidence, probation, never a failed pick -------------------

// What a stream does when an attempt ends unannounced: release its pick,
// then report (on one thread, as stream_core.h does).
void EndAfterDelivery(PoolCore& core, std::uint64_t id,
                      const std::shared_ptr<Listener>& stream) {
  core.Release(id, stream);
  ConnectionSource::EndReport r;
  r.status = absl::UnavailableError("load shed");
  core.ReportUnannouncedEnd(id, r);
}

TEST_F(PoolCoreTest, OneStreamShedAgainAndAgainNeverMakesItSuspect) {
  ConnectionPoolOptions o;
  o.target = "svc.example:443";
  o.reopen_elsewhere_after_end = false;  // about suspicion, not placement
  Make(std::move(o));
  Serve(1);
  auto other = std::make_shared<Listener>();
  ASSERT_EQ(MustPick(other), 1u);  // a healthy stream alongside
  auto s = std::make_shared<Listener>();
  for (int i = 0; i < 200; ++i) {
    ASSERT_EQ(MustPick(s), 1u) << i;
    EndAfterDelivery(*core_, 1, s);
    clock_->AdvanceBy(absl::Milliseconds(5));
  }
  EXPECT_EQ(core_->Stats().suspect, 0u);
  EXPECT_EQ(driver_.opened(), 1u);
}

// reopen_elsewhere_after_end: a stream does not go straight back to the
// connection its attempt just ended on (a server that ends its streams
// before its GOAWAY), although one end is not evidence enough to make it
// suspect for everyone.
TEST_F(PoolCoreTest, StreamReopensElsewhereAfterItsAttemptEndedThere) {
  MakeTarget();
  Serve(1);
  auto other = std::make_shared<Listener>();
  ASSERT_EQ(MustPick(other), 1u);
  auto s = std::make_shared<Listener>();
  ASSERT_EQ(MustPick(s), 1u);
  EndAfterDelivery(*core_, 1, s);
  EXPECT_EQ(core_->Stats().suspect, 0u);
  EXPECT_EQ(MustPick(s), 2u);  // opened for it (connecting)
  EXPECT_EQ(driver_.opened(), 2u);
  auto fresh = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(fresh), 1u);  // others still prefer the READY one
  // Once the window has passed, the end is forgotten.
  core_->Release(2, s);
  clock_->AdvanceBy(absl::Seconds(1));
  core_->OnLinkState(2, LinkState::kReady);
  EXPECT_EQ(MustPick(s), 2u);  // fewest picks, no longer avoided
  core_->Release(2, s);
  core_->OnLinkState(2, LinkState::kIdle);
  EXPECT_EQ(MustPick(s), 1u);
}

// Only the latest end counts: a stream shed on every connection alternates
// between two and never makes the pool open more.
TEST_F(PoolCoreTest, StreamShedEverywhereAlternatesAndOpensNoMore) {
  MakeTarget();
  Serve(1);
  auto s = std::make_shared<Listener>();
  std::uint64_t on = MustPick(s);
  ASSERT_EQ(on, 1u);
  for (int i = 0; i < 50; ++i) {
    EndAfterDelivery(*core_, on, s);
    clock_->AdvanceBy(absl::Milliseconds(5));
    const std::uint64_t next = MustPick(s);
    EXPECT_NE(next, on) << i;
    on = next;
    if (!core_->IsConnected(on)) core_->OnLinkState(on, LinkState::kReady);
  }
  EXPECT_EQ(driver_.opened(), 2u);
  EXPECT_EQ(core_->Stats().suspect, 0u);
}

TEST_F(PoolCoreTest, StreamTakesAnotherReadyConnectionAfterAnEnd) {
  ConnectionPoolOptions o;
  o.addresses = {"a:1", "b:1"};
  Make(std::move(o));
  Serve(1);
  Serve(2);
  auto t = std::make_shared<Listener>();
  const std::uint64_t left = MustPick(t);
  const std::uint64_t other = left == 1 ? 2 : 1;
  auto u = std::make_shared<Listener>();
  ASSERT_EQ(MustPick(u), other);  // least loaded
  ASSERT_EQ(MustPick(u), left);
  ASSERT_EQ(MustPick(u), other);  // `other` has more picks now
  EndAfterDelivery(*core_, left, t);
  EXPECT_EQ(MustPick(t), other);  // not back to `left`, the less loaded one
  EXPECT_EQ(driver_.opened(), 2u);
  EXPECT_EQ(core_->Stats().suspect, 0u);
}

TEST_F(PoolCoreTest, StreamGoesBackWhenNoOtherConnectionMayOpen) {
  MakeTarget(/*max_connections=*/1);
  Serve(1);
  auto s = std::make_shared<Listener>();
  ASSERT_EQ(MustPick(s), 1u);
  EndAfterDelivery(*core_, 1, s);
  EXPECT_EQ(MustPick(s), 1u);  // at the cap: back to it, never a failure
  EXPECT_EQ(driver_.opened(), 1u);
}

TEST_F(PoolCoreTest, DifferentStreamsEndingWithinTheWindowMakeItSuspect) {
  MakeTarget();
  Serve(1);
  std::vector<std::shared_ptr<Listener>> s;
  for (int i = 0; i < 4; ++i) {
    s.push_back(std::make_shared<Listener>());
    ASSERT_EQ(MustPick(s.back()), 1u);
  }
  EndAfterDelivery(*core_, 1, s[0]);
  clock_->AdvanceBy(absl::Milliseconds(400));
  EndAfterDelivery(*core_, 1, s[1]);
  EXPECT_EQ(core_->Stats().suspect, 0u);  // two are not enough
  clock_->AdvanceBy(absl::Milliseconds(400));
  EndAfterDelivery(*core_, 1, s[2]);  // three within 1 s
  EXPECT_EQ(core_->Stats().suspect, 1u);
  EXPECT_THAT(observer_->events(), ::testing::Contains("suspect 1"));
  EXPECT_TRUE(s[3]->calls().empty());  // streams on it are not told
}

TEST_F(PoolCoreTest, EndsFurtherApartThanTheWindowAreForgotten) {
  MakeTarget();
  Serve(1);
  std::vector<std::shared_ptr<Listener>> s;
  for (int i = 0; i < 6; ++i) {
    s.push_back(std::make_shared<Listener>());
    ASSERT_EQ(MustPick(s.back()), 1u);
  }
  for (auto& l : s) {
    EndAfterDelivery(*core_, 1, l);
    clock_->AdvanceBy(absl::Milliseconds(500));  // two per window at most
  }
  EXPECT_EQ(core_->Stats().suspect, 0u);
}

TEST_F(PoolCoreTest, ReportsWithNoReleaseBeforeCountAsDifferentStreams) {
  MakeTarget();
  Serve(1);
  ConnectionSource::EndReport r;
  r.status = absl::UnavailableError("x");
  core_->ReportUnannouncedEnd(1, r);
  core_->ReportUnannouncedEnd(1, r);
  EXPECT_EQ(core_->Stats().suspect, 0u);
  core_->ReportUnannouncedEnd(1, r);
  EXPECT_FALSE(core_->IsOpen(1));  // suspect with no picks: retired
}

TEST_F(PoolCoreTest, OneEndBeforeTheFirstMessageOrAStallIsEnough) {
  ConnectionPoolOptions o;
  o.addresses = {"a:1", "b:1"};
  Make(std::move(o));
  Serve(1);
  Serve(2);
  auto s = std::make_shared<Listener>();
  ASSERT_EQ(MustPick(s), 1u);
  ASSERT_EQ(MustPick(s), 2u);
  ConnectionSource::EndReport early;
  early.status = absl::UnavailableError("server is shutting down");
  early.before_first_message = true;
  core_->ReportUnannouncedEnd(1, early);
  ConnectionSource::EndReport stalled;
  stalled.status = absl::DeadlineExceededError("stalled");
  stalled.stalled = true;
  core_->ReportUnannouncedEnd(2, stalled);
  EXPECT_EQ(core_->Stats().suspect, 2u);
}

TEST_F(PoolCoreTest, SuspectReturnsAfterProbationUnlessNewEvidence) {
  MakeTarget();  // probation 30 s
  Serve(1);
  auto s = std::make_shared<Listener>();
  ASSERT_EQ(MustPick(s), 1u);
  core_->ReportDrainEnd(1, absl::UnavailableError("early"));
  ASSERT_EQ(core_->Stats().suspect, 1u);
  clock_->AdvanceBy(absl::Seconds(20));
  core_->ReportDrainEnd(1, absl::UnavailableError("again"));  // restarts
  clock_->AdvanceBy(absl::Seconds(20));
  EXPECT_EQ(core_->Stats().suspect, 1u);  // 40 s, but 20 s since evidence
  EXPECT_TRUE(s->calls().empty());
  clock_->AdvanceBy(absl::Seconds(10));
  EXPECT_EQ(core_->Stats().suspect, 0u);
  EXPECT_EQ(core_->Stats().restored, 1u);
  EXPECT_THAT(observer_->events(), ::testing::Contains("restored 1"));
  // Back in service: it takes picks again (fewest picks: the replacement 2
  // has none, so free 1's pick first).
  core_->Release(1, s);
  core_->OnLinkState(2, LinkState::kReady);
  auto t = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(t), 1u);
}

TEST_F(PoolCoreTest, InfiniteProbationKeepsItSuspect) {
  ConnectionPoolOptions o;
  o.target = "svc:1";
  o.suspect_probation = absl::InfiniteDuration();
  Make(std::move(o));
  Serve(1);
  auto s = std::make_shared<Listener>();
  ASSERT_EQ(MustPick(s), 1u);
  core_->ReportDrainEnd(1, absl::UnavailableError("early"));
  clock_->AdvanceBy(absl::Hours(48));
  EXPECT_EQ(core_->Stats().suspect, 1u);
  EXPECT_EQ(core_->Stats().restored, 0u);
}

TEST_F(PoolCoreTest, AtTheCapSuspectsAreALastResortNotAFailure) {
  MakeTarget(/*max_connections=*/2);
  Serve(1);
  auto a = std::make_shared<Listener>();
  ASSERT_EQ(MustPick(a), 1u);
  core_->ReportDrainEnd(1, absl::UnavailableError("early"));  // 2 opened
  Serve(2);
  auto b = std::make_shared<Listener>();
  ASSERT_EQ(MustPick(b), 2u);
  core_->ReportDrainEnd(2, absl::UnavailableError("early"));  // at the cap
  EXPECT_EQ(driver_.opened(), 2u);
  auto c = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(c), 1u);  // suspect, READY, fewest picks: 1 (tie)
  EXPECT_EQ(MustPick(c), 2u);
  // Once one leaves READY only the other is left.
  core_->OnLinkState(1, LinkState::kIdle);
  EXPECT_EQ(MustPick(c), 2u);
}

TEST_F(PoolCoreTest, SheddingOnEveryConnectionNeverFailsAPick) {
  ConnectionPoolOptions o;
  o.addresses = {"a:1", "b:1"};
  o.max_connections = 2;
  Make(std::move(o));
  std::vector<std::shared_ptr<Listener>> streams;
  for (int i = 0; i < 24; ++i) {
    streams.push_back(std::make_shared<Listener>());
  }
  std::map<std::shared_ptr<Listener>, std::uint64_t> on;
  int suspects_seen = 0;
  for (int round = 0; round < 300; ++round) {
    // Every new connection connects at once.
    for (std::uint64_t id = 1; id <= driver_.opened(); ++id) {
      if (core_->IsOpen(id) && !core_->IsConnected(id)) {
        core_->OnLinkState(id, LinkState::kReady);
      }
    }
    for (auto& s : streams) {
      if (on.count(s) == 0) {
        auto pick = core_->Pick(s);
        ASSERT_TRUE(pick.ok()) << "round " << round << ": " << pick.status();
        on[s] = pick->connection_id;
      }
    }
    // A third of the streams are shed (after their first message).
    for (std::size_t i = round % 3; i < streams.size(); i += 3) {
      EndAfterDelivery(*core_, on[streams[i]], streams[i]);
      on.erase(streams[i]);
    }
    suspects_seen =
        std::max<int>(suspects_seen, static_cast<int>(core_->Stats().suspect));
    clock_->AdvanceBy(absl::Milliseconds(50));
  }
  EXPECT_GT(suspects_seen, 0);  // the test did make suspects
  EXPECT_LE(core_->Stats().open, 4u);
}

// --- Standby connections ---------------------------------------------------

TEST(ConnectionPoolOptionsTest, StandbyConnectionsDefaultAndExtremes) {
  ConnectionPoolOptions o;
  o.target = "t:1";
  EXPECT_EQ(o.standby_connections, 0);
  struct Case {
    int standby;
    int max_connections;
    bool valid;
  };
  const std::vector<Case> cases = {
      {0, 1, true},
      {1, 2, true},
      {7, 8, true},
      {64, 1024, true},
      {-1, 8, false},
      {1, 1, false},
      {8, 8, false},
      {65, 1024, false},
      {std::numeric_limits<int>::max(), 1024, false},
      {std::numeric_limits<int>::min(), 8, false},
  };
  for (const Case& c : cases) {
    o.standby_connections = c.standby;
    o.max_connections = c.max_connections;
    const absl::Status s = Validate(o);
    EXPECT_EQ(s.ok(), c.valid) << c.standby << "/" << c.max_connections;
    if (!c.valid) {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(s.message()), HasSubstr("standby_connections"));
      EXPECT_EQ(ConnectionPool::Create(o).status().code(),
                absl::StatusCode::kInvalidArgument);
    }
  }
}

class PoolStandbyTest : public PoolCoreTest {
 protected:
  void MakeStandby(int standby, int max_connections = 8) {
    ConnectionPoolOptions o;
    o.target = "svc.example:443";
    o.standby_connections = standby;
    o.max_connections = max_connections;
    Make(std::move(o));
  }
};

TEST_F(PoolStandbyTest, SparesOpenOnlyOnceTheGroupHasPicks) {
  MakeStandby(1);
  Serve(1);
  clock_->AdvanceBy(absl::Seconds(20));  // < idle_timeout
  EXPECT_EQ(driver_.opened(), 1u);       // no streams: no spare
  auto a = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(a), 1u);
  EXPECT_EQ(driver_.opened(), 2u);  // the spare, opened after the pick
  Serve(2);
  EXPECT_EQ(core_->Stats().ready, 2u);
  // Picks spread over both (fewest picks first).
  auto b = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(b), 2u);
  EXPECT_EQ(driver_.opened(), 2u);
}

TEST_F(PoolStandbyTest, GoawayMovesToTheReadySpareWithoutAConnect) {
  MakeStandby(1);
  Serve(1);
  std::vector<std::shared_ptr<Listener>> ls;
  std::mutex mu;
  std::vector<std::uint64_t> moved_to;
  std::vector<bool> moved_to_ready;
  for (int i = 0; i < 8; ++i) {
    auto l = std::make_shared<Listener>();
    std::weak_ptr<Listener> weak = l;
    l->hook_ = [this, weak, &mu, &moved_to,
                &moved_to_ready](std::uint64_t old) {
      auto self = weak.lock();
      auto pick = core_->Pick(self);
      ASSERT_TRUE(pick.ok()) << pick.status();
      const bool ready = core_->IsConnected(pick->connection_id);
      {
        std::lock_guard<std::mutex> lock(mu);
        moved_to.push_back(pick->connection_id);
        moved_to_ready.push_back(ready);
      }
      core_->Release(old, self);
    };
    EXPECT_EQ(MustPick(l), 1u);  // the spare is not READY yet
    ls.push_back(std::move(l));
  }
  Serve(2);  // the spare is READY before the GOAWAY
  EXPECT_EQ(driver_.opened(), 2u);

  core_->OnLinkState(1, LinkState::kIdle);     // GOAWAY
  EXPECT_THAT(moved_to, ::testing::Each(2u));  // the spare, already there
  EXPECT_THAT(moved_to_ready, ::testing::Each(true));
  EXPECT_EQ(moved_to.size(), 8u);
  for (auto& l : ls) EXPECT_EQ(l->calls().size(), 1u);
  EXPECT_FALSE(core_->IsOpen(1));
  // A new spare is opened in the background, once, 20 ms after the drain:
  // its connect does not compete with the moves for the client's cores.
  EXPECT_EQ(driver_.opened(), 2u);
  clock_->AdvanceBy(absl::Milliseconds(19));
  EXPECT_EQ(driver_.opened(), 2u);
  clock_->AdvanceBy(absl::Milliseconds(1));
  EXPECT_EQ(driver_.opened(), 3u);
  Serve(3);
  EXPECT_EQ(core_->Stats().ready, 2u);
  EXPECT_EQ(driver_.opened(), 3u);
}

TEST_F(PoolStandbyTest, TheLastUsableConnectionDrainingIsReplacedAtOnce) {
  MakeStandby(1);
  Serve(1);
  auto a = std::make_shared<Listener>();
  auto b = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(a), 1u);
  Serve(2);
  EXPECT_EQ(MustPick(b), 2u);
  core_->OnLinkState(1, LinkState::kIdle);  // GOAWAY: 2 takes the moves
  EXPECT_EQ(driver_.opened(), 2u);          // the spare's refill waits
  clock_->AdvanceBy(absl::Milliseconds(5));
  // The spare drains too, before the refill: the streams need a
  // connection now, so the pool opens one without waiting (and, as for a
  // group with none, its spare with it).
  core_->OnLinkState(2, LinkState::kIdle);
  EXPECT_EQ(driver_.opened(), 4u);
  Serve(3);
  Serve(4);
  EXPECT_EQ(MustPick(a), 3u);
  clock_->AdvanceBy(absl::Seconds(10));
  EXPECT_EQ(driver_.opened(), 4u);
}

TEST_F(PoolStandbyTest, ADrainWithoutAUsableSpareOpensItsReplacementAtOnce) {
  MakeStandby(1);
  Serve(1);
  auto a = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(a), 1u);
  // The spare is still connecting at the GOAWAY (not usable): waiting
  // would leave the stream with nowhere to go.
  clock_->AdvanceBy(absl::Seconds(1));
  core_->OnLinkState(1, LinkState::kIdle);
  EXPECT_EQ(driver_.opened(), 3u);
}

TEST_F(PoolStandbyTest, SpareIsKeptWhileStreamsExistAndClosedWhenIdle) {
  MakeStandby(1);  // idle_timeout 30 s
  Serve(1);
  auto a = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(a), 1u);
  Serve(2);
  clock_->AdvanceBy(absl::Minutes(10));  // the spare holds no pick
  EXPECT_TRUE(core_->IsOpen(2));
  EXPECT_EQ(driver_.opened(), 2u);
  core_->Release(1, a);  // the group's last pick
  clock_->AdvanceBy(absl::Seconds(29));
  EXPECT_TRUE(core_->IsOpen(1));
  EXPECT_TRUE(core_->IsOpen(2));
  clock_->AdvanceBy(absl::Seconds(1));
  EXPECT_FALSE(core_->IsOpen(1));
  EXPECT_FALSE(core_->IsOpen(2));
  EXPECT_EQ(core_->Stats().open, 0u);
  EXPECT_EQ(clock_->PendingTimers(), 0u);
  // Streams again: the pool opens what it needs again.
  EXPECT_EQ(MustPick(a), 3u);
  EXPECT_EQ(driver_.opened(), 4u);
}

TEST_F(PoolStandbyTest, SparesRespectTheCap) {
  MakeStandby(1, /*max_connections=*/2);
  Serve(1);
  auto a = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(a), 1u);
  Serve(2);
  EXPECT_EQ(driver_.opened(), 2u);
  core_->OnLinkState(1, LinkState::kIdle);  // 1 drains, a still holds it
  // One live (2) + one draining (1) = the cap: no new spare.
  EXPECT_EQ(driver_.opened(), 2u);
  EXPECT_EQ(core_->Stats().open, 2u);
  core_->Release(1, a);  // 1 retires: room for a spare
  EXPECT_EQ(MustPick(a), 2u);
  clock_->AdvanceBy(absl::Milliseconds(20));  // the refill after a drain
  EXPECT_EQ(driver_.opened(), 3u);
  EXPECT_LE(core_->Stats().open, 2u);
}

TEST_F(PoolStandbyTest, ManySparesOpenOnTheProbeScheduleNotAllAtOnce) {
  MakeStandby(7, /*max_connections=*/8);
  Serve(1);
  auto a = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(a), 1u);
  // The first two opens of a group come at once, the rest at the probe
  // pace (50 ms x1.6 .. 300 ms, +-20 %).
  EXPECT_EQ(driver_.opened(), 2u);
  clock_->AdvanceBy(absl::Milliseconds(30));
  EXPECT_EQ(driver_.opened(), 2u);
  clock_->AdvanceBy(absl::Seconds(5));
  EXPECT_EQ(driver_.opened(), 8u);  // all seven spares, never more
  clock_->AdvanceBy(absl::Minutes(5));
  EXPECT_EQ(driver_.opened(), 8u);
  EXPECT_EQ(core_->Stats().open, 8u);
}

TEST_F(PoolStandbyTest, ZeroStandbyKeepsOneConnection) {
  MakeStandby(0);
  Serve(1);
  auto a = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(a), 1u);
  clock_->AdvanceBy(absl::Minutes(1));
  EXPECT_EQ(driver_.opened(), 1u);
}

// --- A cap on the streams of one connection -------------------------------

TEST(ConnectionPoolOptionsTest, MaxStreamsPerConnectionDefaultAndExtremes) {
  ConnectionPoolOptions o;
  o.target = "t:1";
  EXPECT_EQ(o.max_streams_per_connection, 0);
  for (int good : {0, 1, 100, ConnectionPoolOptions::kMaxStreamsPerConnection}) {
    o.max_streams_per_connection = good;
    EXPECT_TRUE(Validate(o).ok()) << good << ": " << Validate(o);
  }
  for (int bad : {-1, ConnectionPoolOptions::kMaxStreamsPerConnection + 1,
                  std::numeric_limits<int>::max(),
                  std::numeric_limits<int>::min()}) {
    o.max_streams_per_connection = bad;
    const absl::Status s = Validate(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("max_streams_per_connection must be in [0, 1000000]"));
    EXPECT_EQ(ConnectionPool::Create(o).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

class PoolStreamCapTest : public PoolCoreTest {
 protected:
  void MakeCapped(int per_connection, int max_connections = 8) {
    ConnectionPoolOptions o;
    o.target = "svc.example:443";
    o.max_streams_per_connection = per_connection;
    o.max_connections = max_connections;
    Make(std::move(o));
  }
  // `n` streams picked one after another; each connection the pool opens
  // meanwhile becomes READY before the next pick.
  void PickServing(int n) {
    for (int i = 0; i < n; ++i) {
      auto l = std::make_shared<Listener>();
      picked_.emplace_back(l, MustPick(l));
      while (served_ < driver_.opened()) Serve(++served_);
    }
  }
  std::map<std::uint64_t, int> PicksPerConnection() const {
    std::map<std::uint64_t, int> per;
    for (const auto& [l, id] : picked_) ++per[id];
    return per;
  }
  std::vector<std::pair<std::shared_ptr<Listener>, std::uint64_t>> picked_;
  std::size_t served_ = 0;
};

TEST_F(PoolStreamCapTest, StreamsSpreadOverConnectionsAtTheCap) {
  MakeCapped(10);
  PickServing(30);
  // A connection opens once the group's picks fill the others, so the
  // next pick finds room: three hold 10 each, a fourth waits empty.
  EXPECT_EQ(driver_.opened(), 4u);
  const std::map<std::uint64_t, int> per = PicksPerConnection();
  ASSERT_EQ(per.size(), 3u);
  for (const auto& [id, n] : per) EXPECT_EQ(n, 10) << "connection " << id;
}

TEST_F(PoolStreamCapTest, APickPrefersAConnectingConnectionToAFullOne) {
  MakeCapped(10);
  Serve(1);
  for (int i = 0; i < 10; ++i) {
    auto l = std::make_shared<Listener>();
    picked_.emplace_back(l, MustPick(l));
  }
  ASSERT_EQ(driver_.opened(), 2u);  // room for the next, still connecting
  auto next = std::make_shared<Listener>();
  EXPECT_EQ(MustPick(next), 2u);
}

TEST_F(PoolStreamCapTest, AboveMaxConnectionsPicksStillSpreadFewestFirst) {
  MakeCapped(10, /*max_connections=*/2);
  PickServing(50);
  EXPECT_EQ(driver_.opened(), 2u);  // never above max_connections
  const std::map<std::uint64_t, int> per = PicksPerConnection();
  ASSERT_EQ(per.size(), 2u);
  for (const auto& [id, n] : per) EXPECT_EQ(n, 25) << "connection " << id;
}

TEST_F(PoolStreamCapTest, StreamsLeavingAGoawayFindRoom) {
  MakeCapped(10);
  PickServing(30);
  ASSERT_EQ(driver_.opened(), 4u);  // three full, one with room
  // Connection 1 drains: its streams count until they leave, so the pool
  // opens a replacement for their share.
  core_->OnLinkState(1, LinkState::kIdle);
  EXPECT_EQ(driver_.opened(), 5u);
  Serve(5);
  for (auto& [l, id] : picked_) {
    if (id != 1) continue;
    const std::uint64_t to = MustPick(l);
    EXPECT_NE(to, 1u);
    core_->Release(1, l);
    id = to;
  }
  const std::map<std::uint64_t, int> per = PicksPerConnection();
  EXPECT_EQ(per.count(1), 0u);
  for (const auto& [id, n] : per) EXPECT_LE(n, 10) << "connection " << id;
}

TEST_F(PoolStreamCapTest, ConnectionsNoLongerNeededCloseWhenIdle) {
  MakeCapped(10);  // idle_timeout 30 s
  PickServing(30);
  ASSERT_EQ(driver_.opened(), 4u);
  // Streams end until one connection's share is left: connection 1 is full,
  // so one spare with room stays.
  for (auto& [l, id] : picked_) {
    if (id != 1) core_->Release(id, l);
  }
  clock_->AdvanceBy(absl::Seconds(30));
  EXPECT_EQ(core_->Stats().open, 2u);
  auto one = std::find_if(picked_.begin(), picked_.end(),
                          [](const auto& p) { return p.second == 1; });
  ASSERT_NE(one, picked_.end());
  core_->Release(1, one->first);  // 9 left: room on connection 1
  clock_->AdvanceBy(absl::Seconds(30));
  EXPECT_TRUE(core_->IsOpen(1));
  EXPECT_EQ(core_->Stats().open, 1u);
  EXPECT_EQ(driver_.opened(), 4u);
}

TEST(DrainFanOutTest, BoundedConcurrency) {
  EXPECT_EQ(internal::DrainFanOut(0), 1u);
  EXPECT_EQ(internal::DrainFanOut(internal::kDrainFanOutMinListeners - 1), 1u);
  EXPECT_GE(internal::DrainFanOut(internal::kDrainFanOutMinListeners), 2u);
  EXPECT_LE(internal::DrainFanOut(1000000), internal::kDrainFanOutMaxThreads);
  EXPECT_GE(internal::DrainFanOut(1000000), 2u);
}

TEST_F(PoolCoreTest, ManyListenersAreToldOnceEachFromFewThreads) {
  MakeTarget();
  Serve(1);
  constexpr int kListeners = 200;
  std::vector<std::shared_ptr<Listener>> ls;
  std::mutex mu;
  std::set<std::thread::id> threads;
  int inside = 0, most_inside = 0;
  for (int i = 0; i < kListeners; ++i) {
    auto l = std::make_shared<Listener>();
    l->hook_ = [&](std::uint64_t) {
      std::lock_guard<std::mutex> lock(mu);
      threads.insert(std::this_thread::get_id());
      most_inside = std::max(most_inside, ++inside);
      --inside;
    };
    EXPECT_EQ(MustPick(l), 1u);
    ls.push_back(std::move(l));
  }
  core_->OnLinkState(1, LinkState::kIdle);
  // All told before OnLinkState returned, each once.
  for (auto& l : ls) EXPECT_THAT(l->calls(), ElementsAre(1u));
  EXPECT_LE(threads.size(), internal::kDrainFanOutMaxThreads);
  EXPECT_LE(most_inside, static_cast<int>(internal::kDrainFanOutMaxThreads));
}

// The generated messages speak grpc.health.v1's wire format: the same field
// numbers and enum values as gRPC's health.proto.
TEST(HealthMessagesTest, MatchGrpcHealthV1OnTheWire) {
  using internal::health::v1::HealthCheckRequest;
  using internal::health::v1::HealthCheckResponse;
  HealthCheckRequest request;
  EXPECT_EQ(request.SerializeAsString(), "");  // service "" is no bytes
  request.set_service("svc");
  EXPECT_EQ(request.SerializeAsString(), std::string("\x0a\x03svc", 5));

  HealthCheckResponse response;
  ASSERT_TRUE(response.ParseFromString(""));
  EXPECT_EQ(response.status(), HealthCheckResponse::UNKNOWN);
  ASSERT_TRUE(response.ParseFromString(std::string("\x08\x01")));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  ASSERT_TRUE(response.ParseFromString(std::string("\x08\x02")));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(static_cast<int>(HealthCheckResponse::SERVICE_UNKNOWN), 3);
  // Unknown fields are skipped; a truncated message is malformed.
  ASSERT_TRUE(response.ParseFromString(std::string("\x12\x02hi\x08\x02", 6)));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(response.ParseFromString(std::string("\x08")));
}

TEST(SingleChannelSourceTest, AlwaysConnectionOneNeverDrains) {
  auto source = SingleChannelSource(nullptr);
  auto l = std::make_shared<Listener>();
  for (int i = 0; i < 3; ++i) {
    auto pick = source->Pick(l);
    ASSERT_TRUE(pick.ok());
    EXPECT_EQ(pick->connection_id, 1u);
    EXPECT_EQ(pick->channel, nullptr);
  }
  source->ReportDrainEnd(1, absl::UnavailableError("x"));
  EXPECT_EQ(source->Pick(l)->connection_id, 1u);
  source->Release(1, l);
  EXPECT_TRUE(l->calls().empty());
}

}  // namespace
}  // namespace tether
