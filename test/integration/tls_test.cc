// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// TLS and mutual TLS through the ConnectionPool, with certificates made at
// test time by openssl; refused certificates end streams as permanent errors.
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "test/integration/stream_test_util.h"
#include "test/support/test_server.h"
#include "support/tls_certs.h"
#include "tether/classification.h"
#include "tether/connection_pool.h"
#include "tether/internal/release_barrier.h"
#include "tether/reconnecting_stream.h"

namespace tether {
namespace testsupport {
namespace {

using ::tether::support::MakeTestCertificates;
using ::tether::support::TestCertificates;

constexpr absl::Duration kWait = absl::Seconds(30);
constexpr char kName[] = "ledger.test";

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto made = MakeTestCertificates(kName);
    ASSERT_TRUE(made.ok()) << made.status();
    certs_ = *std::move(made);
  }

  // A pool over `servers`' addresses, checking their certificates against
  // the name `kName` (the addresses are IPs: the override says which name
  // the certificate must carry).
  std::shared_ptr<ConnectionPool> Pool(
      std::vector<std::string> addresses,
      std::shared_ptr<grpc::ChannelCredentials> credentials) {
    ConnectionPoolOptions po;
    po.addresses = std::move(addresses);
    po.credentials = std::move(credentials);
    po.channel_args.SetSslTargetNameOverride(kName);
    auto pool = ConnectionPool::Create(std::move(po));
    EXPECT_TRUE(pool.ok()) << pool.status();
    if (pool.ok()) pools_.push_back(*pool);
    return pool.ok() ? *pool : nullptr;
  }

  // A pool outlives the test body while its streams' cancelled calls finish
  // (they hold it), and its watcher may meanwhile reconnect to a server
  // that went away, handshaking with OpenSSL. The process must not exit
  // during that: OpenSSL frees its tables at exit, under the handshake.
  // So each test waits until its pools are gone: every pool's last
  // reference dropped (on tether's release thread) and its destructor,
  // which joins the watcher, returned.
  void TearDown() override {
    const absl::Time deadline = absl::Now() + kWait;
    for (;;) {
      bool gone = true;
      for (const auto& p : pools_) gone = gone && p.expired();
      // Drops the ones queued for release, and waits for a destructor
      // under way there.
      const bool flushed =
          internal::WaitForReleases(deadline - absl::Now());
      if (gone && flushed) return;
      if (absl::Now() >= deadline) break;
      // The streams' cancelled calls are still finishing inside gRPC;
      // nothing to wait on but the pools themselves.
      absl::SleepFor(absl::Milliseconds(1));
    }
    ADD_FAILURE() << "a pool is still alive " << kWait << " after the test";
  }

  std::unique_ptr<TestServer> Server(const std::string& name, bool mtls,
                                     bool expired = false) {
    TestServerOptions o;
    o.name = name;
    o.credentials = certs_->ServerCredentials(mtls, expired);
    auto server = std::make_unique<TestServer>(o);
    EXPECT_TRUE(server->Start().ok());
    return server;
  }

  // Runs a stream that must be refused; returns its end.
  absl::Status Refused(std::shared_ptr<ConnectionPool> pool,
                       const TestServer& server) {
    Collector c;
    ReconnectingStreamOptions o;
    o.observer = ends_;
    auto stream =
        SeqStream::Start(pool, WatchSpec("k"), o, c.MessageFn(), c.DoneFn());
    EXPECT_TRUE(stream.ok());
    // Well within the reopen budget (2 min): refused, not retried for ever.
    EXPECT_TRUE(c.WaitForDone(kWait)) << Ends();
    EXPECT_EQ(c.count(), 0);
    EXPECT_EQ(server.stats().watches_started, 0);
    if (stream.ok()) {
      EXPECT_LE((*stream)->stats().attempts, 2u);
    }
    return c.done().value_or(absl::UnknownError("no end"));
  }

  // Every attempt's end, for the failure messages.
  class EndLog final : public StreamObserver {
   public:
    void OnAttemptEnded(const AttemptInfo&, const absl::Status& status,
                        EndClass cls, bool) override {
      std::lock_guard<std::mutex> l(mu);
      text += absl::StrCat(EndClassName(cls), " ", status.ToString(), "\n");
    }
    void OnBackoff(absl::Duration, const absl::Status& last) override {
      std::lock_guard<std::mutex> l(mu);
      text += absl::StrCat("backoff after ", last.ToString(), "\n");
    }
    std::mutex mu;
    std::string text;
  };

  std::string Ends() {
    std::lock_guard<std::mutex> l(ends_->mu);
    return ends_->text;
  }

  std::unique_ptr<TestCertificates> certs_;
  std::shared_ptr<EndLog> ends_ = std::make_shared<EndLog>();
  std::vector<std::weak_ptr<ConnectionPool>> pools_;
};

TEST_F(TlsTest, StreamsOverTlsMigrateOnGoaway) {
  auto a = Server("a", /*mtls=*/false);
  auto b = Server("b", /*mtls=*/false);
  auto pool = Pool({a->address(), b->address()},
                   certs_->ClientCredentials(/*with_client_cert=*/false));
  ASSERT_NE(pool, nullptr);
  Collector c;
  auto stream =
      SeqStream::Start(pool, WatchSpec("k"), {}, c.MessageFn(), c.DoneFn());
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(c.WaitForMoreFrom("", 5, kWait));
  TestServer& first = c.last_server() == "a" ? *a : *b;
  TestServer& second = c.last_server() == "a" ? *b : *a;
  first.ShutdownAsync(absl::Seconds(5));
  EXPECT_TRUE(c.WaitForMoreFrom(second.name(), 5, kWait));
  EXPECT_EQ(c.out_of_order(), 0);
  EXPECT_FALSE(c.done().has_value());
}

TEST_F(TlsTest, MutualTls) {
  auto server = Server("m", /*mtls=*/true);
  auto pool = Pool({server->address()},
                   certs_->ClientCredentials(/*with_client_cert=*/true));
  ASSERT_NE(pool, nullptr);
  Collector c;
  auto stream =
      SeqStream::Start(pool, WatchSpec("k"), {}, c.MessageFn(), c.DoneFn());
  ASSERT_TRUE(stream.ok());
  EXPECT_TRUE(c.WaitForMoreFrom("m", 5, kWait));
  EXPECT_EQ(c.out_of_order(), 0);
}

TEST_F(TlsTest, UnknownCaIsRefusedAsPermanent) {
  auto server = Server("s", /*mtls=*/false);
  auto pool = Pool({server->address()},
                   certs_->ClientCredentials(false, &certs_->other_ca));
  ASSERT_NE(pool, nullptr);
  absl::Status end = Refused(pool, *server);
  std::printf("unknown CA ends the stream with: %s\n", end.ToString().c_str());
  EXPECT_EQ(end.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(IsCertificateFailure(end)) << end;
}

TEST_F(TlsTest, ExpiredServerCertificateIsRefusedAsPermanent) {
  auto server = Server("s", /*mtls=*/false, /*expired=*/true);
  auto pool = Pool({server->address()}, certs_->ClientCredentials(false));
  ASSERT_NE(pool, nullptr);
  absl::Status end = Refused(pool, *server);
  std::printf("expired certificate ends the stream with: %s\n",
              end.ToString().c_str());
  EXPECT_EQ(end.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(IsCertificateFailure(end)) << end;
}

TEST_F(TlsTest, NameMismatchIsRefusedAsPermanent) {
  auto server = Server("s", /*mtls=*/false);
  ConnectionPoolOptions po;
  po.addresses = {server->address()};
  po.credentials = certs_->ClientCredentials(false);
  po.channel_args.SetSslTargetNameOverride("other.test");
  auto pool = ConnectionPool::Create(std::move(po));
  ASSERT_TRUE(pool.ok());
  pools_.push_back(*pool);
  absl::Status end = Refused(*pool, *server);
  std::printf("name mismatch ends the stream with: %s\n",
              end.ToString().c_str());
  EXPECT_EQ(end.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(IsCertificateFailure(end)) << end;
}

// A server that refuses the client's (missing) certificate closes the
// connection after the client's side of the TLS 1.3 handshake is done: gRPC
// 1.51 reports only "Socket closed", which a server going away also gives.
// There is no evidence to call it permanent, so it stays a connect failure,
// ended by the reopen budget (and counted by a breaker).
TEST_F(TlsTest, MissingClientCertificateEndsWithinTheBudget) {
  auto server = Server("s", /*mtls=*/true);
  auto pool = Pool({server->address()},
                   certs_->ClientCredentials(/*with_client_cert=*/false));
  ASSERT_NE(pool, nullptr);
  Collector c;
  ReconnectingStreamOptions o;
  o.observer = ends_;
  o.max_time_without_progress = absl::Seconds(3);
  auto stream =
      SeqStream::Start(pool, WatchSpec("k"), o, c.MessageFn(), c.DoneFn());
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(c.WaitForDone(kWait)) << Ends();
  const absl::Status end = *c.done();
  std::printf("missing client certificate ends the stream with: %s\n",
              end.ToString().c_str());
  EXPECT_EQ(end.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(end.message()), ::testing::HasSubstr("gave up"));
  EXPECT_FALSE(IsCertificateFailure(end));
  EXPECT_EQ(c.count(), 0);
  EXPECT_EQ(server->stats().watches_started, 0);
}

}  // namespace
}  // namespace testsupport
}  // namespace tether
