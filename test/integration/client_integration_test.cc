// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// tether::Client against two real gRPC servers on 127.0.0.1: streams made
// by the client keep every event once and in order through a graceful
// shutdown (a real GOAWAY) and an abrupt one, and after an outage long
// enough to open the client's breaker they deliver again as soon as the
// servers are back, not when the break ends: the client gave its breaker
// to the pool, which turns it half-open when a connection is usable again.
// Two clients sharing one retry budget: a bad deploy that answers INTERNAL
// to every stream is held to the budget, while a rollout of the other
// dependency in the same run never waits for it.
// Waits are on events with generous deadlines; nothing sleeps.
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "seqstream.grpc.pb.h"
#include "test/support/test_server.h"
#include "tether/client.h"
#include "tether/generated_method.h"
#include "tether/internal/release_barrier.h"
#include "tether/retry_budget.h"

namespace tether {
namespace {

using testsupport::TestServer;
using testsupport::TestServerOptions;
using tether::test::Event;
using tether::test::SeqStream;
using tether::test::WatchRequest;

constexpr absl::Duration kWait = absl::Seconds(30);

// What the streams delivered, per key, checked as it arrives.
class Ledger {
 public:
  void Add(const Event& e) {
    std::lock_guard<std::mutex> lock(mu_);
    std::uint64_t& last = last_[e.key()];
    if (e.seq() != last + 1) {
      problems_.push_back(e.key() + ": " + std::to_string(e.seq()) + " after " +
                          std::to_string(last));
    }
    last = e.seq();
    ++total_;
    cv_.notify_all();
  }
  void Done(const std::string& key, const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!absl::IsCancelled(s))
      problems_.push_back(key + " ended: " + s.ToString());
  }
  // Waits until every key has delivered past what it had now, plus `more`.
  bool WaitForProgress(int keys, std::uint64_t more, absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    std::map<std::string, std::uint64_t> from = last_;
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] {
      if (static_cast<int>(last_.size()) < keys) return false;
      for (const auto& [key, last] : last_) {
        if (last < from[key] + more) return false;
      }
      return true;
    });
  }
  std::vector<std::string> problems() {
    std::lock_guard<std::mutex> lock(mu_);
    return problems_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::uint64_t> last_;
  std::uint64_t total_ = 0;
  std::vector<std::string> problems_;
};

// A watch of `key` that resumes after the last delivered sequence number.
ReconnectingStream<WatchRequest, Event>::Spec WatchSpec(const std::string& key) {
  ReconnectingStream<WatchRequest, Event>::Spec spec;
  spec.start = StartWith<SeqStream>(&SeqStream::Stub::async::Watch);
  spec.request.set_key(key);
  spec.sequence_of = [](const Event& e) { return e.seq(); };
  spec.resume_after = [](WatchRequest& r, std::uint64_t seq) {
    r.set_after_seq(seq);
  };
  return spec;
}

TestServerOptions Named(const std::string& name) {
  TestServerOptions o;
  o.name = name;
  return o;
}

TEST(ClientIntegrationTest, RestartsAndAnOutageThatEnds) {
  TestServer a(Named("a"));
  TestServer b(Named("b"));
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());

  ClientOptions options;
  options.pool.addresses = {a.address(), b.address()};
  options.logging = absl::nullopt;
  // Watch while the servers are reachable; the breaker bounds the outage.
  options.streams.max_time_without_progress = absl::InfiniteDuration();
  options.streams.max_attempts_without_progress = 1000;
  options.breaker.consecutive_failures = 3;
  options.breaker.break_duration = absl::Seconds(120);  // far past any wait
  options.breaker.max_break_duration = absl::Seconds(120);
  options.breaker.break_jitter = 0;
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_NE((*client)->pool(), nullptr);
  EXPECT_EQ((*client)->connections(), (*client)->pool());
  EXPECT_EQ((*client)->target_label(),
            a.address() + "," + b.address());  // no label to invent

  Ledger ledger;
  constexpr int kKeys = 4;
  std::vector<std::unique_ptr<ReconnectingStream<WatchRequest, Event>>> streams;
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = "k" + std::to_string(i);
    StreamSettings settings;
    settings.method = "tether.test.SeqStream/Watch";
    auto stream = (*client)->Start(
        WatchSpec(key), [&ledger](Event&& e) { ledger.Add(e); },
        [&ledger, key](const absl::Status& s) { ledger.Done(key, s); },
        settings);
    ASSERT_TRUE(stream.ok()) << stream.status();
    streams.push_back(*std::move(stream));
  }
  ASSERT_TRUE(ledger.WaitForProgress(kKeys, 20, kWait));

  // Graceful: a real GOAWAY from each in turn, calls cut 2 s later.
  a.ShutdownAsync(absl::Seconds(2));
  ASSERT_TRUE(a.WaitForStopped(kWait));
  ASSERT_TRUE(ledger.WaitForProgress(kKeys, 20, kWait));
  ASSERT_TRUE(a.Start().ok());
  b.ShutdownAsync(absl::Seconds(2));
  ASSERT_TRUE(b.WaitForStopped(kWait));
  ASSERT_TRUE(ledger.WaitForProgress(kKeys, 20, kWait));
  ASSERT_TRUE(b.Start().ok());

  // Abrupt: every call cut at once.
  a.Kill();
  ASSERT_TRUE(ledger.WaitForProgress(kKeys, 20, kWait));
  ASSERT_TRUE(a.Start().ok());

  // An outage: both down until the client's breaker opens (connects are
  // refused at once on loopback; three in a row trip it).
  std::mutex mu;
  std::condition_variable cv;
  bool opened = false;
  const std::uint64_t listener = (*client)->breaker()->AddListener(
      [&](BreakerState /*from*/, BreakerState to) {
        std::lock_guard<std::mutex> lock(mu);
        if (to == BreakerState::kOpen) opened = true;
        cv.notify_all();
      });
  a.Kill();
  b.Kill();
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, absl::ToChronoNanoseconds(kWait), [&] { return opened; });
  }
  (*client)->breaker()->RemoveListener(listener);
  ASSERT_EQ((*client)->breaker()->state(), BreakerState::kOpen);
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  const absl::Time back = absl::Now();
  ASSERT_TRUE(ledger.WaitForProgress(kKeys, 1, kWait));
  const absl::Duration recovered = absl::Now() - back;
  // The break lasts 120 s: only the pool turning the breaker half-open
  // lets the streams back this soon (about 0.1-0.5 s on loopback; the
  // bound leaves room for a loaded machine).
  EXPECT_LT(recovered, absl::Seconds(20))
      << "recovered only after " << recovered;
  RecordProperty("recovered_ms",
                 static_cast<int>(absl::ToInt64Milliseconds(recovered)));

  streams.clear();
  EXPECT_TRUE(ledger.problems().empty())
      << "first problem: " << ledger.problems().front();
  client->reset();
  EXPECT_TRUE(internal::WaitForReleases(kWait));
}

// Counts the reopens an empty retry budget held back.
class BudgetWaits final : public StreamObserver {
 public:
  void OnRetryBudgetWait(absl::Duration) override { ++waits; }
  std::atomic<int> waits{0};
};

TEST(ClientIntegrationTest, ARetryBudgetHoldsABadDeployNotARollout) {
  TestServerOptions bado = Named("bad");
  bado.permanent_status = grpc::Status(grpc::StatusCode::INTERNAL, "bad deploy");
  TestServer bad(bado);
  TestServer a(Named("a"));
  TestServer b(Named("b"));
  ASSERT_TRUE(bad.Start().ok());
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());

  RetryBudgetOptions budget_options;
  budget_options.name = "process";
  budget_options.min_retries_per_second = 5;
  budget_options.window = absl::Seconds(1);
  auto budget = RetryBudget::Create(budget_options);
  ASSERT_TRUE(budget.ok()) << budget.status();

  ClientOptions common;
  common.logging = absl::nullopt;
  common.use_breaker = false;  // the budget alone holds the bad deploy
  common.retry_budget = *budget;
  common.streams.max_time_without_progress = absl::InfiniteDuration();
  common.streams.max_attempts_without_progress = 100000;
  ExponentialBackoffOptions fast;  // so that only the budget holds retries
  fast.initial_delay = absl::Milliseconds(10);
  fast.max_delay = absl::Milliseconds(50);
  common.streams.backoff = ExponentialBackoff::Create(fast).value();
  ClientOptions bad_options = common;
  bad_options.pool.addresses = {bad.address()};
  ClientOptions good_options = common;
  good_options.pool.addresses = {a.address(), b.address()};
  auto good_waits = std::make_shared<BudgetWaits>();
  good_options.streams.observer = good_waits;
  auto bad_client = Client::Create(bad_options);
  auto good_client = Client::Create(good_options);
  ASSERT_TRUE(bad_client.ok()) << bad_client.status();
  ASSERT_TRUE(good_client.ok()) << good_client.status();

  const absl::Time start = absl::Now();
  constexpr int kBad = 16;
  constexpr int kGood = 4;
  Ledger ledger;
  std::vector<std::unique_ptr<ReconnectingStream<WatchRequest, Event>>> streams;
  for (int i = 0; i < kBad; ++i) {
    auto stream = (*bad_client)->Start(
        WatchSpec("bad" + std::to_string(i)), [](Event&&) {},
        [](const absl::Status&) {});
    ASSERT_TRUE(stream.ok()) << stream.status();
    streams.push_back(*std::move(stream));
  }
  for (int i = 0; i < kGood; ++i) {
    const std::string key = "k" + std::to_string(i);
    auto stream = (*good_client)->Start(
        WatchSpec(key), [&ledger](Event&& e) { ledger.Add(e); },
        [&ledger, key](const absl::Status& s) { ledger.Done(key, s); });
    ASSERT_TRUE(stream.ok()) << stream.status();
    streams.push_back(*std::move(stream));
  }
  ASSERT_TRUE(ledger.WaitForProgress(kGood, 20, kWait));
  // The rollout: each good server in turn sends a GOAWAY and stops.
  for (TestServer* server : {&a, &b}) {
    server->ShutdownAsync(absl::Seconds(1));
    ASSERT_TRUE(server->WaitForStopped(kWait));
    ASSERT_TRUE(ledger.WaitForProgress(kGood, 20, kWait));
    ASSERT_TRUE(server->Start().ok());
  }
  const std::int64_t bad_reopens = bad.stats().watches_started - kBad;
  const RetryBudgetCounts counts = (*budget)->Counts();
  const absl::Duration span = absl::Now() - start;  // after the count
  streams.clear();

  // The budget's bound: 5/s over the span and its 1 s window, plus 20% of
  // the 20 first tries. Without it each bad stream would retry every
  // 50 ms, some 300 reopens a second.
  const double bound =
      5 * absl::ToDoubleSeconds(span + absl::Seconds(1)) + 0.2 * (kBad + kGood);
  EXPECT_LE(bad_reopens, bound) << "over " << span;
  EXPECT_GT(counts.waited, 0u);
  // The rollout's streams never waited for it although it was spent.
  EXPECT_EQ(good_waits->waits.load(), 0);
  EXPECT_TRUE(ledger.problems().empty())
      << "first problem: " << ledger.problems().front();
  RecordProperty("bad_reopens", static_cast<int>(bad_reopens));
  RecordProperty("span_ms", static_cast<int>(absl::ToInt64Milliseconds(span)));
  std::printf("[figure] retry budget: %lld bad-deploy reopens in %s (bound "
              "%.0f); rollout streams held back: %d\n",
              static_cast<long long>(bad_reopens),
              absl::FormatDuration(span).c_str(), bound,
              good_waits->waits.load());
  bad_client->reset();
  good_client->reset();
  EXPECT_TRUE(internal::WaitForReleases(kWait));
}

}  // namespace
}  // namespace tether
