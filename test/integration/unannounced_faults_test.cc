// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Faults nobody announces, against real gRPC servers on 127.0.0.1: a server
// that goes silent mid-stream (a hung peer), one that accepts calls and never
// speaks, and an address that accepts TCP and never speaks HTTP/2 (a connect
// black hole). Waits are on events with generous deadlines; the bounds the
// tests check are the library's promises, measured on the wall clock.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/integration/stream_test_util.h"
#include "test/support/test_server.h"
#include "tether/connection_pool.h"
#include "tether/reconnecting_stream.h"

namespace tether {
namespace testsupport {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(30);

std::unique_ptr<TestServer> StartServer(const std::string& name) {
  TestServerOptions o;
  o.name = name;
  auto server = std::make_unique<TestServer>(o);
  absl::Status s = server->Start();
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? std::move(server) : nullptr;
}

std::shared_ptr<ConnectionPool> MakePool(std::vector<std::string> addresses) {
  ConnectionPoolOptions o;
  o.addresses = std::move(addresses);
  auto pool = ConnectionPool::Create(std::move(o));
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? *pool : nullptr;
}

// Records when each message arrived and from which server.
class Timeline {
 public:
  void Add(const tether::test::Event& e) {
    std::lock_guard<std::mutex> l(mu_);
    arrivals_.push_back({e.server(), absl::Now()});
  }
  // The arrival time of the first message from `server` after `after`, or
  // InfiniteFuture.
  absl::Time FirstFromAfter(const std::string& server, absl::Time after) {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& a : arrivals_) {
      if (a.first == server && a.second > after) return a.second;
    }
    return absl::InfiniteFuture();
  }
  absl::Time LastFrom(const std::string& server) {
    std::lock_guard<std::mutex> l(mu_);
    absl::Time last = absl::InfinitePast();
    for (const auto& a : arrivals_) {
      if (a.first == server) last = a.second;
    }
    return last;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<std::string, absl::Time>> arrivals_;
};

// A hung peer: the server the stream reads from stops writing, without a
// status, a GOAWAY or a closed socket. With `stall_timeout` the stream leaves
// it within stall_timeout + 0.5 s, for the other server, and the app sees
// every message once, in order.
TEST(UnannouncedFaults, SilentServerIsLeftWithinTheStallTimeout) {
  auto a = StartServer("A");
  auto b = StartServer("B");
  ASSERT_TRUE(a && b);
  auto pool = MakePool({a->address(), b->address()});
  ASSERT_NE(pool, nullptr);
  Collector c;
  Timeline timeline;
  ReconnectingStreamOptions options;
  options.stall_timeout = absl::Milliseconds(800);
  auto stream = SeqStream::Start(
      pool, WatchSpec("silent"), options,
      [&](tether::test::Event&& e) {
        timeline.Add(e);
        c.OnMessage(std::move(e));
      },
      c.DoneFn());
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_TRUE(c.WaitForMoreFrom("", 10, kWait));
  const std::string serving = c.last_server();
  TestServer* silent = serving == "A" ? a.get() : b.get();
  const std::string other = serving == "A" ? "B" : "A";
  silent->SetMute(true);  // the peer hangs
  ASSERT_TRUE(c.WaitForMoreFrom(other, 5, kWait)) << "never left " << serving;
  const absl::Time hung = timeline.LastFrom(serving);
  const absl::Time moved = timeline.FirstFromAfter(other, hung);
  EXPECT_LE(moved - hung, options.stall_timeout + absl::Milliseconds(500))
      << "left the silent server after " << absl::FormatDuration(moved - hung);
  EXPECT_EQ(c.out_of_order(), 0);
  EXPECT_EQ(c.last(), static_cast<std::uint64_t>(c.count()));
  EXPECT_EQ((*stream)->stats().stalls, 1u);
  EXPECT_FALSE(c.done().has_value());
}

// A server that accepts every call and never writes: with `stall_timeout`
// each attempt fails, and the stream ends within the reopen budget's time
// bound instead of hanging for ever.
TEST(UnannouncedFaults, ServerThatNeverSpeaksEndsTheStreamWithinTheBudget) {
  auto mute = StartServer("mute");
  ASSERT_TRUE(mute);
  mute->SetMute(true);
  auto pool = MakePool({mute->address()});
  ASSERT_NE(pool, nullptr);
  Collector c;
  ReconnectingStreamOptions options;
  options.stall_timeout = absl::Milliseconds(300);
  options.max_time_without_progress = absl::Seconds(3);
  const absl::Time start = absl::Now();
  auto stream = SeqStream::Start(pool, WatchSpec("mute"), options,
                                 c.MessageFn(), c.DoneFn());
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_TRUE(c.WaitForDone(kWait));
  const absl::Duration took = absl::Now() - start;
  const absl::Status done = *c.done();
  EXPECT_EQ(done.code(), absl::StatusCode::kDeadlineExceeded) << done;
  EXPECT_THAT(std::string(done.message()), HasSubstr("gave up"));
  EXPECT_GE(took, absl::Milliseconds(2500));
  EXPECT_LE(took, absl::Seconds(5)) << absl::FormatDuration(took);
  EXPECT_EQ(c.count(), 0);
  EXPECT_GE((*stream)->stats().stalls, 2u);
}

// A TCP black hole at connect: the port accepts and never speaks HTTP/2.
// gRPC would wait out its 20 s connect timeout; the stream ends within its
// 3 s budget.
class BlackHoleListener {
 public:
  BlackHoleListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (fd_ < 0 ||
        bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(fd_, 64) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1";
      return;
    }
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    // Accepted sockets are kept open and never read: the handshake hangs.
    acceptor_ = std::thread([this] {
      for (;;) {
        int c = accept(fd_, nullptr, nullptr);
        if (c < 0) return;  // the listener was shut down
        std::lock_guard<std::mutex> l(mu_);
        accepted_.push_back(c);
      }
    });
  }
  ~BlackHoleListener() {
    if (fd_ >= 0) {
      shutdown(fd_, SHUT_RDWR);
      close(fd_);
    }
    if (acceptor_.joinable()) acceptor_.join();
    for (int c : accepted_) close(c);
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  std::size_t accepted() {
    std::lock_guard<std::mutex> l(mu_);
    return accepted_.size();
  }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> accepted_;
};

TEST(UnannouncedFaults, ConnectBlackHoleEndsTheStreamWithinTheBudget) {
  BlackHoleListener hole;
  auto pool = MakePool({hole.address()});
  ASSERT_NE(pool, nullptr);
  Collector c;
  ReconnectingStreamOptions options;
  options.attempt_open_timeout = absl::Seconds(1);
  options.max_time_without_progress = absl::Seconds(3);
  const absl::Time start = absl::Now();
  auto stream = SeqStream::Start(pool, WatchSpec("hole"), options,
                                 c.MessageFn(), c.DoneFn());
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_TRUE(c.WaitForDone(kWait));
  const absl::Duration took = absl::Now() - start;
  const absl::Status done = *c.done();
  EXPECT_EQ(done.code(), absl::StatusCode::kUnavailable) << done;
  EXPECT_THAT(std::string(done.message()), HasSubstr("gave up"));
  EXPECT_LE(took, absl::Seconds(5)) << absl::FormatDuration(took);
  EXPECT_GE(hole.accepted(), 1u);
  stream->reset();
  pool.reset();
}

}  // namespace
}  // namespace testsupport
}  // namespace tether
