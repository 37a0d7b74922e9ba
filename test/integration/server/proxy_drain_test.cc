// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// A drain behind an L7 proxy (Debian's nginx and HAProxy, each forwarding
// gRPC over h2 to two servers on 127.0.0.1): the server's GOAWAY stops at
// the proxy, so the client sees no drain. With no drain notice (or a
// client that does not act on it), what the streams on the leaving server
// go through is printed: how their calls end, how tether classifies those
// ends, what the breaker records, the longest stall, and whether a reopen
// lands on the leaving server. The figures the drain notice is measured
// against once the client acts on it.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
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

// `registered`: the handlers register with the drain (no notice sent; they
// end when told, `goaway_grace` after the GOAWAY); else gRPC alone cuts
// them at the deadline.
void DrainBehind(L7Proxy::Kind kind, bool registered) {
  if (!L7Proxy::Installed(kind)) {
    GTEST_SKIP() << L7Proxy::Name(kind) << " is not installed";
  }
  FeedServerOptions ao;
  ao.name = "a";
  ao.send_notice = false;
  ao.register_calls = registered;
  ao.drain.unready_window = absl::Milliseconds(200);
  ao.drain.notice_grace = absl::Milliseconds(200);
  ao.drain.goaway_grace = absl::Milliseconds(300);
  ao.drain.drain_deadline = absl::Seconds(1);
  ao.drain.log_sink = std::make_shared<QuietSink>();
  FeedServer a(ao);
  FeedServerOptions bo;
  bo.name = "b";
  FeedServer b(bo);
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  auto started = L7Proxy::Start(kind, {a.port(), b.port()});
  ASSERT_TRUE(started.ok()) << started.status();
  L7Proxy& proxy = **started;

  auto log = std::make_shared<Log>();
  ConnectionPoolOptions po;
  po.target = proxy.address();
  po.observer = std::make_shared<PoolLog>(log);
  auto pool = ConnectionPool::Create(po);
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto breaker = CircuitBreaker::Create(CircuitBreakerOptions{});
  ASSERT_TRUE(breaker.ok()) << breaker.status();
  ReconnectingStreamOptions so;
  so.breaker = *breaker;
  constexpr int kStreams = 8;
  Clients clients(*pool, log, Kind::kWatch, kStreams, so);
  ASSERT_TRUE(clients.fleet().WaitEvents(3)) << proxy.log();

  // The proxy spread the streams over both servers.
  std::vector<int> on_a;
  for (int i = 0; i < kStreams; ++i) {
    if (clients.fleet().Get()[i].last_server == "a") on_a.push_back(i);
  }
  ASSERT_FALSE(on_a.empty()) << "the proxy sent no stream to a";
  const BreakerCounts before = (*breaker)->counts();

  const absl::Time begin = absl::Now();
  clients.fleet().MarkStallsFrom(begin);
  ASSERT_TRUE(a.drain().Begin());
  absl::optional<DrainReport> report =
      a.drain().WaitFor(server::HardBound(ao.drain) + kWait);
  ASSERT_TRUE(report.has_value());
  // Every stream delivers from b afterwards.
  ASSERT_TRUE(clients.fleet().WaitMoreFrom("b", 3)) << proxy.log();
  const BreakerCounts after = (*breaker)->counts();

  std::map<std::string, int> ends;  // "<code> <message> -> <class>"
  int cut = 0;
  for (const Log::Attempt& at : log->Attempts()) {
    if (at.by_client || at.ended == absl::InfiniteFuture()) continue;
    ++cut;
    ++ends[absl::StrCat(absl::StatusCodeToString(at.status.code()), " \"",
                        at.status.message(), "\" (", EndClassName(at.end_class),
                        ", ", absl::FormatDuration(at.ended - begin), ")")];
  }
  absl::Duration max_stall = absl::ZeroDuration();
  int bad = 0;
  for (int i : on_a) {
    const auto d = clients.fleet().Get()[i];
    max_stall = std::max(max_stall, d.max_gap);
    bad += d.bad;
    EXPECT_FALSE(d.done) << d.status;
  }
  EXPECT_EQ(bad, 0);
  std::vector<std::string> end_lines;
  for (const auto& [what, n] : ends) {
    end_lines.push_back(absl::StrCat(n, " x ", what));
  }
  std::printf(
      "behind %s, %s: %zu of %d streams on the leaving server; "
      "%d attempts ended by the server: %s; breaker +%llu failures +%llu "
      "ignored +%llu successes; max stall of a moved stream %s; calls opened "
      "on the leaving server after Begin(): %d; drain %s\n",
      L7Proxy::Name(kind),
      registered ? "no drain notice, handlers told to end"
                 : "gRPC alone (cancel at the deadline)",
      on_a.size(), kStreams, cut,
      end_lines.empty() ? "none" : absl::StrJoin(end_lines, "; ").c_str(),
      static_cast<unsigned long long>(after.failed - before.failed),
      static_cast<unsigned long long>(after.ignored - before.ignored),
      static_cast<unsigned long long>(after.successful - before.successful),
      absl::FormatDuration(max_stall).c_str(), a.CallsStartedSince(begin),
      DrainReportToString(*report).c_str());
}

TEST(ProxyDrainTest, BehindNginxWithoutNotice) {
  DrainBehind(L7Proxy::Kind::kNginx, /*registered=*/true);
}

TEST(ProxyDrainTest, BehindHaproxyWithoutNotice) {
  DrainBehind(L7Proxy::Kind::kHaproxy, /*registered=*/true);
}

TEST(ProxyDrainTest, BehindNginxGrpcAlone) {
  DrainBehind(L7Proxy::Kind::kNginx, /*registered=*/false);
}

TEST(ProxyDrainTest, BehindHaproxyGrpcAlone) {
  DrainBehind(L7Proxy::Kind::kHaproxy, /*registered=*/false);
}

}  // namespace
}  // namespace testsupport
}  // namespace tether
