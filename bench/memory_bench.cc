// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// memory_bench: client heap bytes per open stream at --streams (default
// 1000), three ways: raw gRPC callback readers, ReconnectingStream on one
// channel, ReconnectingStream over a ConnectionPool.
//
// How it measures (and why):
//  - The ledger replica (tick 500 ms, ~30-byte events) runs in a child
//    process, so only client memory is counted.
//  - Every variant gets its own, identical channel setup: raw and "one
//    channel" use a channel built with the same arguments a pool connection
//    gets (own subchannel pool, a unique per-connection arg, the pool's
//    keepalive settings); the pool builds its one connection itself.
//  - Before counting, each variant is warmed on its own channel with
//    --warmup streams that deliver and are torn down, so the connection,
//    gRPC's per-channel call-size estimate and the code paths are set up.
//  - Counted: mallinfo2() in-use bytes (all malloc arenas, mmapped blocks
//    included) once every stream has delivered 3 events (steady state),
//    median of 3 samples one tick apart, minus the value just before the
//    streams were opened. Per-stream app state (a message counter) is
//    allocated before the baseline for all variants alike.
//  - After a variant its streams, channel/pool are destroyed and the heap
//    is left to settle (in-flight calls finish in the background) before
//    the next variant starts; the bench prints what stayed behind.
//  - The whole sequence runs twice, each time in a fresh process, in the
//    order raw, channel, pool and then pool, channel, raw; both rows and
//    their mean are printed.
//
// The figures this replaces (raw 20.8 KB, pool 7.7-9.3 KB) came from one
// process that measured the pool while the previous variant's 1,000
// cancelled calls were still being freed in the background, which made the
// pool's delta smaller than the memory it really took.
//
// The last line is one JSON object: raw_bytes_per_stream,
// channel_bytes_per_stream, tether_pool_bytes_per_stream and
// pool_minus_raw_bytes (target: <= 1,536, see docs/performance.md).
//
//   memory_bench [--streams=1000] [--warmup=16]
//
// Where the bytes go, with a heap profiler: `--serve` runs only the replica
// and prints its address; `--server=ADDR --variant=raw|pool` measures one
// variant in this process, against that replica, and exits at steady state
// with every stream still open, so that a profiler's "leaked" bytes are what
// the open streams hold (docs/performance.md, "Memory").
#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "support/figures.h"
#include "bench/fast_ledger.h"
#include "examples/common/ledger_replica.h"
#include "grpcpp/create_channel.h"
#include "tether/connection_pool.h"
#include "tether/reconnecting_stream.h"

ABSL_FLAG(int, streams, 1000, "streams to open per variant");
ABSL_FLAG(int, warmup, 16, "streams opened and closed before counting");
ABSL_FLAG(bool, serve, false, "only run the replica; print its address");
ABSL_FLAG(std::string, server, "",
          "with --variant: the address of a replica started with --serve");
ABSL_FLAG(std::string, variant, "",
          "raw or pool: measure only this one, in this process, and exit at "
          "steady state with the streams open (for a heap profiler)");

namespace tb = ::tether::bench;
namespace ex = ::tether::examples;
using tb::lv1::AccountEvent;
using tb::lv1::WatchAccountRequest;
using Stream = tether::ReconnectingStream<WatchAccountRequest, AccountEvent>;

namespace {

constexpr absl::Duration kTick = absl::Milliseconds(500);

long long InUse() {
  struct mallinfo2 m = mallinfo2();
  return static_cast<long long>(m.uordblks + m.hblkhd);
}

bool WaitFor(const std::function<bool()>& pred, absl::Duration timeout) {
  absl::Time end = absl::Now() + timeout;
  while (!pred()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// Waits until the heap stops changing (in-flight calls finished).
void Settle() {
  long long prev = InUse();
  int calm = 0;
  for (int i = 0; i < 100 && calm < 3; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    long long now = InUse();
    calm = (std::llabs(now - prev) < 4096) ? calm + 1 : 0;
    prev = now;
  }
}

// The channel a pool connection gets (see ConnectionPool's defaults).
std::shared_ptr<grpc::Channel> PoolLikeChannel(const std::string& addr,
                                               int id) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetString("tether.connection_id", absl::StrCat("bench.", id));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 6 * 60 * 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20 * 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  return grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(),
                                   args);
}

// A set of open streams of one variant; destroying it closes them.
class Streams {
 public:
  virtual ~Streams() = default;
};

class RawStreams final : public Streams {
 public:
  RawStreams(const std::shared_ptr<grpc::Channel>& ch, int n,
             std::vector<std::atomic<std::int64_t>>* counts)
      : stub_(tb::lv1::Ledger::NewStub(ch)) {
    readers_.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      readers_.push_back(std::make_unique<tb::RawReader>(
          stub_.get(), absl::StrCat("acct-", i),
          &(*counts)[static_cast<std::size_t>(i)]));
    }
  }
  ~RawStreams() override {
    for (auto& r : readers_) r->Cancel();
    WaitFor(
        [&] {
          for (auto& r : readers_) {
            if (!r->done()) return false;
          }
          return true;
        },
        absl::Seconds(20));
  }

 private:
  std::unique_ptr<tb::lv1::Ledger::Stub> stub_;
  std::vector<std::unique_ptr<tb::RawReader>> readers_;
};

class TetherStreams final : public Streams {
 public:
  TetherStreams(const tether::Target& target, int n,
                std::vector<std::atomic<std::int64_t>>* counts) {
    streams_.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      tether::StreamSpec<WatchAccountRequest, AccountEvent> spec;
      spec.start = [](const std::shared_ptr<grpc::Channel>& c,
                      grpc::ClientContext* ctx, const WatchAccountRequest* req,
                      grpc::ClientReadReactor<AccountEvent>* r) {
        tb::lv1::Ledger::NewStub(c)->async()->WatchAccount(ctx, req, r);
      };
      spec.request.set_account(absl::StrCat("acct-", i));
      spec.sequence_of = [](const AccountEvent& e) {
        return absl::optional<std::uint64_t>(e.seq());
      };
      spec.resume_after = [](WatchAccountRequest& r, std::uint64_t s) {
        r.set_after_seq(s);
      };
      auto* count = &(*counts)[static_cast<std::size_t>(i)];
      auto s = Stream::Start(
          target, std::move(spec), {},
          [count](AccountEvent&&) {
            count->fetch_add(1, std::memory_order_relaxed);
          },
          [](const absl::Status&) {});
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
        std::exit(1);
      }
      streams_.push_back(*std::move(s));
    }
  }

 private:
  std::vector<std::unique_ptr<Stream>> streams_;
};

enum class Variant { kRaw, kChannel, kPool };
const char* Name(Variant v) {
  switch (v) {
    case Variant::kRaw:
      return "raw gRPC callback reader";
    case Variant::kChannel:
      return "tether, one channel";
    case Variant::kPool:
      return "tether, ConnectionPool";
  }
  return "?";
}

struct Result {
  double bytes_per_stream = 0;
  double left_behind_per_stream = 0;  // after teardown and settling
  int live = 0;
};

// Opens `n` streams of `v` (after a warm-up on the same channel), measures,
// tears down.
Result Measure(Variant v, const std::string& addr, int n, int warmup, int id) {
  std::vector<std::atomic<std::int64_t>> counts(static_cast<std::size_t>(n));
  std::shared_ptr<grpc::Channel> channel;
  std::shared_ptr<tether::ConnectionPool> pool;
  if (v == Variant::kPool) {
    tether::ConnectionPoolOptions po;
    po.target = addr;
    pool = tether::ConnectionPool::Create(po).value();
  } else {
    channel = PoolLikeChannel(addr, id);
  }
  auto open = [&](int k) -> std::unique_ptr<Streams> {
    for (int i = 0; i < k; ++i) counts[static_cast<std::size_t>(i)] = 0;
    switch (v) {
      case Variant::kRaw:
        return std::make_unique<RawStreams>(channel, k, &counts);
      case Variant::kChannel:
        return std::make_unique<TetherStreams>(channel, k, &counts);
      case Variant::kPool:
        return std::make_unique<TetherStreams>(pool, k, &counts);
    }
    return nullptr;
  };
  auto all_have = [&](int k, std::int64_t events) {
    return WaitFor(
        [&] {
          for (int i = 0; i < k; ++i) {
            if (counts[static_cast<std::size_t>(i)].load() < events) {
              return false;
            }
          }
          return true;
        },
        absl::Seconds(30));
  };
  {  // Warm-up on this very channel/pool.
    auto w = open(warmup);
    all_have(warmup, 1);
  }
  Settle();
  Result r;
  const long long before = InUse();
  auto s = open(n);
  all_have(n, 3);  // steady state: every stream delivered 3 events
  std::vector<long long> samples;
  for (int i = 0; i < 3; ++i) {
    samples.push_back(InUse() - before);
    absl::SleepFor(kTick);
  }
  std::sort(samples.begin(), samples.end());
  r.bytes_per_stream = static_cast<double>(samples[1]) / n;
  for (int i = 0; i < n; ++i) {
    r.live += counts[static_cast<std::size_t>(i)].load() >= 3;
  }
  if (!absl::GetFlag(FLAGS_variant).empty()) {
    // Exit with every stream open: a profiler sees what they hold.
    std::printf("%s: %.0f bytes/stream, %d of %d live\n", Name(v),
                r.bytes_per_stream, r.live, n);
    std::fflush(stdout);
    _exit(0);
  }
  // Close the streams and let their calls finish *before* dropping the
  // channel: an in-flight call holds the channel, and when the last
  // reference to it goes away on a gRPC callback thread, gRPC 1.51 tears
  // down its callback completion queue from that very thread (it cannot
  // join itself; see grpc/grpc#32584, #37858) and the process crashes.
  s.reset();
  Settle();
  channel.reset();
  pool.reset();
  Settle();
  r.left_behind_per_stream = static_cast<double>(InUse() - before) / n;
  return r;
}

// Runs the replica, writes its address and a newline to `fd`, and serves
// until the process is killed. Returns only if the replica does not start.
int ServeReplica(int fd) {
  ex::LedgerReplicaOptions o;
  o.name = "mem";
  o.tick = kTick;
  ex::LedgerReplica r(o);
  if (!r.Start().ok()) return 1;
  const std::string a = r.address() + "\n";
  (void)!write(fd, a.data(), a.size());
  for (;;) pause();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const int n = absl::GetFlag(FLAGS_streams);
  const int warmup = std::max(1, absl::GetFlag(FLAGS_warmup));

  if (absl::GetFlag(FLAGS_serve)) return ServeReplica(STDOUT_FILENO);
  const std::string variant = absl::GetFlag(FLAGS_variant);
  if (!variant.empty()) {
    const std::string server = absl::GetFlag(FLAGS_server);
    if ((variant != "raw" && variant != "pool") || server.empty()) {
      std::fprintf(stderr, "--variant=raw|pool needs --server=ADDR\n");
      return 2;
    }
    Measure(variant == "raw" ? Variant::kRaw : Variant::kPool, server, n,
            warmup, 1);
    return 1;  // Measure exits at steady state
  }

  // The server, in a child forked before this process touches gRPC.
  int pipefd[2];
  if (pipe(pipefd) != 0) return 1;
  pid_t server = fork();
  if (server == 0) {
    close(pipefd[0]);
    _exit(ServeReplica(pipefd[1]));
  }
  close(pipefd[1]);
  char buf[64] = {};
  ssize_t got = read(pipefd[0], buf, sizeof(buf) - 1);
  close(pipefd[0]);
  if (got <= 0) return 1;
  const std::string addr(buf, static_cast<std::size_t>(got) - 1);

  // Two passes, each in a fresh process (forked from this one, which never
  // initialised gRPC), in opposite orders.
  const std::vector<Variant> orders[2] = {
      {Variant::kRaw, Variant::kChannel, Variant::kPool},
      {Variant::kPool, Variant::kChannel, Variant::kRaw}};
  Result results[2][3];
  for (int pass = 0; pass < 2; ++pass) {
    int rp[2];
    if (pipe(rp) != 0) return 1;
    pid_t child = fork();
    if (child == 0) {
      close(rp[0]);
      Result out[3];
      int id = 0;
      for (Variant v : orders[pass]) {
        std::fprintf(stderr, "pass %d: %s\n", pass + 1, Name(v));
        out[static_cast<int>(v)] = Measure(v, addr, n, warmup, ++id);
      }
      (void)!write(rp[1], out, sizeof(out));
      _exit(0);
    }
    close(rp[1]);
    Result in[3];
    std::size_t have = 0;
    while (have < sizeof(in)) {
      ssize_t k =
          read(rp[0], reinterpret_cast<char*>(in) + have, sizeof(in) - have);
      if (k <= 0) break;
      have += static_cast<std::size_t>(k);
    }
    close(rp[0]);
    int status = 0;
    waitpid(child, &status, 0);
    if (have != sizeof(in)) {
      std::fprintf(stderr, "pass %d failed\n", pass + 1);
      kill(server, SIGKILL);
      return 1;
    }
    std::memcpy(results[pass], in, sizeof(in));
  }
  kill(server, SIGKILL);
  waitpid(server, nullptr, 0);

  std::printf(
      "memory at %d open streams, client heap (mallinfo2 in-use), steady "
      "state (every stream delivered 3 events), bytes/stream:\n",
      n);
  std::printf("  %-26s %14s %14s %8s %10s\n", "", "pass 1", "pass 2", "mean",
              "vs raw");
  std::printf("  %-26s %14s %14s\n", "", "(raw,ch,pool)", "(pool,ch,raw)");
  const double raw =
      (results[0][0].bytes_per_stream + results[1][0].bytes_per_stream) / 2;
  bool ok = true;
  for (int v = 0; v < 3; ++v) {
    double mean =
        (results[0][v].bytes_per_stream + results[1][v].bytes_per_stream) / 2;
    std::printf("  %-26s %14.0f %14.0f %8.0f %+10.0f\n",
                Name(static_cast<Variant>(v)), results[0][v].bytes_per_stream,
                results[1][v].bytes_per_stream, mean, mean - raw);
    for (int p = 0; p < 2; ++p) ok = ok && results[p][v].live == n;
  }
  std::printf("  left behind after teardown (bytes/stream, pass 1 / pass 2):");
  for (int v = 0; v < 3; ++v) {
    std::printf(" %s %.0f/%.0f;",
                v == 0   ? "raw"
                : v == 1 ? "ch"
                         : "pool",
                results[0][v].left_behind_per_stream,
                results[1][v].left_behind_per_stream);
  }
  std::printf("\n");
  if (!ok) std::printf("  WARNING: not every stream reached 3 events\n");
  auto mean = [&](int v) {
    return (results[0][v].bytes_per_stream + results[1][v].bytes_per_stream) /
           2;
  };
  tether::support::JsonLine json;
  json.Set("streams", n);
  json.Set("raw_bytes_per_stream", mean(0));
  json.Set("channel_bytes_per_stream", mean(1));
  json.Set("tether_pool_bytes_per_stream", mean(2));
  json.Set("pool_minus_raw_bytes", mean(2) - mean(0));
  json.Set("all_live", ok);
  json.Print();
  return ok ? 0 : 1;
}
