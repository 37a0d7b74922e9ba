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

#include <algorithm>
#include <atomic>
#include <condition_variable>
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
#include "support/fault_proxy.h"
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

// Many streams, each with its own arrival log, under one lock.
class Fleet {
 public:
  explicit Fleet(int n) : arrivals_(n), last_(n, 0), bad_(n, 0) {}
  SeqStream::MessageCallback MessageFn(int i) {
    return [this, i](tether::test::Event&& e) {
      std::lock_guard<std::mutex> l(mu_);
      if (e.seq() != last_[i] + 1) ++bad_[i];
      last_[i] = e.seq();
      arrivals_[i].push_back({e.server(), absl::Now()});
      cv_.notify_all();
    };
  }
  SeqStream::DoneCallback DoneFn(int i) {
    return [this, i](const absl::Status& s) {
      std::lock_guard<std::mutex> l(mu_);
      done_.push_back({i, s});
      cv_.notify_all();
    };
  }
  // Waits until every stream has a message after `t` (and from `server`
  // unless empty). Returns the latest of their first such arrivals, or
  // InfiniteFuture on timeout.
  absl::Time WaitAllAfter(absl::Time t, const std::string& server,
                          absl::Duration timeout) {
    std::unique_lock<std::mutex> l(mu_);
    absl::Time latest;
    auto all = [&] {
      latest = absl::InfinitePast();
      for (const auto& a : arrivals_) {
        absl::Time first = absl::InfiniteFuture();
        for (const auto& m : a) {
          if (m.second > t && (server.empty() || m.first == server)) {
            first = m.second;
            break;
          }
        }
        if (first == absl::InfiniteFuture()) return false;
        latest = std::max(latest, first);
      }
      return true;
    };
    if (!cv_.wait_for(l, absl::ToChronoNanoseconds(timeout), all)) {
      return absl::InfiniteFuture();
    }
    return latest;
  }
  // The first arrival of stream `i` from `server` after `t`.
  absl::Time FirstAfter(int i, const std::string& server, absl::Time t) {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& m : arrivals_[i]) {
      if (m.second > t && m.first == server) return m.second;
    }
    return absl::InfiniteFuture();
  }
  void ExpectClean() {
    std::lock_guard<std::mutex> l(mu_);
    for (std::size_t i = 0; i < bad_.size(); ++i) {
      EXPECT_EQ(bad_[i], 0) << "stream " << i << " lost or repeated a message";
    }
    for (const auto& d : done_) {
      ADD_FAILURE() << "stream " << d.first << " ended: " << d.second;
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<std::pair<std::string, absl::Time>>> arrivals_;
  std::vector<std::uint64_t> last_;
  std::vector<int> bad_;
  std::vector<std::pair<int, absl::Status>> done_;
};

// A black hole in the network (a proxy that stops forwarding, sockets kept
// open): every stream on it leaves within stall_timeout + 0.5 s for the
// other address, nothing lost or repeated.
TEST(UnannouncedFaults, BlackHoledConnectionIsLeftWithinTheStallTimeout) {
  auto a = StartServer("A");
  auto b = StartServer("B");
  ASSERT_TRUE(a && b);
  support::FaultProxy to_a, to_b;
  ASSERT_TRUE(to_a.Start().ok() && to_b.Start().ok());
  ASSERT_TRUE(to_a.SetBackend(a->address()).ok());
  ASSERT_TRUE(to_b.SetBackend(b->address()).ok());
  auto pool = MakePool({to_a.address(), to_b.address()});
  ASSERT_NE(pool, nullptr);
  constexpr int kStreams = 8;
  Fleet fleet(kStreams);
  ReconnectingStreamOptions options;
  options.stall_timeout = absl::Milliseconds(600);
  std::vector<std::unique_ptr<SeqStream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    auto s = SeqStream::Start(pool, WatchSpec(absl::StrCat("bh", i)), options,
                              fleet.MessageFn(i), fleet.DoneFn(i));
    ASSERT_TRUE(s.ok()) << s.status();
    streams.push_back(*std::move(s));
  }
  ASSERT_NE(fleet.WaitAllAfter(absl::InfinitePast(), "", kWait),
            absl::InfiniteFuture());
  // The node is gone without a FIN or RST: open connections carry nothing,
  // new ones never complete.
  to_a.SetAdmission(support::Admission::kHold);
  to_a.BlackHole(support::Select::All());
  const absl::Time holed = absl::Now();
  ASSERT_NE(fleet.WaitAllAfter(holed + absl::Milliseconds(700), "B", kWait),
            absl::InfiniteFuture());
  fleet.ExpectClean();
  std::uint64_t stalls = 0;
  for (const auto& s : streams) stalls += s->stats().stalls;
  EXPECT_GE(stalls, 1u) << "no stream was on the black-holed address";
  // Every stream that was on A delivers from B within the bound, counted
  // from the black hole.
  for (int i = 0; i < kStreams; ++i) {
    const absl::Time from_b = fleet.FirstAfter(i, "B", holed);
    EXPECT_LE(from_b - holed, options.stall_timeout + absl::Milliseconds(500))
        << "stream " << i << " left the black hole after "
        << absl::FormatDuration(from_b - holed);
  }
  streams.clear();
  to_a.Heal(support::Select::All());
  to_a.SetAdmission(support::Admission::kAccept);
}

// An outage that ends: every replica unreachable for 4 s, then back. Every
// stream delivers again within 0.5 s of the first replica accepting, though
// their own backoff had grown meanwhile.
TEST(UnannouncedFaults, OutageThatEndsRecoversEveryStreamWithinHalfASecond) {
  auto a = StartServer("A");
  ASSERT_TRUE(a);
  support::FaultProxy proxy;
  ASSERT_TRUE(proxy.Start().ok());
  ASSERT_TRUE(proxy.SetBackend(a->address()).ok());
  auto pool = MakePool({proxy.address()});
  ASSERT_NE(pool, nullptr);
  constexpr int kStreams = 16;
  Fleet fleet(kStreams);
  std::vector<std::unique_ptr<SeqStream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    auto s = SeqStream::Start(pool, WatchSpec(absl::StrCat("out", i)),
                              ReconnectingStreamOptions(), fleet.MessageFn(i),
                              fleet.DoneFn(i));
    ASSERT_TRUE(s.ok()) << s.status();
    streams.push_back(*std::move(s));
  }
  ASSERT_NE(fleet.WaitAllAfter(absl::InfinitePast(), "", kWait),
            absl::InfiniteFuture());
  // The outage: every connection closed, new ones closed at once.
  proxy.ClearBackends();
  proxy.Close(support::Select::All());
  const absl::Time down = absl::Now();
  // Nothing can be delivered while it lasts: wait out 4 s on that event.
  EXPECT_EQ(fleet.WaitAllAfter(down + absl::Milliseconds(50), "",
                               absl::Seconds(4)),
            absl::InfiniteFuture());
  ASSERT_TRUE(proxy.SetBackend(a->address()).ok());
  const absl::Time back = absl::Now();
  const absl::Time all = fleet.WaitAllAfter(back, "", kWait);
  ASSERT_NE(all, absl::InfiniteFuture()) << "not every stream came back";
  EXPECT_LE(all - back, absl::Milliseconds(500))
      << "the last stream delivered " << absl::FormatDuration(all - back)
      << " after the replica was back";
  fleet.ExpectClean();
  streams.clear();
}

}  // namespace
}  // namespace testsupport
}  // namespace tether
