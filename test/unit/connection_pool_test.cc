// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The pool's decisions, with fake connections and a fake clock: no network.
#include "tether/connection_pool.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "connections/pool_core.h"
#include "connections/pool_health_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tether/testing/fake_clock.h"
#include "tether/transport.h"

namespace tether {
namespace {

using internal::LinkState;
using internal::PoolCore;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using DrainListener = ConnectionSource::DrainListener;

class FakeLink final : public internal::Link {
 public:
  FakeLink(std::uint64_t id, std::string address)
      : id_(id), address_(std::move(address)) {}
  std::shared_ptr<grpc::Channel> channel() override { return nullptr; }
  void Close() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++closes_;
  }
  int closes() {
    std::lock_guard<std::mutex> lock(mu_);
    return closes_;
  }
  std::uint64_t id() const { return id_; }
  const std::string& address() const { return address_; }

 private:
  const std::uint64_t id_;
  const std::string address_;
  std::mutex mu_;
  int closes_ = 0;
};

class FakeDriver final : public internal::ConnectionDriver {
 public:
  std::shared_ptr<internal::Link> Open(std::uint64_t id,
                                       const std::string& address) override {
    std::lock_guard<std::mutex> lock(mu_);
    links_.push_back(std::make_shared<FakeLink>(id, address));
    return links_.back();
  }
  std::size_t opened() {
    std::lock_guard<std::mutex> lock(mu_);
    return links_.size();
  }
  std::shared_ptr<FakeLink> link(std::uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& l : links_) {
      if (l->id() == id) return l;
    }
    return nullptr;
  }

 private:
  std::mutex mu_;
  std::vector<std::shared_ptr<FakeLink>> links_;
};

// Records drain calls; optionally runs a hook inside the callback.
class Listener final : public DrainListener {
 public:
  void OnConnectionDraining(std::uint64_t id, absl::string_view why) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back(id);
      last_why_ = std::string(why);
    }
    if (hook_) hook_(id);
  }
  std::vector<std::uint64_t> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  std::string last_why() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_why_;
  }
  std::function<void(std::uint64_t)> hook_;

 private:
  std::mutex mu_;
  std::vector<std::uint64_t> calls_;
  std::string last_why_;
};

class RecordingObserver final : public ConnectionObserver {
 public:
  void OnConnectionOpened(std::uint64_t id, absl::string_view target) override {
    Add(absl::StrCat("opened ", id, " ", target));
  }
  void OnConnectionReady(std::uint64_t id) override {
    Add(absl::StrCat("ready ", id));
  }
  void OnConnectionDraining(std::uint64_t id, absl::string_view) override {
    Add(absl::StrCat("draining ", id));
  }
  void OnConnectionSuspect(std::uint64_t id, const absl::Status&) override {
    Add(absl::StrCat("suspect ", id));
  }
  void OnConnectionRetired(std::uint64_t id) override {
    Add(absl::StrCat("retired ", id));
  }
  std::vector<std::string> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  void Add(std::string e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
  }
  std::mutex mu_;
  std::vector<std::string> events_;
};

class PoolCoreTest : public ::testing::Test {
 protected:
  void Make(ConnectionPoolOptions o) {
    ASSERT_TRUE(Validate(o).ok()) << Validate(o);
    o.clock = clock_;
    o.observer = observer_;
    core_ = PoolCore::Create(o, &driver_);
    core_->Start();
  }
  void MakeTarget(int max_connections = 8) {
    ConnectionPoolOptions o;
    o.target = "svc.example:443";
    o.max_connections = max_connections;
    Make(std::move(o));
  }
  // Connection `id` is READY and stays usable long enough (>= the probe
  // backoff's max) to count as healthy: losing it is replaced at once.
  void Serve(std::uint64_t id) {
    core_->OnLinkState(id, LinkState::kReady);
    clock_->AdvanceBy(absl::Seconds(1));
  }
  std::uint64_t MustPick(const std::shared_ptr<Listener>& l) {
    auto pick = core_->Pick(l);
    EXPECT_TRUE(pick.ok()) << pick.status();
    return pick.ok() ? pick->connection_id : 0;
  }

  std::shared_ptr<testing::FakeClock> clock_ =
      std::make_shared<testing::FakeClock>();
  std::shared_ptr<RecordingObserver> observer_ =
      std::make_shared<RecordingObserver>();
  FakeDriver driver_;
  std::shared_ptr<PoolCore> core_;
};

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
  // It never became usable: its replacement waits for the probe backoff
  // (50 ms +- 20 %), and picks say so meanwhile.
  auto early = core_->Pick(l);
  EXPECT_EQ(early.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(early.status().message()),
              HasSubstr("probe backoff"));
  EXPECT_EQ(driver_.opened(), 1u);
  clock_->AdvanceBy(absl::Milliseconds(60));
  EXPECT_EQ(driver_.opened(), 2u);  // opened by the probe timer
  EXPECT_EQ(MustPick(l), 2u);
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

TEST(HealthCodecTest, EncodesRequestAndDecodesResponse) {
  EXPECT_EQ(internal::EncodeHealthCheckRequest(""), "");
  EXPECT_EQ(internal::EncodeHealthCheckRequest("svc"),
            std::string("\x0a\x03svc", 5));
  EXPECT_EQ(internal::DecodeHealthCheckResponseStatus(""),
            internal::kHealthUnknown);
  EXPECT_EQ(internal::DecodeHealthCheckResponseStatus(std::string("\x08\x01")),
            internal::kHealthServing);
  EXPECT_EQ(internal::DecodeHealthCheckResponseStatus(std::string("\x08\x02")),
            internal::kHealthNotServing);
  // Unknown fields are skipped; a truncated message is malformed.
  EXPECT_EQ(internal::DecodeHealthCheckResponseStatus(
                std::string("\x12\x02hi\x08\x02", 6)),
            internal::kHealthNotServing);
  EXPECT_EQ(internal::DecodeHealthCheckResponseStatus(std::string("\x08")), -1);
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
