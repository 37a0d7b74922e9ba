// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// A drain behind an L7 proxy (Debian's nginx and HAProxy, each forwarding
// gRPC over h2 to two servers on 127.0.0.1): the server's GOAWAY stops at
// the proxy, so the client sees no drain. Side by side, printed as
// `[figure]` lines: the same client on a GOAWAY it sees itself (no proxy),
// behind the proxy with the drain notice (`is_drain_notice`: every stream
// moves make before break), and without it (the streams on the leaving
// server are cut: how their calls end, how tether classifies those ends,
// what the breaker records, the longest stall). Also gRPC's own cancel at
// the deadline, and a drain longer than the proxy's own timeouts.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "test/integration/server/feed_clients.h"
#include "test/integration/server/feed_server.h"
#include "test/support/l7_proxy.h"
#include "tether/circuit_breaker.h"
#include "tether/classification.h"
#include "tether/connection_pool.h"
#include "tether/observer.h"
#include "tether/server/drain_controller.h"

namespace tether {
namespace testsupport {
namespace {

using feed::Clients;
using feed::Kind;
using feed::kWait;
using feed::Log;
using feed::PoolLog;
using ::tether::server::DrainReport;

// How the leaving server's side and the client handle the drain.
enum class Side {
  kNotice,     // handlers send the drain notice; the client moves on it
  kNoNotice,   // handlers registered, no notice: told to end after the GOAWAY
  kGrpcAlone,  // handlers not registered: gRPC cancels them at the deadline
};

const char* SideName(Side side) {
  switch (side) {
    case Side::kNotice:
      return "drain notice";
    case Side::kNoNotice:
      return "no drain notice, handlers told to end";
    case Side::kGrpcAlone:
      return "gRPC alone (cancel at the deadline)";
  }
  return "?";
}

struct Setup {
  // "nginx" or "haproxy"; empty: no proxy, the client connects to both
  // servers and sees the leaving one's GOAWAY itself.
  std::string proxy;
  Side side = Side::kNoNotice;
  server::DrainOptions drain;
  // The proxy's read/idle timeouts (nginx grpc_read_timeout and friends,
  // HAProxy timeout client/server).
  absl::Duration proxy_timeouts = absl::Hours(1);
};

// The drain's default timings in these tests.
server::DrainOptions ShortDrain() {
  server::DrainOptions o;
  o.unready_window = absl::Milliseconds(200);
  o.notice_grace = absl::Milliseconds(200);
  o.goaway_grace = absl::Milliseconds(300);
  o.drain_deadline = absl::Seconds(1);
  o.log_sink = std::make_shared<QuietSink>();
  return o;
}

// What one drain did to the streams that were on the leaving server.
struct Figures {
  std::string where;
  int streams = 0;
  int on_leaving = 0;
  int error_ends = 0;  // attempts ended by the server (not by the client)
  std::string ends;    // "<n> x <code> <message> (<class>, <when>)"; ...
  std::uint64_t failed = 0, ignored = 0, successful = 0;  // breaker deltas
  absl::Duration max_stall = absl::ZeroDuration();
  int bad = 0;            // events lost or repeated
  int ended = 0;          // streams that ended
  int notice_moves = 0;   // attempts started on a drain notice
  int noticed_again = 0;  // of those, landed on the leaving server again
  bool pool_saw_drain = false;
  int calls_after_begin = 0;  // on the leaving server, after Begin()
  std::string report;
};

void Print(const Figures& f) {
  std::printf(
      "[figure] %s: %d of %d streams on the leaving server; %d attempts ended "
      "by the server: %s; breaker +%llu failures +%llu ignored +%llu "
      "successes; max stall of a moved stream %s; lost or repeated %d; "
      "notice moves %d (%d landed on the leaving server again); pool saw a "
      "drain: %s; calls opened on the leaving server after Begin(): %d; "
      "drain %s\n",
      f.where.c_str(), f.on_leaving, f.streams, f.error_ends,
      f.ends.empty() ? "none" : f.ends.c_str(),
      static_cast<unsigned long long>(f.failed),
      static_cast<unsigned long long>(f.ignored),
      static_cast<unsigned long long>(f.successful),
      absl::FormatDuration(f.max_stall).c_str(), f.bad, f.notice_moves,
      f.noticed_again, f.pool_saw_drain ? "yes" : "no", f.calls_after_begin,
      f.report.c_str());
  std::fflush(stdout);
}

// Two servers, "a" (leaving) and "b", behind the proxy (or not); 8 tether
// streams spread over both; a drains. Fails the test (and returns what it
// has) when a step does not happen.
Figures RunDrain(const Setup& setup) {
  constexpr int kStreams = 8;
  Figures f;
  f.streams = kStreams;
  f.where =
      absl::StrCat(setup.proxy.empty() ? "no proxy (the client sees the GOAWAY)"
                                       : absl::StrCat("behind ", setup.proxy),
                   ", ", SideName(setup.side));
  FeedServerOptions ao;
  ao.name = "a";
  ao.send_notice = setup.side == Side::kNotice;
  ao.register_calls = setup.side != Side::kGrpcAlone;
  ao.drain = setup.drain;
  FeedServer a(ao);
  FeedServerOptions bo;
  bo.name = "b";
  FeedServer b(bo);
  EXPECT_TRUE(a.Start().ok());
  EXPECT_TRUE(b.Start().ok());
  std::unique_ptr<testsupport::L7Proxy> proxy;
  auto log = std::make_shared<Log>();
  ConnectionPoolOptions po;
  if (setup.proxy.empty()) {
    po.addresses = {a.address(), b.address()};
  } else {
    auto started = testsupport::L7Proxy::Start(
        setup.proxy == "nginx" ? testsupport::L7Proxy::Kind::kNginx
                               : testsupport::L7Proxy::Kind::kHaproxy,
        {a.port(), b.port()}, setup.proxy_timeouts);
    if (!started.ok()) {
      ADD_FAILURE() << started.status();
      return f;
    }
    proxy = *std::move(started);
    po.target = proxy->address();
  }
  po.observer = std::make_shared<PoolLog>(log);
  auto pool = ConnectionPool::Create(po);
  if (!pool.ok()) {
    ADD_FAILURE() << pool.status();
    return f;
  }
  auto breaker = CircuitBreaker::Create(CircuitBreakerOptions{});
  EXPECT_TRUE(breaker.ok()) << breaker.status();
  ReconnectingStreamOptions so;
  so.breaker = *breaker;
  Clients clients(*pool, log, Kind::kWatch, kStreams, so,
                  /*notice_hook=*/setup.side == Side::kNotice);
  if (!clients.fleet().WaitEvents(3)) {
    ADD_FAILURE() << "the streams did not start; "
                  << (proxy ? proxy->log() : "");
    return f;
  }

  // The streams are spread over both servers.
  std::vector<int> on_a;
  for (int i = 0; i < kStreams; ++i) {
    if (clients.fleet().Get()[i].last_server == "a") on_a.push_back(i);
  }
  f.on_leaving = static_cast<int>(on_a.size());
  if (on_a.empty()) {
    ADD_FAILURE() << "no stream on a";
    return f;
  }
  const BreakerCounts before = (*breaker)->counts();

  const absl::Time begin = absl::Now();
  clients.fleet().MarkStallsFrom(begin);
  EXPECT_TRUE(a.drain().Begin());
  absl::optional<DrainReport> report =
      a.drain().WaitFor(server::HardBound(ao.drain) + kWait);
  if (!report.has_value()) {
    ADD_FAILURE() << "the drain did not end";
    return f;
  }
  f.report = DrainReportToString(*report);
  // Every stream delivers from b afterwards.
  EXPECT_TRUE(clients.fleet().WaitMoreFrom("b", 3))
      << (proxy ? proxy->log() : "");
  const BreakerCounts after = (*breaker)->counts();
  f.failed = after.failed - before.failed;
  f.ignored = after.ignored - before.ignored;
  f.successful = after.successful - before.successful;

  std::map<std::string, int> ends;  // "<code> <message> (<class>, <when>)"
  std::set<std::uint64_t> connections;
  for (const Log::Attempt& at : log->Attempts()) {
    connections.insert(at.connection);
    if (at.reason == AttemptReason::kDrainNotice) {
      ++f.notice_moves;
      if (at.noticed) ++f.noticed_again;
    }
    if (at.by_client || at.ended == absl::InfiniteFuture()) continue;
    ++f.error_ends;
    ++ends[absl::StrCat(absl::StatusCodeToString(at.status.code()), " \"",
                        at.status.message(), "\" (", EndClassName(at.end_class),
                        ", ", absl::FormatDuration(at.ended - begin), ")")];
  }
  std::vector<std::string> end_lines;
  for (const auto& [what, n] : ends) {
    end_lines.push_back(absl::StrCat(n, " x ", what));
  }
  f.ends = absl::StrJoin(end_lines, "; ");
  f.pool_saw_drain = log->FirstDraining(connections) != absl::InfiniteFuture();
  for (const feed::Fleet::Delivered& d : clients.fleet().Get()) {
    f.bad += d.bad;
    f.ended += d.done ? 1 : 0;
    EXPECT_FALSE(d.done) << d.status;
  }
  for (int i : on_a) {
    f.max_stall = std::max(f.max_stall, clients.fleet().Get()[i].max_gap);
  }
  f.calls_after_begin = a.CallsStartedSince(begin);
  EXPECT_EQ(f.bad, 0);
  Print(f);
  return f;
}

// With the notice, behind the proxy: every stream on the leaving server
// moves make before break (no attempt ends with an error, the breaker
// records no failure, nothing is lost or repeated, no stream ends), the
// pool never marks its connection to the proxy draining, and the longest
// stall is in line with the same client's on a GOAWAY it sees itself (run
// just before, on the same machine; the bound leaves room for a loaded
// machine). Then the same drain without the notice, side by side.
void SideBySide(const std::string& kind, const std::string& binary) {
  if (access(binary.c_str(), X_OK) != 0) {
    GTEST_SKIP() << binary << " is not installed";
  }
  Setup direct;
  direct.drain = ShortDrain();
  const Figures goaway = RunDrain(direct);
  Setup notice = direct;
  notice.proxy = kind;
  notice.side = Side::kNotice;
  const Figures with = RunDrain(notice);
  EXPECT_EQ(with.error_ends, 0) << with.ends;
  EXPECT_EQ(with.failed, 0u);
  EXPECT_EQ(with.ended, 0);
  EXPECT_GE(with.notice_moves, with.on_leaving);
  EXPECT_FALSE(with.pool_saw_drain)
      << "a drain notice must not mark the connection to the proxy draining";
  EXPECT_LE(with.max_stall,
            std::max(absl::Milliseconds(250), 4 * goaway.max_stall))
      << "the GOAWAY's stall was " << goaway.max_stall;
  Setup without = notice;
  without.side = Side::kNoNotice;
  const Figures no = RunDrain(without);
  // Without the notice each stream on the leaving server is cut by it.
  EXPECT_EQ(no.error_ends, no.on_leaving) << no.ends;
}

TEST(ProxyDrainTest, SideBySideBehindNginx) {
  SideBySide("nginx", "/usr/sbin/nginx");
}

TEST(ProxyDrainTest, SideBySideBehindHaproxy) {
  SideBySide("haproxy", "/usr/sbin/haproxy");
}

// gRPC's own cancel at the deadline, no handler registered.
void GrpcAlone(const std::string& kind, const std::string& binary) {
  if (access(binary.c_str(), X_OK) != 0) {
    GTEST_SKIP() << binary << " is not installed";
  }
  Setup setup;
  setup.proxy = kind;
  setup.side = Side::kGrpcAlone;
  setup.drain = ShortDrain();
  RunDrain(setup);
}

TEST(ProxyDrainTest, BehindNginxGrpcAlone) {
  GrpcAlone("nginx", "/usr/sbin/nginx");
}

TEST(ProxyDrainTest, BehindHaproxyGrpcAlone) {
  GrpcAlone("haproxy", "/usr/sbin/haproxy");
}

// A drain longer than the proxy's own timeouts (1 s here, the unready
// window 1.5 s and the notice grace 3 s): the streams stay up through the
// proxy while the server is unready, then move on the notice as before.
void LongerThanTheProxy(const std::string& kind, const std::string& binary) {
  if (access(binary.c_str(), X_OK) != 0) {
    GTEST_SKIP() << binary << " is not installed";
  }
  Setup setup;
  setup.proxy = kind;
  setup.side = Side::kNotice;
  setup.proxy_timeouts = absl::Seconds(1);
  setup.drain = ShortDrain();
  setup.drain.unready_window = absl::Milliseconds(1500);
  setup.drain.notice_grace = absl::Seconds(3);
  setup.drain.drain_deadline = absl::Seconds(3);
  const Figures f = RunDrain(setup);
  EXPECT_EQ(f.error_ends, 0) << f.ends;
  EXPECT_EQ(f.failed, 0u);
  EXPECT_EQ(f.ended, 0);
  EXPECT_FALSE(f.pool_saw_drain);
}

TEST(ProxyDrainTest, LongerThanNginxTimeouts) {
  LongerThanTheProxy("nginx", "/usr/sbin/nginx");
}

TEST(ProxyDrainTest, LongerThanHaproxyTimeouts) {
  LongerThanTheProxy("haproxy", "/usr/sbin/haproxy");
}

}  // namespace
}  // namespace testsupport
}  // namespace tether
