// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// memory_bench: heap bytes per open stream at --streams (default 1000)
// streams, raw gRPC callback readers against ReconnectingStream (on one
// channel, and over a ConnectionPool). The ledger server runs in a child
// process (forked before gRPC starts) so only client memory is counted:
// mallinfo2() in-use bytes after every stream has had messages, minus before.
//
//   memory_bench [--streams=1000]
#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "bench/fast_ledger.h"
#include "examples/common/ledger_replica.h"
#include "examples/common/ledger_watchers.h"
#include "tether/connection_pool.h"

ABSL_FLAG(int, streams, 1000, "streams to open");

namespace tb = ::tether::bench;
namespace ex = ::tether::examples;

namespace {

std::size_t InUse() {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

void WaitFor(const std::function<bool()>& pred, absl::Duration timeout) {
  absl::Time end = absl::Now() + timeout;
  while (!pred() && absl::Now() < end) absl::SleepFor(absl::Milliseconds(10));
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int n = absl::GetFlag(FLAGS_streams);
  int pipefd[2];
  if (pipe(pipefd) != 0) return 1;
  pid_t child = fork();
  if (child == 0) {
    close(pipefd[0]);
    ex::LedgerReplicaOptions o;
    o.name = "mem";
    o.tick = absl::Milliseconds(500);
    ex::LedgerReplica r(o);
    if (!r.Start().ok()) _exit(1);
    std::string a = r.address() + "\n";
    (void)!write(pipefd[1], a.data(), a.size());
    pause();  // until SIGKILL
    _exit(0);
  }
  close(pipefd[1]);
  char buf[64] = {};
  ssize_t got = read(pipefd[0], buf, sizeof(buf) - 1);
  if (got <= 0) return 1;
  std::string addr(buf, static_cast<std::size_t>(got) - 1);

  auto ch = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  auto stub = tb::lv1::Ledger::NewStub(ch);
  absl::Time epoch = absl::Now();
  double raw_b, tether_b, pool_b;
  {
    // Warm the channel, gRPC's pools and the code paths once.
    std::atomic<std::int64_t> c{0};
    auto r = std::make_unique<tb::RawReader>(stub.get(), "warm", &c);
    WaitFor([&] { return c.load() > 0; }, absl::Seconds(5));
    r->Cancel();
    WaitFor([&] { return r->done(); }, absl::Seconds(5));
  }
  {
    std::atomic<std::int64_t> c{0};
    std::vector<std::unique_ptr<tb::RawReader>> rs;
    std::size_t before = InUse();
    for (int i = 0; i < n; ++i) {
      rs.push_back(std::make_unique<tb::RawReader>(
          stub.get(), "acct-" + std::to_string(i), &c));
    }
    WaitFor([&] { return c.load() >= 2 * n; }, absl::Seconds(20));
    raw_b = static_cast<double>(InUse() - before) / n;
    for (auto& r : rs) r->Cancel();
    WaitFor([&] {
      for (auto& r : rs) if (!r->done()) return false;
      return true;
    }, absl::Seconds(20));
  }
  auto measure = [&](tether::Target target) {
    std::vector<std::shared_ptr<ex::WatchRecorder>> recs;
    for (int i = 0; i < n; ++i) {
      recs.push_back(std::make_shared<ex::WatchRecorder>(
          "acct-" + std::to_string(i), epoch));
    }
    std::vector<std::unique_ptr<ex::TetherWatch>> ws;
    std::size_t before = InUse();
    for (int i = 0; i < n; ++i) {
      ws.push_back(ex::TetherWatch::Start(target, recs[i], {}).value());
    }
    WaitFor([&] {
      for (auto& r : recs) if (r->total().events < 2) return false;
      return true;
    }, absl::Seconds(20));
    // The recorders are the app's, not tether's: count them out.
    std::size_t rec_bytes = 0;
    for (auto& r : recs) rec_bytes += sizeof(ex::WatchRecorder) +
                                      r->segments().size() * 64;
    double b = static_cast<double>(InUse() - before - rec_bytes) / n;
    int live = 0;
    for (auto& r : recs) live += r->total().events >= 2 && r->total().errors == 0;
    if (live != n) std::printf("  (only %d of %d streams delivered)\n", live, n);
    ws.clear();
    return b;
  };
  tether_b = measure(ch);
  {
    tether::ConnectionPoolOptions po;
    po.target = addr;
    auto pool = tether::ConnectionPool::Create(po).value();
    pool_b = measure(pool);
  }
  std::printf("memory at %d open streams (client heap, mallinfo2):\n", n);
  std::printf("  raw gRPC callback reader      %8.0f bytes/stream\n", raw_b);
  std::printf("  tether, one channel           %8.0f bytes/stream (+%.0f)\n",
              tether_b, tether_b - raw_b);
  std::printf("  tether, ConnectionPool        %8.0f bytes/stream (+%.0f)\n",
              pool_b, pool_b - raw_b);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return 0;
}
