// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// tether::server::DrainController against real gRPC servers on 127.0.0.1
// with tether's own client (a ConnectionPool over two servers, streams on
// the one that leaves): the order of a drain as the client sees it, for
// server and bidi streams, callback and sync handlers, 64 streams at once,
// with and without health checking; the hard bound with a handler that
// never ends; a connection that never finishes its handshake. Every wait is
// on an event with a generous deadline; nothing sleeps.
#include "tether/server/drain_controller.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "feed.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "support/tls_certs.h"
#include "test/integration/server/feed_clients.h"
#include "test/integration/server/feed_server.h"
#include "tether/connection_pool.h"
#include "tether/observer.h"
#include "tether/reconnecting_bidi_stream.h"
#include "tether/reconnecting_stream.h"

namespace tether {
namespace testsupport {
namespace {

using feed::Clients;
using feed::Fleet;
using feed::Kind;
using feed::kWait;
using feed::Log;
using feed::PoolLog;
using ::tether::server::DrainController;
using ::tether::server::DrainOptions;
using ::tether::server::DrainReport;
using ::tether::test::FeedEvent;
using ::tether::test::FeedRequest;

// Timings small enough for a test, large enough that every step is visible.
DrainOptions TestDrain() {
  DrainOptions o;
  o.unready_window = absl::Milliseconds(300);
  o.notice_grace = absl::Milliseconds(300);
  o.goaway_grace = absl::Milliseconds(300);
  o.drain_deadline = absl::Seconds(3);
  o.stop_slack = absl::Seconds(1);
  return o;
}

// Records when the server-side steps happened.
class StepTimes final : public server::DrainObserver {
 public:
  void OnUnready(absl::Duration) override { Set(unready_); }
  void OnNotice(std::size_t) override { Set(notice_); }
  void OnGoaway(std::size_t, absl::Duration) override { Set(goaway_); }
  void OnEndCalls(std::size_t, const grpc::Status&) override { Set(end_); }
  absl::Time unready() { return Get(unready_); }
  absl::Time notice() { return Get(notice_); }
  absl::Time goaway() { return Get(goaway_); }
  absl::Time end() { return Get(end_); }

 private:
  void Set(absl::Time& t) {
    std::lock_guard<std::mutex> lock(mu_);
    t = absl::Now();
  }
  absl::Time Get(const absl::Time& t) {
    std::lock_guard<std::mutex> lock(mu_);
    return t;
  }
  std::mutex mu_;
  absl::Time unready_ = absl::InfiniteFuture();
  absl::Time notice_ = absl::InfiniteFuture();
  absl::Time goaway_ = absl::InfiniteFuture();
  absl::Time end_ = absl::InfiniteFuture();
};

struct Scenario {
  Kind kind = Kind::kWatch;
  bool sync = false;
  int streams = 8;
  bool health = false;  // the pool watches grpc.health.v1
};

// Two servers, "a" (leaving) and "b"; every stream starts on "a" (b is
// down at first), then b comes up and a drains.
void RunRollout(const Scenario& sc) {
  auto steps = std::make_shared<StepTimes>();
  FeedServerOptions ao;
  ao.name = "a";
  ao.sync = sc.sync;
  ao.drain = TestDrain();
  ao.drain.observer = steps;
  ao.drain.log_sink = std::make_shared<QuietSink>();
  FeedServer a(ao);
  FeedServerOptions bo;
  bo.name = "b";
  bo.sync = sc.sync;
  FeedServer b(bo);
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  b.Kill();  // its port is kept for the restart

  auto log = std::make_shared<Log>();
  ConnectionPoolOptions po;
  po.addresses = {a.address(), b.address()};
  po.health_check = sc.health;
  po.observer = std::make_shared<PoolLog>(log);
  auto pool = ConnectionPool::Create(po);
  ASSERT_TRUE(pool.ok()) << pool.status();
  Clients clients(*pool, log, sc.kind, sc.streams);
  ASSERT_TRUE(clients.fleet().WaitMoreFrom("a", 3));
  ASSERT_TRUE(b.Start().ok());
  ASSERT_TRUE(log->WaitReady(b.address()));

  const absl::Time begin = absl::Now();
  ASSERT_TRUE(a.drain().Begin());
  ASSERT_TRUE(clients.fleet().WaitMoreFrom("b", 3))
      << "the streams did not move to b";
  absl::optional<DrainReport> report =
      a.drain().WaitFor(server::HardBound(ao.drain) + kWait);
  ASSERT_TRUE(report.has_value());
  EXPECT_TRUE(report->server_stopped) << DrainReportToString(*report);
  EXPECT_EQ(report->calls_stuck, 0u);

  // No stream ended, none lost or repeated an event.
  for (const Fleet::Delivered& d : clients.fleet().Get()) {
    EXPECT_FALSE(d.done) << d.status;
    EXPECT_EQ(d.bad, 0);
  }
  // Nothing opened on the leaving server once the drain began: no stream
  // came back to it.
  EXPECT_EQ(a.CallsStartedSince(begin), 0);
  const std::set<std::uint64_t> on_a = log->ConnectionsTo(a.address());
  const absl::Time draining = log->FirstDraining(on_a);
  ASSERT_NE(draining, absl::InfiniteFuture()) << "the pool never saw a drain";
  int attempts_on_a = 0;
  for (const Log::Attempt& at : log->Attempts()) {
    if (on_a.count(at.connection) == 0) continue;
    ++attempts_on_a;
    EXPECT_LT(at.started, begin) << "an attempt opened on a during its drain";
    // The order: the pool knew a was draining before any of its streams
    // there ended (by the client's own cancel after the move, or by the
    // server).
    if (at.ended != absl::InfiniteFuture()) {
      EXPECT_GE(at.ended, draining)
          << "stream " << at.stream << " ended " << at.status << " "
          << absl::FormatDuration(draining - at.ended)
          << " before the pool saw the drain";
    }
  }
  EXPECT_EQ(attempts_on_a, sc.streams);

  std::printf(
      "%d %s streams, %s handlers, health %s: the pool saw the drain "
      "%s after Begin(), Shutdown at %s; %s\n",
      sc.streams, sc.kind == Kind::kWatch ? "server" : "bidi",
      sc.sync ? "sync" : "callback", sc.health ? "on" : "off",
      absl::FormatDuration(draining - begin).c_str(),
      absl::FormatDuration(steps->goaway() - begin).c_str(),
      DrainReportToString(*report).c_str());
  if (sc.health) {
    // NOT_SERVING started every move within the unready window, long
    // before the GOAWAY. (When the old call is left depends on the client's
    // handoff: the new one must deliver something the old one has not.)
    EXPECT_LT(draining, begin + ao.drain.unready_window);
    for (const Log::Attempt& at : log->Attempts()) {
      if (on_a.count(at.connection) == 0 && at.started > begin) {
        EXPECT_LT(at.started, begin + ao.drain.unready_window);
      }
    }
  } else {
    // Without health checks the client learns from the GOAWAY, which left
    // after the unready window and the notice grace (the client ignores
    // notices), and each stream had its notice before.
    EXPECT_GE(steps->goaway() - begin,
              ao.drain.unready_window + ao.drain.notice_grace);
    EXPECT_GE(draining - begin,
              ao.drain.unready_window + ao.drain.notice_grace);
    EXPECT_EQ(report->calls_noticed, static_cast<std::size_t>(sc.streams));
    for (const Fleet::Delivered& d : clients.fleet().Get()) {
      EXPECT_EQ(d.notices, 1);
      EXPECT_LT(d.notice_at, draining);
    }
  }
}

TEST(DrainControllerTest, ServerStreamsLeaveInOrder) {
  RunRollout({Kind::kWatch, /*sync=*/false, 8, /*health=*/false});
}

TEST(DrainControllerTest, BidiStreamsLeaveInOrder) {
  RunRollout({Kind::kChat, /*sync=*/false, 8, /*health=*/false});
}

TEST(DrainControllerTest, SyncHandlersLeaveInOrder) {
  RunRollout({Kind::kWatch, /*sync=*/true, 4, /*health=*/false});
}

TEST(DrainControllerTest, SyncBidiHandlersLeaveInOrder) {
  RunRollout({Kind::kChat, /*sync=*/true, 4, /*health=*/false});
}

TEST(DrainControllerTest, SixtyFourStreamsLeaveInOrder) {
  RunRollout({Kind::kWatch, /*sync=*/false, 64, /*health=*/false});
}

TEST(DrainControllerTest, WithHealthChecksNothingOpensAfterTheFlip) {
  RunRollout({Kind::kWatch, /*sync=*/false, 8, /*health=*/true});
}

TEST(DrainControllerTest, WithHealthChecksBidiStreamsLeaveBeforeTheGoaway) {
  RunRollout({Kind::kChat, /*sync=*/false, 8, /*health=*/true});
}

}  // namespace
}  // namespace testsupport
}  // namespace tether
