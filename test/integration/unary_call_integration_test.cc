// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// UnaryCaller against a real gRPC server: failures then success, pushback,
// and a breaker shared with a stream.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "test/integration/stream_test_util.h"
#include "test/support/test_server.h"
#include "tether/circuit_breaker.h"
#include "tether/connection_pool.h"
#include "tether/generated_method.h"
#include "tether/unary_call.h"

namespace tether {
namespace testsupport {
namespace {

using ::testing::HasSubstr;
using PingCaller =
    UnaryCaller<tether::test::PingRequest, tether::test::PingReply>;

constexpr absl::Duration kWait = absl::Seconds(30);

UnaryCallOptions FastUnary() {
  UnaryCallOptions o;
  ExponentialBackoffOptions b;
  b.initial_delay = absl::Milliseconds(20);
  b.max_delay = absl::Milliseconds(100);
  o.backoff = *ExponentialBackoff::Create(b);
  o.attempt_timeout = absl::Seconds(5);
  o.overall_timeout = absl::Seconds(20);
  return o;
}

// Wakes a test when the breaker reaches a state.
class StateWaiter final : public BreakerObserver {
 public:
  void OnStateChange(absl::string_view, BreakerState, BreakerState to,
                     const BreakerCounts&) override {
    std::lock_guard<std::mutex> l(mu_);
    reached_.insert(to);
    cv_.notify_all();
  }
  bool WaitFor(BreakerState state, absl::Duration timeout) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, absl::ToChronoNanoseconds(timeout),
                        [&] { return reached_.count(state) > 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<BreakerState> reached_;
};

std::shared_ptr<ConnectionPool> PoolFor(const TestServer& server) {
  ConnectionPoolOptions po;
  po.addresses = {server.address()};
  return ConnectionPool::Create(std::move(po)).value();
}

TEST(UnaryCallIntegrationTest, FailuresThenSuccessBlockingAndAsync) {
  TestServer server;
  ASSERT_TRUE(server.Start().ok());
  auto pool = PoolFor(server);
  auto caller = PingCaller::Create(
      pool,
      StartWith<tether::test::SeqStream>(
          &tether::test::SeqStream::Stub::async::Ping),
      FastUnary(),
      [](grpc::ClientContext& context, const AttemptInfo& info) {
        context.AddMetadata("x-attempt", std::to_string(info.attempt));
      });
  ASSERT_TRUE(caller.ok()) << caller.status();

  server.FailNextPings(2, grpc::Status(grpc::StatusCode::UNAVAILABLE, "busy"));
  absl::StatusOr<tether::test::PingReply> reply =
      (*caller)->Call(tether::test::PingRequest());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->server(), "server");
  TestServerStats stats = server.stats();
  EXPECT_EQ(stats.pings, 3);
  ASSERT_EQ(stats.calls.size(), 3u);
  EXPECT_EQ(stats.calls[2].metadata.at("x-attempt"), "3");

  server.FailNextPings(1, grpc::Status(grpc::StatusCode::INTERNAL, "oops"));
  absl::Notification done;
  absl::StatusOr<tether::test::PingReply> async_reply;
  (*caller)->Call(tether::test::PingRequest(),
                  [&](absl::StatusOr<tether::test::PingReply> r) {
                    async_reply = std::move(r);
                    done.Notify();
                  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWait));
  ASSERT_TRUE(async_reply.ok()) << async_reply.status();
  EXPECT_EQ(server.stats().pings, 5);
}

TEST(UnaryCallIntegrationTest, PushbackTrailerFromARealServer) {
  TestServer server;
  ASSERT_TRUE(server.Start().ok());
  auto pool = PoolFor(server);
  UnaryCallOptions o = FastUnary();
  auto caller = PingCaller::Create(
      pool,
      StartWith<tether::test::SeqStream>(
          &tether::test::SeqStream::Stub::async::Ping),
      o);
  ASSERT_TRUE(caller.ok());
  // A delay: the retry waits it (not the 20 ms backoff).
  server.SetErrorTrailers({{"grpc-retry-pushback-ms", "400"}});
  server.FailNextPings(
      1, grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "slow down"));
  const absl::Time start = absl::Now();
  auto reply = (*caller)->Call(tether::test::PingRequest());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(400));
  // "Do not retry": the call ends with the server's status after one try.
  server.SetErrorTrailers({{"grpc-retry-pushback-ms", "-1"}});
  server.FailNextPings(
      3, grpc::Status(grpc::StatusCode::UNAVAILABLE, "maintenance"));
  server.ResetStats();
  auto refused = (*caller)->Call(tether::test::PingRequest());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(refused.status().message(), "maintenance");
  EXPECT_EQ(server.stats().pings, 1);
}

TEST(UnaryCallIntegrationTest, BreakerSharedWithAStream) {
  TestServer server;
  ASSERT_TRUE(server.Start().ok());
  auto pool = PoolFor(server);
  CircuitBreakerOptions bo;
  bo.name = "ledger";
  bo.consecutive_failures = 3;
  bo.break_duration = absl::Milliseconds(300);
  bo.break_jitter = 0;
  bo.half_open_permits = 1;
  auto states = std::make_shared<StateWaiter>();
  bo.observer = states;
  auto breaker = CircuitBreaker::Create(bo).value();

  UnaryCallOptions uo = FastUnary();
  uo.breaker = breaker;
  uo.max_attempts = 3;
  auto caller = PingCaller::Create(
      pool,
      StartWith<tether::test::SeqStream>(
          &tether::test::SeqStream::Stub::async::Ping),
      uo);
  ASSERT_TRUE(caller.ok());
  server.FailNextPings(3, grpc::Status(grpc::StatusCode::INTERNAL, "broken"));
  auto failed = (*caller)->Call(tether::test::PingRequest());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(breaker->state(), BreakerState::kOpen);

  // The open breaker refuses a stream to the same dependency, which never
  // touches the server.
  ReconnectingStreamOptions so;
  so.breaker = breaker;
  so.fail_fast_on_open_breaker = true;
  Collector refused;
  auto stream = SeqStream::Start(pool, WatchSpec("k"), so, refused.MessageFn(),
                                 refused.DoneFn());
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(refused.WaitForDone(kWait));
  EXPECT_EQ(refused.done()->code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(refused.done()->message()), HasSubstr("ledger"));
  EXPECT_EQ(server.stats().watches_started, 0);

  // After the break a unary success is the half-open probe that closes it;
  // then streams run.
  ASSERT_TRUE(states->WaitFor(BreakerState::kHalfOpen, kWait));
  auto ok = (*caller)->Call(tether::test::PingRequest());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(breaker->state(), BreakerState::kClosed);
  Collector c;
  auto stream2 =
      SeqStream::Start(pool, WatchSpec("k"), so, c.MessageFn(), c.DoneFn());
  ASSERT_TRUE(stream2.ok());
  EXPECT_TRUE(c.WaitForMoreFrom("", 3, kWait));
}

}  // namespace
}  // namespace testsupport
}  // namespace tether
