// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// What bounds a drain, against real gRPC servers on 127.0.0.1 and plain
// gRPC clients: a handler that never ends (callback or sync) does not hold
// the server past the hard bound; a connection that never finishes its
// handshake (plaintext or TLS) delays neither the GOAWAY to the others nor
// the end; and what gRPC C++'s `Server::Shutdown(deadline)` does on the
// wire, measured (docs/server.md quotes the line it prints).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "feed.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "support/tls_certs.h"
#include "test/integration/server/feed_server.h"
#include "tether/server/drain_controller.h"

namespace tether {
namespace testsupport {
namespace {

using ::tether::server::DrainOptions;
using ::tether::server::DrainReport;
using ::tether::test::FeedEvent;
using ::tether::test::FeedRequest;

// Generous: the events take milliseconds, the machine may be loaded.
constexpr absl::Duration kWait = absl::Seconds(30);
// How late a bounded event may be on a loaded 2-core machine.
constexpr absl::Duration kLate = absl::Seconds(2);

DrainOptions ShortDrain() {
  DrainOptions o;
  o.unready_window = absl::Milliseconds(100);
  o.notice_grace = absl::Milliseconds(100);
  o.goaway_grace = absl::Milliseconds(100);
  o.drain_deadline = absl::Seconds(1);
  o.stop_slack = absl::Milliseconds(500);
  o.log_sink = std::make_shared<QuietSink>();
  return o;
}

// One plain gRPC Watch on its own channel, read on a thread; records when
// its channel left READY (the GOAWAY) and how the call ended.
class RawWatch {
 public:
  explicit RawWatch(
      const std::string& address,
      std::shared_ptr<grpc::ChannelCredentials> creds =
          grpc::InsecureChannelCredentials(),
      const grpc::ChannelArguments& args = grpc::ChannelArguments()) {
    channel_ = grpc::CreateCustomChannel(address, creds, args);
    reader_ = std::thread([this] { Read(); });
    watcher_ = std::thread([this] { WatchState(); });
  }
  ~RawWatch() {
    context_.TryCancel();
    reader_.join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    watcher_.join();
  }

  bool WaitMessages(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(kWait), [&] {
      return messages_ >= n || ended_;
    }) && !ended_;
  }
  bool WaitEnded(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                        [&] { return ended_; });
  }
  bool WaitLeftReady(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                        [&] { return left_ready_ != absl::InfiniteFuture(); });
  }
  absl::Time left_ready() {
    std::lock_guard<std::mutex> lock(mu_);
    return left_ready_;
  }
  absl::Time ended_at() {
    std::lock_guard<std::mutex> lock(mu_);
    return ended_at_;
  }
  grpc::Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }
  int messages() {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_;
  }
  // Messages received after the channel left READY.
  int messages_after_goaway() {
    std::lock_guard<std::mutex> lock(mu_);
    return after_goaway_;
  }
  absl::Time last_message() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_message_;
  }

 private:
  void Read() {
    auto stub = tether::test::Feed::NewStub(channel_);
    FeedRequest request;
    auto reader = stub->Watch(&context_, request);
    FeedEvent e;
    while (reader->Read(&e)) {
      std::lock_guard<std::mutex> lock(mu_);
      ++messages_;
      last_message_ = absl::Now();
      if (left_ready_ != absl::InfiniteFuture()) ++after_goaway_;
      cv_.notify_all();
    }
    grpc::Status s = reader->Finish();
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = true;
    ended_at_ = absl::Now();
    status_ = s;
    cv_.notify_all();
  }
  void WatchState() {
    bool was_ready = false;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
      }
      grpc_connectivity_state s = channel_->GetState(false);
      if (s == GRPC_CHANNEL_READY) was_ready = true;
      if (was_ready && s != GRPC_CHANNEL_READY) {
        std::lock_guard<std::mutex> lock(mu_);
        left_ready_ = absl::Now();
        cv_.notify_all();
        return;
      }
      // Wakes on a change, or after 50 ms to look at `stop_`.
      channel_->WaitForStateChange(
          s, std::chrono::system_clock::now() + std::chrono::milliseconds(50));
    }
  }

  std::shared_ptr<grpc::Channel> channel_;
  grpc::ClientContext context_;
  std::mutex mu_;
  std::condition_variable cv_;
  int messages_ = 0;
  int after_goaway_ = 0;
  absl::Time last_message_ = absl::InfinitePast();
  bool ended_ = false;
  absl::Time ended_at_ = absl::InfiniteFuture();
  grpc::Status status_;
  absl::Time left_ready_ = absl::InfiniteFuture();
  bool stop_ = false;
  std::thread reader_;
  std::thread watcher_;
};

// A TCP connection to 127.0.0.1:`port` that sends nothing: its HTTP/2 (or
// TLS) handshake never finishes. Closed by the destructor.
class SilentConnection {
 public:
  explicit SilentConnection(int port) : fd_(ConnectLoopback(port)) {}
  ~SilentConnection() {
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return fd_ >= 0; }

 private:
  const int fd_;
};

TEST(DrainBoundsTest, CreateRefusesWhatCannotWork) {
  auto none = server::DrainController::Create(nullptr);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(none.status().message()),
              ::testing::HasSubstr("server must not be null"));

  tether::test::Feed::CallbackService unimplemented;
  grpc::ServerBuilder builder;
  builder.RegisterService(&unimplemented);
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  DrainOptions o;
  o.end_status = grpc::Status::OK;
  auto bad = server::DrainController::Create(server.get(), o);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()),
              ::testing::HasSubstr("DrainOptions.end_status must not be OK"));
  server->Shutdown(std::chrono::system_clock::now());
}

void StuckHandlerIsReportedNotWaitedFor(bool sync) {
  FeedServerOptions o;
  o.name = "a";
  o.sync = sync;
  o.obey_end = false;
  o.drain = ShortDrain();
  FeedServer a(o);
  ASSERT_TRUE(a.Start().ok());
  RawWatch watch(a.address());
  ASSERT_TRUE(watch.WaitMessages(3));

  const absl::Duration bound = server::HardBound(o.drain);
  const absl::Time begin = absl::Now();
  ASSERT_TRUE(a.drain().Begin());
  absl::optional<DrainReport> report = a.drain().WaitFor(bound + kWait);
  const absl::Duration took = absl::Now() - begin;
  ASSERT_TRUE(report.has_value());
  EXPECT_FALSE(report->server_stopped);
  EXPECT_EQ(report->calls_stuck, 1u);
  EXPECT_EQ(report->calls_told_to_end, 1u);
  EXPECT_GE(report->elapsed, bound);
  EXPECT_LT(took, bound + kLate);

  // The server is stopped all the same: gRPC cancelled the call at the
  // deadline (the client saw its end) and the port is closed.
  ASSERT_TRUE(watch.WaitEnded(kWait));
  EXPECT_LT(watch.ended_at() - begin, bound + kLate);
  EXPECT_FALSE(watch.status().ok());
  EXPECT_FALSE(AcceptsConnections(a.port()));
  std::printf(
      "stuck %s handler: Wait() after %s (bound %s); the client's "
      "call ended %s after Begin() with %d \"%s\"\n",
      sync ? "sync" : "callback", absl::FormatDuration(took).c_str(),
      absl::FormatDuration(bound).c_str(),
      absl::FormatDuration(watch.ended_at() - begin).c_str(),
      watch.status().error_code(), watch.status().error_message().c_str());
}

TEST(DrainBoundsTest, ACallbackHandlerThatNeverEndsDoesNotHoldTheServer) {
  StuckHandlerIsReportedNotWaitedFor(/*sync=*/false);
}

TEST(DrainBoundsTest, ASyncHandlerThatNeverReturnsDoesNotHoldTheServer) {
  StuckHandlerIsReportedNotWaitedFor(/*sync=*/true);
}

void SilentHandshakeDelaysNothing(bool tls) {
  std::unique_ptr<support::TestCertificates> certs;
  FeedServerOptions o;
  o.name = "a";
  o.drain = ShortDrain();
  if (tls) {
    auto made = support::MakeTestCertificates("drain.test");
    ASSERT_TRUE(made.ok()) << made.status();
    certs = std::move(*made);
    o.credentials = certs->ServerCredentials(/*require_client_cert=*/false);
  }
  FeedServer a(o);
  ASSERT_TRUE(a.Start().ok());
  SilentConnection silent(a.port());
  ASSERT_TRUE(silent.connected());
  grpc::ChannelArguments args;
  std::shared_ptr<grpc::ChannelCredentials> creds =
      grpc::InsecureChannelCredentials();
  if (tls) {
    args.SetSslTargetNameOverride("drain.test");
    creds = certs->ClientCredentials(/*with_client_cert=*/false);
  }
  RawWatch watch(a.address(), creds, args);
  ASSERT_TRUE(watch.WaitMessages(3));

  const absl::Duration bound = server::HardBound(o.drain);
  const absl::Time begin = absl::Now();
  ASSERT_TRUE(a.drain().Begin());
  // The GOAWAY reaches the client that finished its handshake once the
  // unready window and the notice grace are over, not later.
  ASSERT_TRUE(watch.WaitLeftReady(kWait));
  const absl::Duration goaway = watch.left_ready() - begin;
  EXPECT_GE(goaway, o.drain.unready_window + o.drain.notice_grace);
  EXPECT_LT(goaway, o.drain.unready_window + o.drain.notice_grace + kLate);
  absl::optional<DrainReport> report = a.drain().WaitFor(bound + kWait);
  const absl::Duration took = absl::Now() - begin;
  ASSERT_TRUE(report.has_value());
  EXPECT_LT(took, bound + kLate);
  std::printf(
      "silent %s connection: GOAWAY at %s, Wait() after %s (bound %s), "
      "%s\n",
      tls ? "TLS" : "plaintext", absl::FormatDuration(goaway).c_str(),
      absl::FormatDuration(took).c_str(), absl::FormatDuration(bound).c_str(),
      DrainReportToString(*report).c_str());
}

TEST(DrainBoundsTest, ASilentPlaintextConnectionDelaysNeitherGoawayNorEnd) {
  SilentHandshakeDelaysNothing(/*tls=*/false);
}

TEST(DrainBoundsTest, ASilentTlsHandshakeDelaysNeitherGoawayNorEnd) {
  SilentHandshakeDelaysNothing(/*tls=*/true);
}

// gRPC C++ alone (handlers not registered with the drain): when the GOAWAY
// reaches a client after `Shutdown(deadline)`, whether the call in flight
// runs on, and what it sees at the deadline.
TEST(DrainBoundsTest, WhatShutdownDoesOnTheWire) {
  FeedServerOptions o;
  o.name = "a";
  o.register_calls = false;
  o.drain = ShortDrain();
  o.drain.unready_window = absl::ZeroDuration();
  o.drain.notice_grace = absl::ZeroDuration();
  FeedServer a(o);
  ASSERT_TRUE(a.Start().ok());
  RawWatch watch(a.address());
  ASSERT_TRUE(watch.WaitMessages(3));

  // With no unready window and no notice grace, Begin() calls Shutdown
  // (on the controller's thread) before it returns.
  const absl::Time shutdown = absl::Now();
  ASSERT_TRUE(a.drain().Begin());
  ASSERT_TRUE(watch.WaitLeftReady(kWait));
  ASSERT_TRUE(watch.WaitEnded(kWait));
  absl::optional<DrainReport> report = a.drain().WaitFor(kWait);
  ASSERT_TRUE(report.has_value());
  const absl::Duration goaway = watch.left_ready() - shutdown;
  const absl::Duration end = watch.ended_at() - shutdown;
  EXPECT_LT(goaway, absl::Milliseconds(500));
  EXPECT_GT(watch.messages_after_goaway(), 0)
      << "the call stopped at the GOAWAY";
  EXPECT_GE(end, o.drain.drain_deadline - absl::Milliseconds(50));
  EXPECT_EQ(watch.status().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(report->server_stopped);
  std::printf(
      "Shutdown(now + %s): the client's channel left READY %s after the call "
      "(GOAWAY); the call ran on (%d messages after the GOAWAY, the last %s "
      "after the call) and ended %s after the call with %d \"%s\"; "
      "Shutdown returned, %s\n",
      absl::FormatDuration(o.drain.drain_deadline).c_str(),
      absl::FormatDuration(goaway).c_str(), watch.messages_after_goaway(),
      absl::FormatDuration(watch.last_message() - shutdown).c_str(),
      absl::FormatDuration(end).c_str(), watch.status().error_code(),
      watch.status().error_message().c_str(),
      DrainReportToString(*report).c_str());
}

}  // namespace
}  // namespace testsupport
}  // namespace tether
