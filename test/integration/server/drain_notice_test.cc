// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The drain notice end to end on 127.0.0.1: a server drained by
// tether::server::DrainController sends the app's notice on every open
// stream; tether clients with `is_drain_notice` move make before break at
// the notice, before the server's GOAWAY, with nothing lost, repeated,
// failed or counted against the breaker. Every wait is on an event with a
// generous deadline; nothing sleeps.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "test/integration/server/feed_clients.h"
#include "test/integration/server/feed_server.h"
#include "tether/circuit_breaker.h"
#include "tether/connection_pool.h"
#include "tether/server/drain_controller.h"

namespace tether {
namespace testsupport {
namespace {

using feed::Clients;
using feed::Fleet;
using feed::Kind;
using feed::kWait;
using feed::Log;
using feed::PoolLog;
using ::tether::server::DrainReport;

// When the drain sent its GOAWAY.
class GoawayTime final : public server::DrainObserver {
 public:
  void OnGoaway(std::size_t, absl::Duration) override {
    std::lock_guard<std::mutex> lock(mu_);
    at_ = absl::Now();
  }
  absl::Time at() {
    std::lock_guard<std::mutex> lock(mu_);
    return at_;
  }

 private:
  std::mutex mu_;
  absl::Time at_ = absl::InfiniteFuture();
};

// Two servers, "a" (leaving) and "b"; every stream starts on "a" (b is
// down at first), then b comes up and a drains with a long notice grace:
// the notice alone moves the streams.
void MoveOnNotice(Kind kind) {
  constexpr int kStreams = 16;
  auto goaway = std::make_shared<GoawayTime>();
  FeedServerOptions ao;
  ao.name = "a";
  ao.drain.unready_window = absl::Milliseconds(100);
  // Long: the GOAWAY comes early only because every call left.
  ao.drain.notice_grace = absl::Seconds(20);
  ao.drain.goaway_grace = absl::Milliseconds(300);
  ao.drain.drain_deadline = absl::Seconds(3);
  ao.drain.observer = goaway;
  ao.drain.log_sink = std::make_shared<QuietSink>();
  FeedServer a(ao);
  FeedServerOptions bo;
  bo.name = "b";
  FeedServer b(bo);
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  b.Kill();  // its port is kept for the restart

  auto log = std::make_shared<Log>();
  ConnectionPoolOptions po;
  po.addresses = {a.address(), b.address()};
  po.observer = std::make_shared<PoolLog>(log);
  auto pool = ConnectionPool::Create(po);
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto breaker = CircuitBreaker::Create(CircuitBreakerOptions{});
  ASSERT_TRUE(breaker.ok()) << breaker.status();
  ReconnectingStreamOptions so;
  so.breaker = *breaker;
  Clients clients(*pool, log, kind, kStreams, so, /*notice_hook=*/true);
  ASSERT_TRUE(clients.fleet().WaitMoreFrom("a", 3));
  ASSERT_TRUE(b.Start().ok());
  ASSERT_TRUE(log->WaitReady(b.address()));
  const BreakerCounts before = (*breaker)->counts();

  const absl::Time begin = absl::Now();
  clients.fleet().MarkStallsFrom(begin);
  ASSERT_TRUE(a.drain().Begin());
  ASSERT_TRUE(clients.fleet().WaitMoreFrom("b", 3))
      << "the streams did not move to b";
  absl::optional<DrainReport> report =
      a.drain().WaitFor(server::HardBound(ao.drain) + kWait);
  ASSERT_TRUE(report.has_value());
  EXPECT_TRUE(report->server_stopped) << DrainReportToString(*report);
  // Every call left within the notice grace: none was open at the GOAWAY.
  EXPECT_EQ(report->calls_at_goaway, 0u) << DrainReportToString(*report);
  EXPECT_LT(goaway->at() - begin, ao.drain.notice_grace);

  absl::Duration max_stall = absl::ZeroDuration();
  for (const Fleet::Delivered& d : clients.fleet().Get()) {
    EXPECT_FALSE(d.done) << d.status;
    EXPECT_EQ(d.bad, 0);      // nothing lost, nothing twice
    EXPECT_EQ(d.notices, 0);  // the app does not see the notice
    EXPECT_EQ(d.last_server, "b");
    max_stall = std::max(max_stall, d.max_gap);
  }
  // Every attempt on a heard the notice and was left by the client once
  // its replacement on b delivered, before the GOAWAY: none ended with an
  // error, and the pool never saw a drain before the GOAWAY.
  const std::set<std::uint64_t> on_a = log->ConnectionsTo(a.address());
  EXPECT_GE(log->FirstDraining(on_a), goaway->at());
  int moved = 0;
  for (const Log::Attempt& at : log->Attempts()) {
    if (on_a.count(at.connection) != 0) {
      EXPECT_TRUE(at.noticed) << "stream " << at.stream;
      EXPECT_TRUE(at.by_client) << "stream " << at.stream << " " << at.status;
      EXPECT_LT(at.ended, goaway->at()) << "stream " << at.stream;
    } else if (at.started > begin) {
      ++moved;
      EXPECT_EQ(at.reason, AttemptReason::kDrainNotice);
    }
  }
  EXPECT_EQ(moved, kStreams);
  const BreakerCounts after = (*breaker)->counts();
  EXPECT_EQ(after.failed, before.failed);
  std::printf(
      "[figure] %d %s streams moved on the drain notice: GOAWAY %s after "
      "Begin() (unready_window %s), max stall %s, breaker +%llu failures; "
      "%s\n",
      kStreams, kind == Kind::kWatch ? "server" : "bidi",
      absl::FormatDuration(goaway->at() - begin).c_str(),
      absl::FormatDuration(ao.drain.unready_window).c_str(),
      absl::FormatDuration(max_stall).c_str(),
      static_cast<unsigned long long>(after.failed - before.failed),
      DrainReportToString(*report).c_str());
}

TEST(DrainNoticeTest, ServerStreamsMoveOnTheNotice) {
  MoveOnNotice(Kind::kWatch);
}

TEST(DrainNoticeTest, BidiStreamsMoveOnTheNotice) { MoveOnNotice(Kind::kChat); }

}  // namespace
}  // namespace testsupport
}  // namespace tether
