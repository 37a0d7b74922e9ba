// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Streams on a `ConnectionPool` leave a server that is
// going away (GOAWAY, the "cancel before GOAWAY" ordering bug, health
// NOT_SERVING, one address of a list shutting down), against real gRPC
// servers on 127.0.0.1. Every wait is on an event with a generous deadline;
// nothing sleeps. Timing bounds are far above what loopback needs (a move
// takes a few ms) so that a loaded 2-core machine does not make them flaky.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "support/fault_proxy.h"
#include "test/integration/rollout_fixture.h"
#include "test/integration/stream_test_util.h"
#include "test/support/one_shot.h"
#include "test/support/test_server.h"
#include "tether/connection_pool.h"
#include "tether/observer.h"
#include "tether/reconnecting_stream.h"

namespace tether {
namespace testsupport {
namespace {

using ::testing::HasSubstr;
using ::tether::support::FaultProxy;

// How long any single event may take before the test gives up. Generous:
// the events themselves take milliseconds.
constexpr absl::Duration kWait = absl::Seconds(30);
constexpr int kStreams = 8;

// The pool's connection events, with waits. The pool owns it; its
// destructor tells `gone` that the pool is gone.
class ConnLog final : public ConnectionObserver {
 public:
  explicit ConnLog(std::shared_ptr<OneShot> gone) : gone_(std::move(gone)) {}
  ~ConnLog() override { gone_->Signal(); }

  void OnConnectionOpened(std::uint64_t id, absl::string_view) override {
    std::lock_guard<std::mutex> lock(mu_);
    opened_.insert(id);
    opened_at_[id] = absl::Now();
  }
  void OnConnectionReady(std::uint64_t id) override {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.insert(id);
    cv_.notify_all();
  }
  std::set<std::uint64_t> opened() const {
    std::lock_guard<std::mutex> lock(mu_);
    return opened_;
  }
  std::set<std::uint64_t> ready() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ready_;
  }
  // When the pool told of connection `id`'s opening (InfiniteFuture: not).
  absl::Time OpenedAt(std::uint64_t id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = opened_at_.find(id);
    return it == opened_at_.end() ? absl::InfiniteFuture() : it->second;
  }
  void OnConnectionDraining(std::uint64_t id, absl::string_view why) override {
    std::lock_guard<std::mutex> lock(mu_);
    draining_[id] = std::string(why);
    cv_.notify_all();
  }
  void OnConnectionSuspect(std::uint64_t id, const absl::Status&) override {
    std::lock_guard<std::mutex> lock(mu_);
    suspect_.insert(id);
    cv_.notify_all();
  }

  bool WaitForReady(std::size_t n, absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                        [&] { return ready_.size() >= n; });
  }
  std::map<std::uint64_t, std::string> draining() const {
    std::lock_guard<std::mutex> lock(mu_);
    return draining_;
  }
  std::set<std::uint64_t> draining_ids() const {
    std::set<std::uint64_t> ids;
    for (const auto& e : draining()) ids.insert(e.first);
    return ids;
  }
  std::set<std::uint64_t> suspect() const {
    std::lock_guard<std::mutex> lock(mu_);
    return suspect_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::uint64_t> opened_;
  std::map<std::uint64_t, absl::Time> opened_at_;
  std::set<std::uint64_t> ready_;
  std::map<std::uint64_t, std::string> draining_;
  std::set<std::uint64_t> suspect_;
  const std::shared_ptr<OneShot> gone_;
};

class DrainRollout : public ::testing::Test {
 protected:
  // Pool options with a fresh connection log, which the pool owns; `conns`
  // stays valid while the pool lives, `pool_gone` is signalled when it dies.
  ConnectionPoolOptions PoolOptions() {
    auto log = std::make_shared<ConnLog>(pool_gone_);
    conns_ = log.get();
    ConnectionPoolOptions o;
    o.observer = std::move(log);
    return o;
  }
  ConnLog* conns() { return conns_; }
  OneShot& pool_gone() { return *pool_gone_; }

  // The setup of tests 1-3: servers A and B, a Service-like proxy routing
  // new connections to A, a pool on the proxy, and kStreams streams all
  // delivering from A. Check HasFatalFailure() after it.
  void StartStreamsOnA(bool health_check, int streams = kStreams) {
    a_ = StartServer("A");
    b_ = StartServer("B");
    ASSERT_TRUE(a_ && b_);
    ASSERT_TRUE(proxy_.Start().ok());
    ASSERT_TRUE(proxy_.SetBackend(a_->address()).ok());
    ConnectionPoolOptions po = PoolOptions();
    po.target = proxy_.address();
    po.health_check = health_check;
    pool_ = MakePool(std::move(po));
    ASSERT_NE(pool_, nullptr);
    streams_ = std::make_unique<Streams>(streams);
    streams_->StartAll(pool_);
    ASSERT_TRUE(streams_->fleet.WaitMoreFrom("A", 5, kWait));
    ASSERT_TRUE(a_->WaitForOpenStreams(streams, kWait));
  }

  // Declared in teardown order: streams, then pool, proxy and servers.
  std::unique_ptr<TestServer> a_, b_;
  FaultProxy proxy_;
  std::shared_ptr<ConnectionPool> pool_;
  std::unique_ptr<Streams> streams_;

 private:
  std::shared_ptr<OneShot> pool_gone_ = std::make_shared<OneShot>();
  ConnLog* conns_ = nullptr;
};

// 1. Graceful rollout behind a Service-like proxy: GOAWAY is the signal.
TEST_F(DrainRollout, GracefulShutdownMovesEveryStreamToTheNewBackendAtOnce) {
  StartStreamsOnA(/*health_check=*/false);
  ASSERT_FALSE(HasFatalFailure());
  TestServer* a = a_.get();
  TestServer* b = b_.get();
  FaultProxy& proxy = proxy_;
  Streams& s = *streams_;
  ConnLog* conns = this->conns();
  const std::int64_t watches_on_a = a->stats().watches_started;
  EXPECT_EQ(watches_on_a, kStreams);

  ASSERT_TRUE(proxy.SetBackend(b->address()).ok());  // new connections -> B
  const absl::Duration grace = absl::Seconds(5);
  const absl::Time shutdown_at = absl::Now();
  a->ShutdownAsync(grace);  // GOAWAY now; streams cut at +5 s

  ASSERT_TRUE(s.fleet.WaitAll(
      [](const Delivered& d) { return d.From("B") >= 3; }, kWait));
  absl::Duration slowest = absl::ZeroDuration();
  for (int i = 0; i < kStreams; ++i) {
    const Delivered d = s.fleet.Get(i);
    slowest = std::max(slowest, d.first_from.at("B") - shutdown_at);
  }
  // "Well before the deadline": loopback needs a few ms; 2 s leaves room for
  // a loaded machine and is still far from the 5 s at which A cuts streams.
  EXPECT_LT(slowest, absl::Seconds(2));
  // With every stream moved and its old attempt cancelled, A finishes its
  // shutdown long before the grace period ends.
  ASSERT_TRUE(a->WaitForStopped(kWait));

  s.ExpectClean();
  // Zero attempts on A after its GOAWAY, counted at A and by the streams.
  EXPECT_EQ(a->stats().watches_started, watches_on_a);
  const std::set<std::uint64_t> drained = conns->draining_ids();
  ASSERT_FALSE(drained.empty());
  for (const auto& e : conns->draining()) {
    EXPECT_THAT(e.second, HasSubstr("READY")) << "connection " << e.first;
  }
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_EQ(s.logs[i]->LaterAttemptsOn(drained), 0) << "stream " << i;
    EXPECT_GE(s.streams[i]->stats().migrations, 1u) << "stream " << i;
    // The old attempt stopped where the replacement resumed (the hold): B
    // sent nothing the stream had already delivered.
    EXPECT_EQ(s.streams[i]->stats().duplicates_dropped, 0u) << "stream " << i;
    // Every attempt after the first ran on B and resumed where A left off.
    for (const AttemptLog::Entry& e : s.logs[i]->Entries()) {
      if (e.info.attempt == 1) continue;
      EXPECT_TRUE(e.info.resumed) << "stream " << i;
      EXPECT_GT(e.info.resume_after_seq, 0u) << "stream " << i;
    }
  }
  for (std::uint64_t after : b->after_seqs()) EXPECT_GT(after, 0u);
  StopStreamsAndWaitForPool(s, pool_, pool_gone());
}

// 2. The ordering bug: A ends its streams UNAVAILABLE before any GOAWAY and
// keeps failing new ones for 300 ms while its connection stays READY.
TEST_F(DrainRollout, CancelBeforeGoawayReachesTheOldServerAtMostOncePerStream) {
  StartStreamsOnA(/*health_check=*/false);
  ASSERT_FALSE(HasFatalFailure());
  TestServer* a = a_.get();
  TestServer* b = b_.get();
  FaultProxy& proxy = proxy_;
  Streams& s = *streams_;
  ConnLog* conns = this->conns();
  const std::int64_t watches_before = a->stats().watches_started;
  ASSERT_EQ(watches_before, kStreams);

  ASSERT_TRUE(proxy.SetBackend(b->address()).ok());
  a->CancelFirstDrain(absl::Milliseconds(300));

  ASSERT_TRUE(s.fleet.WaitAll(
      [](const Delivered& d) { return d.From("B") >= 3; }, kWait));
  ASSERT_TRUE(a->WaitForStopped(kWait));

  s.ExpectClean();
  // After the first UNAVAILABLE at most one attempt per stream reached A.
  const std::int64_t after = a->stats().watches_started - watches_before;
  EXPECT_LE(after, kStreams);
  // The connection the streams were on became suspect (still READY when the
  // streams ended), and per stream at most one later attempt used it.
  const std::set<std::uint64_t> suspect = conns->suspect();
  EXPECT_FALSE(suspect.empty());
  std::set<std::uint64_t> old_conns = suspect;
  for (std::uint64_t id : conns->draining_ids()) old_conns.insert(id);
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_LE(s.logs[i]->LaterAttemptsOn(old_conns), 1) << "stream " << i;
  }
  StopStreamsAndWaitForPool(s, pool_, pool_gone());
}

// A stream alone on its connection, cut by its server before the GOAWAY,
// reopens at once (the pool's reopen share for a lone stream is 0), in
// one attempt and not onto that connection: the end's report reaches the
// pool before the reopen picks.
TEST_F(DrainRollout, ALoneStreamCutBeforeGoawayReopensAtOnceElsewhere) {
  StartStreamsOnA(/*health_check=*/false, /*streams=*/1);
  ASSERT_FALSE(HasFatalFailure());
  Streams& s = *streams_;
  const std::int64_t watches_before = a_->stats().watches_started;

  ASSERT_TRUE(proxy_.SetBackend(b_->address()).ok());
  a_->CancelFirstDrain(absl::Milliseconds(300));
  ASSERT_TRUE(s.fleet.WaitAll(
      [](const Delivered& d) { return d.From("B") >= 3; }, kWait));

  s.ExpectClean();
  EXPECT_EQ(a_->stats().watches_started, watches_before)
      << "the reopen went back to the server that cut it";
  const std::vector<AttemptLog::Entry> attempts = s.logs[0]->Entries();
  ASSERT_GE(attempts.size(), 2u);
  EXPECT_TRUE(attempts[0].got_message && attempts[0].ended);
  EXPECT_EQ(s.logs[0]->LaterAttemptsOn({attempts[0].info.connection_id}), 0);
  EXPECT_EQ(attempts.size(), 2u) << "the move took more than one attempt";
  ASSERT_TRUE(a_->WaitForStopped(kWait));
  StopStreamsAndWaitForPool(s, pool_, pool_gone());
}

// 3. Readiness: A reports NOT_SERVING but keeps serving; the streams leave
// it on the health signal alone, before any GOAWAY.
TEST_F(DrainRollout, NotServingMovesStreamsWhileTheOldServerStillRuns) {
  StartStreamsOnA(/*health_check=*/true);
  ASSERT_FALSE(HasFatalFailure());
  TestServer* a = a_.get();
  TestServer* b = b_.get();
  FaultProxy& proxy = proxy_;
  Streams& s = *streams_;
  ConnLog* conns = this->conns();
  const std::int64_t watches_on_a = a->stats().watches_started;

  ASSERT_TRUE(proxy.SetBackend(b->address()).ok());
  a->SetServing(false);

  ASSERT_TRUE(s.fleet.WaitAll(
      [](const Delivered& d) { return d.From("B") >= 3; }, kWait));
  // A never stopped: the streams moved on readiness alone, and their old
  // attempts were cancelled by the client once B delivered.
  EXPECT_TRUE(a->running());
  EXPECT_TRUE(a->WaitForOpenStreams(0, kWait));
  EXPECT_EQ(a->stats().watches_started, watches_on_a);
  const auto drained = conns->draining();
  ASSERT_FALSE(drained.empty());
  for (const auto& e : drained) {
    EXPECT_THAT(e.second, HasSubstr("NOT_SERVING")) << "connection " << e.first;
  }
  s.ExpectClean();
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_EQ(s.logs[i]->LaterAttemptsOn(conns->draining_ids()), 0)
        << "stream " << i;
  }
  EXPECT_TRUE(a->running());
  StopStreamsAndWaitForPool(s, pool_, pool_gone());
}

// 4. An address list of three servers; one shuts down and its streams spread
// over the other two.
TEST_F(DrainRollout, StreamsOfAStoppedAddressSpreadOverTheOthers) {
  auto a = StartServer("A");
  auto b = StartServer("B");
  auto c = StartServer("C");
  ASSERT_TRUE(a && b && c);
  ConnectionPoolOptions po = PoolOptions();
  ConnLog* conns = this->conns();
  po.addresses = {a->address(), b->address(), c->address()};
  auto pool = MakePool(std::move(po));
  ASSERT_NE(pool, nullptr);
  // Spreading is least-loaded over READY connections: start once all three
  // are READY, so that A gets its share.
  ASSERT_TRUE(conns->WaitForReady(3, kWait));

  constexpr int kMany = 12;
  Streams s(kMany);
  s.StartAll(pool);
  ASSERT_TRUE(
      s.fleet.WaitAll([](const Delivered& d) { return d.count >= 5; }, kWait));
  std::vector<int> on_a;
  for (int i = 0; i < kMany; ++i) {
    const Delivered d = s.fleet.Get(i);
    ASSERT_EQ(d.by_server.size(), 1u) << "stream " << i;
    if (d.From("A") > 0) on_a.push_back(i);
  }
  ASSERT_GE(on_a.size(), 2u) << "A needs at least two streams to spread";
  const std::int64_t watches_on_a = a->stats().watches_started;

  a->ShutdownAsync(absl::Seconds(5));
  // Each of A's streams delivers from B or C; the others go on.
  ASSERT_TRUE(s.fleet.WaitAll(
      [](const Delivered& d) {
        return d.From("A") == 0 || d.From("B") + d.From("C") >= 3;
      },
      kWait));
  ASSERT_TRUE(a->WaitForStopped(kWait));
  int to_b = 0, to_c = 0;
  for (int i : on_a) {
    const Delivered d = s.fleet.Get(i);
    if (d.From("B") > 0) ++to_b;
    if (d.From("C") > 0) ++to_c;
  }
  EXPECT_GT(to_b, 0) << "no stream of A moved to B";
  EXPECT_GT(to_c, 0) << "no stream of A moved to C";
  EXPECT_EQ(to_b + to_c, static_cast<int>(on_a.size()));
  EXPECT_EQ(a->stats().watches_started, watches_on_a);
  s.ExpectClean();
  for (int i = 0; i < kMany; ++i) {
    EXPECT_EQ(s.logs[i]->LaterAttemptsOn(conns->draining_ids()), 0)
        << "stream " << i;
  }
  StopStreamsAndWaitForPool(s, pool, pool_gone());
}

// 5. A standby connection: the pool keeps a second READY
// connection (here to B) while streams run on A's; A's GOAWAY moves every
// stream onto it, with no connect on the critical path, and the pool then
// opens a new spare in the background, no sooner than 20 ms after the
// drain (its connect does not compete with the moves).
TEST_F(DrainRollout, GoawayMovesStreamsOntoTheReadyStandbyConnection) {
  a_ = StartServer("A");
  b_ = StartServer("B");
  ASSERT_TRUE(a_ && b_);
  ASSERT_TRUE(proxy_.Start().ok());
  ASSERT_TRUE(proxy_.SetBackend(a_->address()).ok());
  ConnectionPoolOptions po = PoolOptions();
  ConnLog* conns = this->conns();
  po.target = proxy_.address();
  po.standby_connections = 1;
  pool_ = MakePool(std::move(po));
  ASSERT_NE(pool_, nullptr);
  ASSERT_TRUE(conns->WaitForReady(1, kWait));  // connection 1 -> A
  // The spare is opened with the first stream; route it to B, as a
  // Service would spread connections over its backends.
  ASSERT_TRUE(proxy_.SetBackend(b_->address()).ok());
  streams_ = std::make_unique<Streams>(kStreams);
  Streams& s = *streams_;
  s.StartAll(pool_);
  ASSERT_TRUE(conns->WaitForReady(2, kWait));  // the spare, 2 -> B
  // 100 events at the server's 5 ms tick: both connections have been usable
  // for longer than `probe_max_backoff` (300 ms), so the pool counts them
  // stable and would open a replacement at once; only the refill delay
  // holds it back.
  ASSERT_TRUE(s.fleet.WaitAll([](const Delivered& d) { return d.count >= 100; },
                              kWait));
  const std::set<std::uint64_t> before = conns->ready();
  EXPECT_EQ(before, (std::set<std::uint64_t>{1, 2}));
  std::vector<int> on_a;
  for (int i = 0; i < kStreams; ++i) {
    if (s.fleet.Get(i).From("A") > 0) on_a.push_back(i);
  }
  // Streams started before the spare was READY all went to A.
  ASSERT_FALSE(on_a.empty());
  const std::int64_t watches_on_a = a_->stats().watches_started;

  const absl::Time shutdown_at = absl::Now();  // before the pool's mark
  a_->ShutdownAsync(absl::Seconds(5));         // GOAWAY on connection 1
  ASSERT_TRUE(s.fleet.WaitAll(
      [](const Delivered& d) { return d.From("B") >= 3; }, kWait));
  ASSERT_TRUE(a_->WaitForStopped(kWait));
  for (int i : on_a) {
    bool moved = false;
    for (const AttemptLog::Entry& e : s.logs[i]->Entries()) {
      if (e.info.attempt == 1) continue;
      moved = true;
      // The move ran on a connection that was READY before the GOAWAY.
      EXPECT_TRUE(before.count(e.info.connection_id))
          << "stream " << i << " attempt " << e.info.attempt
          << " on connection " << e.info.connection_id;
      EXPECT_NE(e.info.connection_id, 1u) << "stream " << i;
    }
    EXPECT_TRUE(moved) << "stream " << i;
  }
  EXPECT_EQ(a_->stats().watches_started, watches_on_a);
  s.ExpectClean();
  // The pool replaces the spare in the background: two READY again.
  ASSERT_TRUE(conns->WaitForReady(3, kWait));
  EXPECT_TRUE(conns->opened().count(3));
  EXPECT_GE(conns->OpenedAt(3) - shutdown_at, absl::Milliseconds(20));
  EXPECT_LE(pool_->Stats().open, 3u);
  StopStreamsAndWaitForPool(s, pool_, pool_gone());
}

}  // namespace
}  // namespace testsupport
}  // namespace tether
