// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// A pool whose one endpoint is an L7 proxy (Debian's nginx and HAProxy,
// each round-robining every gRPC call over two servers on 127.0.0.1), and a
// server behind it that ends its streams before its GOAWAY and refuses new
// ones for its 2 s drain (cancel-first). The proxy balances each call on its
// own, so which connection a call goes out on says nothing about which
// server takes it: the streams must retry through the proxy until a call
// reaches the live server, without locking into step with the proxy's
// round robin. Every wait is on an event with a generous deadline.
//
// Also a proxy that says goodbye often: nginx with `keepalive_requests 10`
// (a graceful GOAWAY on a client connection's 10th call) and `nginx -s
// reload` (the old workers GOAWAY their connections) several times during a
// run of 16 streams. nginx lets the calls on a connection it said goodbye
// to run on, so each stream keeps delivering on its old call while its
// replacement opens (make before break): nothing may be lost or repeated,
// and no stream may stall for long. Beside it, the same run with nginx's
// default quota (1,000).
//
// The figures of docs/endpoints.md, ten runs per proxy:
//   ./build/test/tether_integration_tests --gtest_filter='*ProxyEndpoint*'
//   --gtest_repeat=10 | grep figure
//   ./build/test/tether_integration_tests --gtest_filter='Nginx/ProxyQuota*'
//   --gtest_repeat=10 | grep figure
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "test/integration/rollout_fixture.h"
#include "test/support/l7_proxy.h"
#include "test/support/one_shot.h"
#include "test/support/test_server.h"
#include "tether/connection_pool.h"

namespace tether {
namespace testsupport {
namespace {

constexpr absl::Duration kWait = absl::Seconds(30);

// Counts the pool's connections and drains; the pool's destructor tells
// `gone`.
class GoneObserver final : public ConnectionObserver {
 public:
  explicit GoneObserver(std::shared_ptr<OneShot> gone)
      : gone_(std::move(gone)) {}
  ~GoneObserver() override { gone_->Signal(); }
  void OnConnectionOpened(std::uint64_t, absl::string_view) override {
    ++opened;
  }
  void OnConnectionDraining(std::uint64_t, absl::string_view) override {
    ++draining;
  }
  std::atomic<int> opened{0};
  std::atomic<int> draining{0};

 private:
  const std::shared_ptr<OneShot> gone_;
};

// The longest run of attempts in a row that ended before their first message
// without the stream cancelling them (refused by a server going away).
const char* BalancingName(EndpointBalancing b) {
  switch (b) {
    case EndpointBalancing::kDetect:
      return "kDetect";
    case EndpointBalancing::kPerConnection:
      return "kPerConnection";
    case EndpointBalancing::kPerCall:
      return "kPerCall";
  }
  return "?";
}

int LongestRefusedRun(const AttemptLog& log) {
  int run = 0;
  int longest = 0;
  for (const AttemptLog::Entry& e : log.Entries()) {
    if (!e.ended || e.by_client) continue;
    if (e.got_message) {
      run = 0;
    } else {
      longest = std::max(longest, ++run);
    }
  }
  return longest;
}

// The proxy, whether the pool watches health (a `tether::Client`'s pool
// does by default), the pool's `balancing`, and how many streams: one alone
// on the server that goes away (the case that locked into step with the
// proxy: each of its retries opened a connection whose health watch took
// the live server's turn), or 8 spread by the proxy.
using Setup = std::tuple<L7Proxy::Kind, bool, EndpointBalancing, int>;

// Two servers behind a proxy, a pool and its streams, torn down in order.
template <class Param>
class ProxyFleet : public ::testing::TestWithParam<Param> {
 protected:
  // `n` streams over the pool, with the streams' own defaults (backoff
  // 100 ms .. 10 s, full jitter), each delivering.
  void StartStreams(int n) {
    streams_ = std::make_unique<Streams>(n);
    streams_->StartAll(pool_, [](std::shared_ptr<StreamObserver> obs) {
      ReconnectingStreamOptions so;
      so.observer = std::move(obs);
      return so;
    });
    ASSERT_TRUE(streams_->fleet.WaitAll(
        [](const Delivered& d) { return d.count >= 3; }, kWait))
        << proxy_->log();
  }

  void TearDown() override {
    if (streams_ != nullptr && pool_ != nullptr) {
      StopStreamsAndWaitForPool(*streams_, pool_, *pool_gone_);
    }
  }

  std::unique_ptr<TestServer> a_;
  std::unique_ptr<TestServer> b_;
  std::unique_ptr<L7Proxy> proxy_;
  std::shared_ptr<OneShot> pool_gone_ = std::make_shared<OneShot>();
  std::shared_ptr<ConnectionPool> pool_;
  std::unique_ptr<Streams> streams_;
};

using ProxyEndpoint = ProxyFleet<Setup>;

TEST_P(ProxyEndpoint, ACancelFirstServerBehindTheProxyCostsFewRefusals) {
  const L7Proxy::Kind kind = std::get<0>(GetParam());
  const bool health_check = std::get<1>(GetParam());
  const EndpointBalancing balancing = std::get<2>(GetParam());
  if (!L7Proxy::Installed(kind)) {
    GTEST_SKIP() << L7Proxy::Name(kind) << " is not installed";
  }
  a_ = StartServer("a");
  b_ = StartServer("b");
  ASSERT_NE(a_, nullptr);
  ASSERT_NE(b_, nullptr);
  auto proxy = L7Proxy::Start(kind, {a_->port(), b_->port()});
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  proxy_ = *std::move(proxy);

  ConnectionPoolOptions o;
  o.target = proxy_->address();
  o.health_check = health_check;
  o.balancing = balancing;
  o.observer = std::make_shared<GoneObserver>(pool_gone_);
  pool_ = MakePool(std::move(o));
  ASSERT_NE(pool_, nullptr);
  const int n = std::get<3>(GetParam());
  // Until the proxy put a stream on a (it alternates: a few tries at most).
  for (int tries = 0; a_->stats().open_streams == 0; ++tries) {
    ASSERT_LT(tries, 8) << "the proxy sent no stream to a";
    ASSERT_NO_FATAL_FAILURE(StartStreams(n));
  }
  const std::uint64_t opened_before = pool_->Stats().total_opened;

  a_->CancelFirstDrain(absl::Seconds(2));
  ASSERT_TRUE(a_->WaitForStopped(kWait));
  // Every stream delivers on, from b.
  ASSERT_TRUE(streams_->fleet.WaitMoreFrom("b", 3, kWait)) << proxy_->log();
  streams_->ExpectClean();

  int refused_in_a_row = 0;
  absl::Duration stall = absl::ZeroDuration();
  for (int i = 0; i < n; ++i) {
    refused_in_a_row =
        std::max(refused_in_a_row, LongestRefusedRun(*streams_->logs[i]));
    stall = std::max(stall, streams_->fleet.Get(i).max_gap);
  }
  const std::uint64_t opened = pool_->Stats().total_opened - opened_before;
  std::printf(
      "[figure] behind %s, cancel-first server, %d stream(s), health_check "
      "%s, %s: refused attempts %lld, most refused in a row %d, max stall "
      "%s, proxy connections opened %llu, learned per call %s\n",
      L7Proxy::Name(kind), n, health_check ? "on" : "off",
      BalancingName(balancing),
      static_cast<long long>(a_->stats().watches_failed_before_first),
      refused_in_a_row, absl::FormatDuration(stall).c_str(),
      static_cast<unsigned long long>(opened),
      pool_->Endpoints().at(0).per_call ? "yes" : "no");
  EXPECT_LE(refused_in_a_row, 3);
  // The goal is 500 ms (docs/endpoints.md has the measured figures); this
  // bound leaves room for a loaded machine. Locked into step with the
  // proxy, a stream stalled 1.2-2.4 s.
  EXPECT_LE(stall, absl::Seconds(1));
}

std::string Name(const ::testing::TestParamInfo<Setup>& info) {
  return absl::StrCat(
      std::get<0>(info.param) == L7Proxy::Kind::kNginx ? "Nginx" : "Haproxy",
      std::get<3>(info.param), "Streams",
      std::get<1>(info.param) ? "HealthCheck" : "NoHealthCheck");
}

const auto kProxies =
    ::testing::Values(L7Proxy::Kind::kNginx, L7Proxy::Kind::kHaproxy);

// The default: a lone stream with and without health checks, 8 streams with
// them (a `tether::Client`'s pool).
INSTANTIATE_TEST_SUITE_P(
    Detect, ProxyEndpoint,
    ::testing::Combine(kProxies, ::testing::Bool(),
                       ::testing::Values(EndpointBalancing::kDetect),
                       ::testing::Values(1)),
    Name);
INSTANTIATE_TEST_SUITE_P(
    DetectMany, ProxyEndpoint,
    ::testing::Combine(kProxies, ::testing::Values(true),
                       ::testing::Values(EndpointBalancing::kDetect),
                       ::testing::Values(8)),
    Name);
// The option set: nothing to learn.
INSTANTIATE_TEST_SUITE_P(
    PerCall, ProxyEndpoint,
    ::testing::Combine(kProxies, ::testing::Values(true),
                       ::testing::Values(EndpointBalancing::kPerCall),
                       ::testing::Values(1)),
    Name);
// The rule before the pool knew proxies (connection-level evidence only):
// fails in most runs with a lone stream and health checks. Run it with
// --gtest_also_run_disabled_tests.
INSTANTIATE_TEST_SUITE_P(
    DISABLED_PerConnection, ProxyEndpoint,
    ::testing::Combine(kProxies, ::testing::Values(true),
                       ::testing::Values(EndpointBalancing::kPerConnection),
                       ::testing::Values(1)),
    Name);

// `keepalive_requests` (0: nginx's default, 1,000).
using ProxyQuota = ProxyFleet<int>;
constexpr int kQuotaStreams = 16;
constexpr int kReloads = 5;

TEST_P(ProxyQuota, GoodbyesAndReloadsLoseNothingAndStallLittle) {
  if (!L7Proxy::Installed(L7Proxy::Kind::kNginx)) {
    GTEST_SKIP() << "nginx is not installed";
  }
  const int quota = GetParam();
  a_ = StartServer("a");
  b_ = StartServer("b");
  ASSERT_NE(a_, nullptr);
  ASSERT_NE(b_, nullptr);
  L7Proxy::Settings settings;
  settings.keepalive_requests = quota;
  settings.reloadable = true;
  auto proxy =
      L7Proxy::Start(L7Proxy::Kind::kNginx, {a_->port(), b_->port()}, settings);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  proxy_ = *std::move(proxy);

  auto observer = std::make_shared<GoneObserver>(pool_gone_);
  ConnectionPoolOptions o;
  o.target = proxy_->address();
  o.observer = observer;
  pool_ = MakePool(std::move(o));
  ASSERT_NE(pool_, nullptr);
  ASSERT_NO_FATAL_FAILURE(StartStreams(kQuotaStreams));

  // Reloads, each once every stream has delivered 20 more events (about
  // 100 ms at the servers' 5 ms tick) since the last one.
  for (int r = 0; r < kReloads; ++r) {
    ASSERT_TRUE(proxy_->Reload().ok());
    std::vector<int> base;
    for (int i = 0; i < kQuotaStreams; ++i) {
      base.push_back(streams_->fleet.Get(i).count);
    }
    ASSERT_TRUE(streams_->fleet.WaitAll(
        [&](int i, const Delivered& d) { return d.count >= base[i] + 20; },
        kWait))
        << "reload " << r << ": " << proxy_->log();
  }
  streams_->ExpectClean();

  int lost_or_repeated = 0;
  absl::Duration stall = absl::ZeroDuration();
  for (int i = 0; i < kQuotaStreams; ++i) {
    const Delivered d = streams_->fleet.Get(i);
    lost_or_repeated += d.out_of_order;
    stall = std::max(stall, d.max_gap);
  }
  std::printf(
      "[figure] behind nginx, keepalive_requests %d, %d reloads, %d streams: "
      "lost or repeated %d, max stall %s, connections opened %d, drained %d\n",
      quota == 0 ? 1000 : quota, kReloads, kQuotaStreams, lost_or_repeated,
      absl::FormatDuration(stall).c_str(), observer->opened.load(),
      observer->draining.load());
  std::fflush(stdout);
  EXPECT_EQ(lost_or_repeated, 0);
  // The goal is 100 ms (docs/endpoints.md has the measured figures); this
  // bound leaves room for a loaded machine.
  EXPECT_LE(stall, absl::Milliseconds(400));
}

INSTANTIATE_TEST_SUITE_P(Nginx, ProxyQuota, ::testing::Values(10, 0),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 0
                                      ? std::string("DefaultQuota")
                                      : absl::StrCat("Quota", info.param);
                         });

}  // namespace
}  // namespace testsupport
}  // namespace tether
