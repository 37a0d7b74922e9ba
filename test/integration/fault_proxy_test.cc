// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Tests of support/fault_proxy: routing, counters and every fault, with plain
// sockets on 127.0.0.1. Waits are on events (a byte, an EOF, a counter) with
// generous deadlines. The only timed windows are the short ones that check
// that nothing happened (kQuiet): on loopback a proxy that forwards does so
// within microseconds, so a longer window would not make them stricter.
#include "support/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/child_process.h"

namespace tether {
namespace support {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr absl::Duration kWait = absl::Seconds(10);
constexpr absl::Duration kQuiet = absl::Milliseconds(200);

// A raw client socket connected to 127.0.0.1:port, or -1.
int ConnectTo(int port) {
  const int fd = support::ConnectLoopback(port);
  if (fd < 0) return -1;
  timeval tv{10, 0};  // Reads never hang the test.
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// A listening socket on 127.0.0.1 (port picked); returns fd, sets *port.
int ListenOn(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 8) != 0) {
    close(fd);
    return -1;
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

TEST(FaultProxyTest, ClosesClientWhenBackendRefusesOrIsUnset) {
  FaultProxy proxy;
  ASSERT_TRUE(proxy.Start().ok());
  // No backend yet.
  int c = ConnectTo(proxy.port());
  ASSERT_GE(c, 0);
  char byte;
  EXPECT_EQ(read(c, &byte, 1), 0);
  close(c);

  // A backend port nobody listens on.
  int port = 0;
  int l = ListenOn(&port);
  ASSERT_GE(l, 0);
  close(l);
  ASSERT_TRUE(proxy.SetBackend(absl::StrCat("127.0.0.1:", port)).ok());
  c = ConnectTo(proxy.port());
  ASSERT_GE(c, 0);
  EXPECT_EQ(read(c, &byte, 1), 0);
  close(c);
  EXPECT_TRUE(proxy.WaitForAccepted(2, kWait));
  EXPECT_EQ(proxy.live_connections(), 0);

  EXPECT_EQ(proxy.SetBackend("nonsense").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(proxy.SetBackend("127.0.0.1:0").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FaultProxyTest, CopiesBytesBothWaysAndPassesHalfClose) {
  int backend_port = 0;
  int listener = ListenOn(&backend_port);
  ASSERT_GE(listener, 0);
  FaultProxy proxy;
  ASSERT_TRUE(proxy.Start().ok());
  ASSERT_TRUE(proxy.SetBackend(absl::StrCat("localhost:", backend_port)).ok());

  int client = ConnectTo(proxy.port());
  ASSERT_GE(client, 0);
  int server = accept(listener, nullptr, nullptr);
  ASSERT_GE(server, 0);
  timeval tv{10, 0};
  setsockopt(server, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

  ASSERT_EQ(write(client, "ping", 4), 4);
  char buf[16];
  std::string got;
  while (got.size() < 4) {
    ssize_t n = read(server, buf, sizeof(buf));
    ASSERT_GT(n, 0);
    got.append(buf, static_cast<std::size_t>(n));
  }
  EXPECT_EQ(got, "ping");

  // Client half-closes: the server sees EOF but can still answer.
  ASSERT_EQ(shutdown(client, SHUT_WR), 0);
  EXPECT_EQ(read(server, buf, sizeof(buf)), 0);
  ASSERT_EQ(write(server, "pong", 4), 4);
  got.clear();
  while (got.size() < 4) {
    ssize_t n = read(client, buf, sizeof(buf));
    ASSERT_GT(n, 0);
    got.append(buf, static_cast<std::size_t>(n));
  }
  EXPECT_EQ(got, "pong");
  EXPECT_EQ(proxy.live_connections(), 1);
  close(server);
  EXPECT_EQ(read(client, buf, sizeof(buf)), 0);
  EXPECT_TRUE(proxy.WaitForLiveConnectionsTo(
      absl::StrCat("localhost:", backend_port), 0, kWait));
  close(client);
  close(listener);
  proxy.Stop();
  proxy.Stop();  // Idempotent.
}

// Accepts one connection on `listener` within kWait, or -1.
int AcceptOne(int listener) {
  pollfd p{listener, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(kWait))) != 1) {
    return -1;
  }
  int fd = accept(listener, nullptr, nullptr);
  if (fd >= 0) {
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  return fd;
}

// Reads exactly `n` bytes (each read bounded by SO_RCVTIMEO); what it got.
std::string ReadN(int fd, std::size_t n) {
  std::string got;
  char buf[4096];
  while (got.size() < n) {
    ssize_t r = read(fd, buf, std::min(sizeof(buf), n - got.size()));
    if (r <= 0) break;
    got.append(buf, static_cast<std::size_t>(r));
  }
  return got;
}

// What the next read returns: 0 (EOF), or -errno.
int ReadEnd(int fd) {
  char byte;
  ssize_t r = read(fd, &byte, 1);
  if (r < 0) return -errno;
  return static_cast<int>(r);  // 1 would be unexpected data.
}

// True if `fd` has nothing to read (and no EOF) for kQuiet.
bool StaysQuiet(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(kQuiet))) == 0;
}

bool WriteAll(int fd, const std::string& data) {
  return write(fd, data.data(), data.size()) ==
         static_cast<ssize_t>(data.size());
}

// A backend listener, a started proxy routed to it, and one connection
// through it: `client` (ours) <-> proxy <-> `server` (the backend's end).
class PairTest : public ::testing::Test {
 protected:
  void SetUp() override {
    listener_ = ListenOn(&backend_port_);
    ASSERT_GE(listener_, 0);
    backend_ = absl::StrCat("127.0.0.1:", backend_port_);
    ASSERT_TRUE(proxy_.Start().ok());
    ASSERT_TRUE(proxy_.SetBackend(backend_).ok());
    client_ = ConnectTo(proxy_.port());
    ASSERT_GE(client_, 0);
    server_ = AcceptOne(listener_);
    ASSERT_GE(server_, 0);
    ASSERT_TRUE(proxy_.WaitForLiveConnections(1, kWait));
    // The pair works before any fault.
    ASSERT_TRUE(WriteAll(client_, "hi"));
    ASSERT_EQ(ReadN(server_, 2), "hi");
    ASSERT_TRUE(WriteAll(server_, "yo"));
    ASSERT_EQ(ReadN(client_, 2), "yo");
  }
  void TearDown() override {
    proxy_.Stop();
    for (int fd : {client_, server_, listener_}) {
      if (fd >= 0) close(fd);
    }
  }
  std::uint64_t OnlyId() {
    auto conns = proxy_.Connections();
    return conns.size() == 1 ? conns[0].id : 0;
  }

  FaultProxy proxy_;
  int listener_ = -1;
  int backend_port_ = 0;
  std::string backend_;
  int client_ = -1;
  int server_ = -1;
};

TEST_F(PairTest, BlackHoleDropsBothWaysAndKeepsSocketsOpen) {
  ASSERT_EQ(proxy_.BlackHole(Select::All()), 1);
  ASSERT_TRUE(WriteAll(client_, "lost"));
  ASSERT_TRUE(WriteAll(server_, "gone!"));
  // The proxy read and dropped all 9 bytes...
  ASSERT_TRUE(proxy_.WaitForConnections(
      [](const std::vector<ConnectionInfo>& c) {
        return c.size() == 1 && c[0].bytes_dropped == 9;
      },
      kWait));
  // ...forwarded none of them, and neither side heard a close.
  auto conns = proxy_.Connections();
  ASSERT_EQ(conns.size(), 1u);
  EXPECT_TRUE(conns[0].black_holed);
  EXPECT_EQ(conns[0].bytes_to_backend, 2);
  EXPECT_EQ(conns[0].bytes_to_client, 2);
  EXPECT_TRUE(StaysQuiet(client_));
  EXPECT_TRUE(StaysQuiet(server_));
  // A FIN from the client is swallowed too: the backend hears nothing.
  ASSERT_EQ(shutdown(client_, SHUT_WR), 0);
  EXPECT_TRUE(StaysQuiet(server_));
  EXPECT_EQ(proxy_.live_connections(), 1);
  // Heal does not undo a black hole; a reset ends it.
  EXPECT_EQ(proxy_.Heal(Select::All()), 1);
  ASSERT_TRUE(WriteAll(server_, "x"));
  ASSERT_TRUE(proxy_.WaitForConnections(
      [](const std::vector<ConnectionInfo>& c) {
        return c.size() == 1 && c[0].bytes_dropped == 10;
      },
      kWait));
  EXPECT_EQ(proxy_.Reset(Select::All()), 1);
  EXPECT_EQ(ReadEnd(server_), -ECONNRESET);
  EXPECT_TRUE(proxy_.WaitForLiveConnections(0, kWait));
}

TEST_F(PairTest, PauseHoldsBytesAndResumeDeliversThemInOrder) {
  ASSERT_EQ(proxy_.Pause(Select::Backend(backend_)), 1);
  ASSERT_TRUE(WriteAll(client_, "abc"));
  ASSERT_TRUE(WriteAll(server_, "xyz"));
  EXPECT_TRUE(StaysQuiet(server_));
  EXPECT_TRUE(StaysQuiet(client_));
  auto conns = proxy_.Connections();
  ASSERT_EQ(conns.size(), 1u);
  EXPECT_TRUE(conns[0].paused);
  EXPECT_EQ(conns[0].bytes_to_backend, 2);
  ASSERT_TRUE(WriteAll(client_, "def"));
  ASSERT_EQ(proxy_.Resume(Select::Backend(backend_)), 1);
  EXPECT_EQ(ReadN(server_, 6), "abcdef");
  EXPECT_EQ(ReadN(client_, 3), "xyz");
  EXPECT_EQ(proxy_.Pause(Select::Backend("127.0.0.1:1")), 0);  // none there
}

TEST_F(PairTest, DelayAddsLatencyPerChunkUntilCleared) {
  const absl::Duration delay = absl::Milliseconds(150);
  ASSERT_EQ(proxy_.SetDelay(Select::All(), delay), 1);
  absl::Time start = absl::Now();
  ASSERT_TRUE(WriteAll(client_, "slow"));
  EXPECT_EQ(ReadN(server_, 4), "slow");
  EXPECT_GE(absl::Now() - start, delay);
  start = absl::Now();
  ASSERT_TRUE(WriteAll(server_, "back"));
  EXPECT_EQ(ReadN(client_, 4), "back");
  EXPECT_GE(absl::Now() - start, delay);
  EXPECT_EQ(proxy_.Connections()[0].delay, delay);

  ASSERT_EQ(proxy_.SetDelay(Select::All(), absl::ZeroDuration()), 1);
  start = absl::Now();
  ASSERT_TRUE(WriteAll(client_, "fast"));
  EXPECT_EQ(ReadN(server_, 4), "fast");
  EXPECT_LT(absl::Now() - start, delay);
}

TEST_F(PairTest, DripForwardsAtMostNBytesPerInterval) {
  ASSERT_EQ(proxy_.SetDrip(Select::All(), 100, absl::Milliseconds(50)), 1);
  std::string data;
  for (int i = 0; i < 1000; ++i)
    data.push_back(static_cast<char>('a' + i % 26));
  absl::Time start = absl::Now();
  ASSERT_TRUE(WriteAll(client_, data));
  // The first 100 bytes go at once, then 100 per 50 ms: at least 9 more
  // intervals. No read may return more than one interval's worth.
  std::string got;
  char buf[4096];
  std::size_t biggest = 0;
  while (got.size() < data.size()) {
    ssize_t r = read(server_, buf, sizeof(buf));
    ASSERT_GT(r, 0);
    biggest = std::max(biggest, static_cast<std::size_t>(r));
    got.append(buf, static_cast<std::size_t>(r));
  }
  EXPECT_EQ(got, data);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(9 * 50));
  EXPECT_LE(biggest, 200u);  // two intervals may coalesce in the socket
  ASSERT_EQ(proxy_.Heal(Select::All()), 1);
  EXPECT_EQ(proxy_.Connections()[0].drip_bytes, 0);
  ASSERT_TRUE(WriteAll(client_, data));
  EXPECT_EQ(ReadN(server_, data.size()), data);
}

TEST_F(PairTest, ResetSendsRstBothWays) {
  std::uint64_t id = OnlyId();
  ASSERT_NE(id, 0u);
  EXPECT_EQ(proxy_.Reset(Select::Connection(id + 1)), 0);
  EXPECT_EQ(proxy_.Reset(Select::Connection(id)), 1);
  EXPECT_EQ(ReadEnd(client_), -ECONNRESET);
  EXPECT_EQ(ReadEnd(server_), -ECONNRESET);
  EXPECT_TRUE(proxy_.WaitForLiveConnectionsTo(backend_, 0, kWait));
  EXPECT_THAT(proxy_.Connections(), IsEmpty());
  EXPECT_EQ(proxy_.TotalConnectionsTo(backend_), 1);
}

TEST_F(PairTest, CloseSendsFinBothWays) {
  EXPECT_EQ(proxy_.Close(Select::All()), 1);
  EXPECT_EQ(ReadEnd(client_), 0);
  EXPECT_EQ(ReadEnd(server_), 0);
  EXPECT_TRUE(proxy_.WaitForLiveConnections(0, kWait));
}

TEST_F(PairTest, HalfCloseTowardClientKeepsTheOtherDirection) {
  ASSERT_EQ(proxy_.HalfClose(Select::All(), Side::kClient), 1);
  EXPECT_EQ(ReadEnd(client_), 0);  // FIN to the client
  // The client can still talk to the backend...
  ASSERT_TRUE(WriteAll(client_, "still here"));
  EXPECT_EQ(ReadN(server_, 10), "still here");
  // ...whose answers are dropped.
  ASSERT_TRUE(WriteAll(server_, "unheard"));
  ASSERT_TRUE(proxy_.WaitForConnections(
      [](const std::vector<ConnectionInfo>& c) {
        return c.size() == 1 && c[0].bytes_dropped == 7;
      },
      kWait));
  // The client's FIN still reaches the backend, and then the pair is done
  // once the backend closes.
  ASSERT_EQ(shutdown(client_, SHUT_WR), 0);
  EXPECT_EQ(ReadEnd(server_), 0);
  close(server_);
  server_ = -1;
  EXPECT_TRUE(proxy_.WaitForLiveConnections(0, kWait));
}

TEST_F(PairTest, HalfCloseTowardBackend) {
  ASSERT_EQ(proxy_.HalfClose(Select::All(), Side::kBackend), 1);
  EXPECT_EQ(ReadEnd(server_), 0);
  ASSERT_TRUE(WriteAll(server_, "answer"));
  EXPECT_EQ(ReadN(client_, 6), "answer");
}

TEST_F(PairTest, FaultsApplyPerConnection) {
  // A second pair through the same proxy.
  int client2 = ConnectTo(proxy_.port());
  ASSERT_GE(client2, 0);
  int server2 = AcceptOne(listener_);
  ASSERT_GE(server2, 0);
  ASSERT_TRUE(proxy_.WaitForLiveConnections(2, kWait));
  auto conns = proxy_.Connections();
  ASSERT_EQ(conns.size(), 2u);
  EXPECT_LT(conns[0].id, conns[1].id);
  // Black-hole the first; the second keeps forwarding.
  ASSERT_EQ(proxy_.BlackHole(Select::Connection(conns[0].id)), 1);
  ASSERT_TRUE(WriteAll(client2, "ok"));
  EXPECT_EQ(ReadN(server2, 2), "ok");
  ASSERT_TRUE(WriteAll(client_, "no"));
  EXPECT_TRUE(StaysQuiet(server_));
  conns = proxy_.Connections();
  ASSERT_EQ(conns.size(), 2u);
  EXPECT_TRUE(conns[0].black_holed);
  EXPECT_FALSE(conns[1].black_holed);
  // Everything at once.
  EXPECT_EQ(proxy_.Reset(Select::All()), 2);
  EXPECT_EQ(ReadEnd(client2), -ECONNRESET);
  EXPECT_TRUE(proxy_.WaitForLiveConnections(0, kWait));
  EXPECT_EQ(proxy_.total_accepted(), 2);
  close(client2);
  close(server2);
}

TEST_F(PairTest, StopEndsPausedAndBlackHoledConnections) {
  int client2 = ConnectTo(proxy_.port());
  ASSERT_GE(client2, 0);
  int server2 = AcceptOne(listener_);
  ASSERT_GE(server2, 0);
  ASSERT_TRUE(proxy_.WaitForLiveConnections(2, kWait));
  auto conns = proxy_.Connections();
  ASSERT_EQ(conns.size(), 2u);
  ASSERT_EQ(proxy_.Pause(Select::Connection(conns[0].id)), 1);
  ASSERT_EQ(proxy_.BlackHole(Select::Connection(conns[1].id)), 1);
  proxy_.Stop();  // Joins every thread (the test would hang otherwise).
  EXPECT_EQ(proxy_.live_connections(), 0);
  EXPECT_EQ(ReadEnd(client_), 0);
  EXPECT_EQ(ReadEnd(client2), 0);
  close(client2);
  close(server2);
}

TEST(FaultProxyTest, RoundRobinOverBackendsAndCounters) {
  int port_a = 0;
  int port_b = 0;
  int la = ListenOn(&port_a);
  int lb = ListenOn(&port_b);
  ASSERT_GE(la, 0);
  ASSERT_GE(lb, 0);
  const std::string a = absl::StrCat("127.0.0.1:", port_a);
  const std::string b = absl::StrCat("localhost:", port_b);
  FaultProxy proxy;
  ASSERT_TRUE(proxy.Start().ok());
  EXPECT_EQ(proxy.Start().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(proxy.AddBackend(a).ok());
  ASSERT_TRUE(proxy.AddBackend(b).ok());
  ASSERT_TRUE(proxy.AddBackend(a).ok());  // no duplicate
  EXPECT_THAT(proxy.backends(), ElementsAre(a, b));
  EXPECT_EQ(proxy.AddBackend("nonsense").code(),
            absl::StatusCode::kInvalidArgument);

  std::vector<int> clients;
  std::vector<int> servers;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(ConnectTo(proxy.port()));
    ASSERT_GE(clients.back(), 0);
    // Round robin: a, b, a, b.
    servers.push_back(AcceptOne(i % 2 == 0 ? la : lb));
    ASSERT_GE(servers.back(), 0);
  }
  ASSERT_TRUE(proxy.WaitForLiveConnections(4, kWait));
  EXPECT_EQ(proxy.LiveConnectionsTo(a), 2);
  EXPECT_EQ(proxy.LiveConnectionsTo(b), 2);
  EXPECT_EQ(proxy.total_accepted(), 4);
  auto per_backend = proxy.TotalConnectionsPerBackend();
  EXPECT_EQ(per_backend[a], 2);
  EXPECT_EQ(per_backend[b], 2);

  // Removing a backend leaves its open connections alone.
  proxy.RemoveBackend(a);
  EXPECT_THAT(proxy.backends(), ElementsAre(b));
  ASSERT_TRUE(WriteAll(clients[0], "still"));
  EXPECT_EQ(ReadN(servers[0], 5), "still");
  clients.push_back(ConnectTo(proxy.port()));
  servers.push_back(AcceptOne(lb));
  ASSERT_GE(servers.back(), 0);
  EXPECT_TRUE(proxy.WaitForTotalConnectionsTo(b, 3, kWait));
  EXPECT_EQ(proxy.TotalConnectionsTo(a), 2);

  // Reset everything to `a` only.
  EXPECT_EQ(proxy.Reset(Select::Backend(a)), 2);
  EXPECT_TRUE(proxy.WaitForLiveConnectionsTo(a, 0, kWait));
  EXPECT_EQ(proxy.LiveConnectionsTo(b), 3);
  EXPECT_EQ(proxy.live_connections(), 3);
  proxy.Stop();
  EXPECT_TRUE(proxy.WaitForLiveConnections(0, kWait));
  for (int fd : clients) close(fd);
  for (int fd : servers) close(fd);
  close(la);
  close(lb);
}

TEST(FaultProxyTest, AdmissionRefusesOrHoldsNewConnections) {
  int port = 0;
  int listener = ListenOn(&port);
  ASSERT_GE(listener, 0);
  FaultProxy proxy;
  ASSERT_TRUE(proxy.Start().ok());
  ASSERT_TRUE(proxy.SetBackend(absl::StrCat("127.0.0.1:", port)).ok());

  proxy.SetAdmission(Admission::kReset);
  int c = ConnectTo(proxy.port());
  ASSERT_GE(c, 0);
  EXPECT_EQ(ReadEnd(c), -ECONNRESET);
  close(c);

  proxy.SetAdmission(Admission::kClose);
  c = ConnectTo(proxy.port());
  ASSERT_GE(c, 0);
  EXPECT_EQ(ReadEnd(c), 0);
  close(c);
  EXPECT_TRUE(proxy.WaitForAccepted(2, kWait));
  EXPECT_EQ(proxy.live_connections(), 0);

  // Held: the handshake completes in the backlog, nothing is accepted.
  proxy.SetAdmission(Admission::kHold);
  EXPECT_EQ(proxy.admission(), Admission::kHold);
  c = ConnectTo(proxy.port());
  ASSERT_GE(c, 0);
  ASSERT_TRUE(WriteAll(c, "wait"));
  EXPECT_FALSE(proxy.WaitForAccepted(3, kQuiet));
  EXPECT_TRUE(StaysQuiet(c));
  // Admitted again: the held connection is routed, bytes and all.
  proxy.SetAdmission(Admission::kAccept);
  EXPECT_TRUE(proxy.WaitForAccepted(3, kWait));
  int server = AcceptOne(listener);
  ASSERT_GE(server, 0);
  EXPECT_EQ(ReadN(server, 4), "wait");
  close(server);
  close(c);
  close(listener);
}

TEST(FaultProxyTest, RejectsBadPort) {
  FaultProxy proxy;
  EXPECT_EQ(proxy.Start(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(proxy.Start(70000).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(proxy.port(), 0);
  proxy.Stop();  // Never started: a no-op.
}

}  // namespace
}  // namespace support
}  // namespace tether
