// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// scale_bench: --streams (default 10,000) ReconnectingStreams over one
// ConnectionPool, through a Service-like loopback proxy, to one ledger
// replica ("a"). Then one GOAWAY for all of them: a second replica ("b")
// joins the proxy, "a" leaves it and calls Server::Shutdown with a deadline
// (--drain_ms). Prints
//   - the time from the Shutdown call until every stream has delivered an
//     event from "b" (and the p50/p99 of that time over the streams);
//   - the peak number of attempts started in one 10 ms bucket after the
//     GOAWAY, from a StreamObserver counting OnAttemptStarted, and how far
//     the attempts were spread;
//   - ordering checks (every stream's seqs must stay gap- and duplicate-free).
// Both replicas run in this process with a slow tick (--tick_ms, default
// 500 ms) and ~30-byte events, so 10,000 streams fit on 2 cores. Note that
// a replica sends its first event to a new watch at its next tick, so "time
// until every stream delivers again" includes up to one tick.
//
// Jitter: --migrate_on_drain=true (tether's default) moves each stream as
// soon as the pool reports its connection draining; those moves are started
// by the pool's drain notification and take no jitter of their own.
// --migrate_on_drain=false makes streams stay until the server ends them at
// the drain deadline; they then reopen after a random delay in
// [0, --reopen_jitter_ms) (ReconnectingStreamOptions::
// reopen_after_progress_jitter; the library default is 5 ms).
//
// Spread: --spread_ms=W runs a second rollout in the same process with
// ReconnectingStreamOptions::migration_jitter = W and compares the two:
// peak attempts per 10 ms (each attempt is one stream open at the
// replicas), error ends, violations, and when the last stream moved
// against the drain deadline (--drain_ms must leave room for W plus a
// tick).
//
//   scale_bench [--streams=10000] [--tick_ms=500] [--drain_ms=10000]
//               [--migrate_on_drain=true] [--reopen_jitter_ms=5]
//               [--timeout_s=60] [--standby_connections=0]
//               [--max_streams_per_connection=0] [--max_connections=8]
//               [--spread_ms=0] [--raw=true]
//
// Raw anchor (--raw, on by default): before tether's streams, as many raw
// gRPC callback calls on a fresh channel to "a", through the same proxy,
// started together and timed from the first call to the last one's first
// event; they are closed (and the freed heap given back) before tether's
// streams open.
//
// The last line is one JSON object: streams, cold_open_all_delivering_ms
// (first Start call -> the last stream's first event), and
// migration_all_delivering_ms (Shutdown -> the last stream's first event
// from "b"), both from per-stream timestamps, and their ratio
// (migration_vs_cold); raw_open_all_delivering_ms and both figures over it
// (cold_open_vs_raw, migration_vs_raw_open). See docs/performance.md.
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/fast_ledger.h"
#include "examples/common/ledger_replica.h"
#include "ledger/ledger.grpc.pb.h"
#include "support/fault_proxy.h"
#include "support/figures.h"
#include "tether/connection_pool.h"
#include "tether/observer.h"
#include "tether/reconnecting_stream.h"

ABSL_FLAG(int, streams, 10000, "streams over the one pool");
ABSL_FLAG(int, tick_ms, 500, "replica tick (one event per stream per tick)");
ABSL_FLAG(int, drain_ms, 10000, "Shutdown deadline of the old replica");
ABSL_FLAG(bool, migrate_on_drain, true,
          "ReconnectingStreamOptions::migrate_on_drain");
ABSL_FLAG(int, reopen_jitter_ms, 5,
          "ReconnectingStreamOptions::reopen_after_progress_jitter, ms");
ABSL_FLAG(int, migration_jitter_ms, 0,
          "ReconnectingStreamOptions::migration_jitter, ms (default 0)");
ABSL_FLAG(int, spread_ms, 0,
          "when > 0, a second rollout in the same run with "
          "migration_jitter = this many ms, compared with the first "
          "(peak attempts per 10 ms, errors, violations, last move vs the "
          "drain deadline)");
ABSL_FLAG(bool, hold_fallback, true,
          "ReconnectingStreamOptions::migration_hold_fallback");
ABSL_FLAG(int, timeout_s, 60, "give up waiting after this long (per phase)");
ABSL_FLAG(int, standby_connections, 0,
          "ConnectionPoolOptions::standby_connections");
ABSL_FLAG(int, max_streams_per_connection, 0,
          "ConnectionPoolOptions::max_streams_per_connection (0: no cap)");
ABSL_FLAG(int, max_connections, 8, "ConnectionPoolOptions::max_connections");
ABSL_FLAG(bool, raw, true,
          "first open as many raw gRPC calls on a fresh channel to the same "
          "replica, through the same proxy (the anchor raw_open_*), and "
          "close them before tether's streams open");
ABSL_FLAG(bool, absl_deadlock_detection, false,
          "keep absl::Mutex deadlock detection on (Debian's abseil is built "
          "without NDEBUG, so it is on by default there; the example "
          "replica and proxy use absl::Mutex)");

namespace ex = ::tether::examples;
namespace lv1 = ::tether::examples::ledger::v1;
using Stream =
    tether::ReconnectingStream<lv1::WatchAccountRequest, lv1::AccountEvent>;

namespace {

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Per-stream state, written by that stream's message callback (one at a
// time per stream) and read by the main thread.
struct Slot {
  std::atomic<std::uint64_t> last_seq{0};
  std::atomic<std::int64_t> events{0};
  std::atomic<std::int64_t> first_ns{-1};    // first event at all
  std::atomic<std::int64_t> first_b_ns{-1};  // first event from replica "b"
  std::atomic<std::int64_t> bad{0};          // gap, duplicate or bad balance
  std::atomic<std::int64_t> last_ns{-1};     // last delivery
  std::atomic<std::int64_t> max_gap_ns{0};   // longest time between two
};

// Records when every attempt of every stream started (lock-free append).
class AttemptLog final : public tether::StreamObserver {
 public:
  explicit AttemptLog(std::size_t capacity) : ts_(capacity), first_(capacity) {}
  void OnAttemptStarted(const tether::AttemptInfo& info) override {
    std::size_t i = n_.fetch_add(1, std::memory_order_relaxed);
    if (i < ts_.size()) ts_[i].store(NowNs(), std::memory_order_relaxed);
    if (info.reason == tether::AttemptReason::kMigration) {
      migrations_.fetch_add(1, std::memory_order_relaxed);
    } else if (info.reason == tether::AttemptReason::kReopen) {
      reopens_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // First message (duplicate or not) of an attempt that is not a stream's
  // first: the moment a moved stream is live on its new connection.
  void OnFirstMessage(const tether::AttemptInfo& info,
                      absl::Duration) override {
    if (info.reason == tether::AttemptReason::kFirst) return;
    std::size_t i = nf_.fetch_add(1, std::memory_order_relaxed);
    if (i < first_.size()) first_[i].store(NowNs(), std::memory_order_relaxed);
  }
  void OnAttemptEnded(const tether::AttemptInfo&, const absl::Status& s,
                      tether::EndClass, bool by_client) override {
    if (!by_client && !s.ok()) {
      error_ends_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  void OnGaveUp(const absl::Status&) override {
    gave_up_.fetch_add(1, std::memory_order_relaxed);
  }

  // Start times (ns) of attempts started at or after `since_ns`.
  std::vector<std::int64_t> StartsSince(std::int64_t since_ns) const {
    std::size_t n = std::min(n_.load(), ts_.size());
    std::vector<std::int64_t> out;
    for (std::size_t i = 0; i < n; ++i) {
      std::int64_t t = ts_[i].load(std::memory_order_relaxed);
      if (t >= since_ns) out.push_back(t);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  // Times (ns) of OnFirstMessage of later attempts.
  std::vector<std::int64_t> FirstMessages() const {
    std::size_t n = std::min(nf_.load(), first_.size());
    std::vector<std::int64_t> out;
    for (std::size_t i = 0; i < n; ++i) out.push_back(first_[i].load());
    std::sort(out.begin(), out.end());
    return out;
  }
  std::int64_t migrations() const { return migrations_.load(); }
  std::int64_t reopens() const { return reopens_.load(); }
  std::int64_t error_ends() const { return error_ends_.load(); }
  std::int64_t gave_up() const { return gave_up_.load(); }
  std::size_t total() const { return n_.load(); }

 private:
  std::vector<std::atomic<std::int64_t>> ts_;
  std::atomic<std::size_t> n_{0};
  std::vector<std::atomic<std::int64_t>> first_;
  std::atomic<std::size_t> nf_{0};
  std::atomic<std::int64_t> migrations_{0}, reopens_{0}, error_ends_{0},
      gave_up_{0};
};

// Remembers when the pool first saw a connection draining.
class PoolLog final : public tether::ConnectionObserver {
 public:
  void OnConnectionDraining(std::uint64_t, absl::string_view) override {
    std::int64_t expected = -1;
    first_drain_ns_.compare_exchange_strong(expected, NowNs());
  }
  std::int64_t first_drain_ns() const { return first_drain_ns_.load(); }

 private:
  std::atomic<std::int64_t> first_drain_ns_{-1};
};

bool WaitUntil(const std::function<bool()>& pred, absl::Duration timeout) {
  absl::Time end = absl::Now() + timeout;
  while (!pred()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

double Pct(const std::vector<double>& v, double p) {
  return tether::support::Percentile(v, p);
}

void RaiseFdLimit() {
  rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
  if (getrlimit(RLIMIT_NOFILE, &r) == 0) {
    std::printf("RLIMIT_NOFILE soft %llu\n",
                static_cast<unsigned long long>(r.rlim_cur));
  }
}

// What one rollout measured (see the file comment).
struct Rollout {
  bool ok = false;           // every stream delivered, then moved to "b"
  double raw_ms = -1;        // raw calls: first -> the last one's first event
  double cold_ms = -1;       // first Start -> the last stream's first event
  double migration_ms = -1;  // Shutdown -> the last stream's first "b" event
  double p50_ms = 0;         // per stream, Shutdown -> first "b" event
  double p99_ms = 0;
  int peak = 0;                 // attempts started in the busiest 10 ms
  double last_start_ms = -1;    // Shutdown -> the last attempt started
  std::int64_t violations = 0;  // seq gaps, duplicates, wrong balances
  std::int64_t error_ends = 0;  // attempts ended by an error, not by us
  std::int64_t gave_up = 0;
  int ended = 0;  // streams that ended
  std::int64_t moved = 0;
};

// The anchor: `n` raw gRPC callback calls on a fresh channel to `target`,
// started together; returns the time from the first call to the last one's
// first event (-1 on a timeout). The calls are cancelled and every one has
// ended (and `replica` holds none) before it returns, and the freed heap is
// given back to the system, so that the tether streams opened next pay for
// their memory as these did.
double RawOpenMs(const std::string& target, int n, ex::LedgerReplica& replica,
                 absl::Duration timeout) {
  grpc::ChannelArguments args;
  // A connection of its own, not one shared with the pool's.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(
      target, grpc::InsecureChannelCredentials(), args);
  auto stub = lv1::Ledger::NewStub(channel);
  std::vector<std::atomic<std::int64_t>> counts(static_cast<std::size_t>(n));
  std::vector<std::unique_ptr<tether::bench::RawReader>> readers;
  readers.reserve(static_cast<std::size_t>(n));
  const std::int64_t t0 = NowNs();
  for (int i = 0; i < n; ++i) {
    readers.push_back(std::make_unique<tether::bench::RawReader>(
        stub.get(), "acct-" + std::to_string(i),
        &counts[static_cast<std::size_t>(i)]));
  }
  const std::int64_t t_started = NowNs();
  const bool live = WaitUntil(
      [&] {
        for (const auto& c : counts) {
          if (c.load(std::memory_order_relaxed) < 1) return false;
        }
        return true;
      },
      timeout);
  const std::int64_t t_live = NowNs();
  for (auto& r : readers) r->Cancel();
  const bool ended = WaitUntil(
      [&] {
        for (const auto& r : readers) {
          if (!r->done()) return false;
        }
        return replica.open_streams() == 0;
      },
      timeout);
  if (!ended) {
    // A reactor still running must outlive this frame: stop here.
    std::fprintf(stderr, "raw calls did not end within the timeout\n");
    std::exit(1);
  }
  readers.clear();
  stub.reset();
  channel.reset();
  malloc_trim(0);
  const double ms = live ? (t_live - t0) / 1e6 : -1;
  std::printf(
      "raw gRPC: %d calls on a fresh channel started in %.0f ms, first call "
      "-> every call delivering %.0f ms%s\n",
      n, (t_started - t0) / 1e6, ms, live ? "" : " (TIMED OUT)");
  return ms;
}

// One cold open of --streams streams on "a", then one GOAWAY moving them to
// "b", with `migration_jitter` as the streams' spread window.
Rollout RunRollout(absl::Duration migration_jitter) {
  const int n = absl::GetFlag(FLAGS_streams);
  const absl::Duration timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  tether::support::FaultProxy proxy;
  Rollout r;
  if (!proxy.Start().ok()) return r;
  auto make = [&](const char* name) {
    ex::LedgerReplicaOptions o;
    o.name = name;
    o.tick = absl::Milliseconds(absl::GetFlag(FLAGS_tick_ms));
    o.pre_drain = absl::ZeroDuration();  // the GOAWAY is the only signal
    o.drain = absl::Milliseconds(absl::GetFlag(FLAGS_drain_ms));
    auto r = std::make_unique<ex::LedgerReplica>(o);
    if (!r->Start().ok()) {
      std::fprintf(stderr, "cannot start replica %s\n", name);
      std::exit(1);
    }
    return r;
  };
  auto a = make("a");
  if (!proxy.AddBackend(a->address()).ok()) return r;
  if (absl::GetFlag(FLAGS_raw)) {
    r.raw_ms = RawOpenMs(proxy.address(), n, *a, timeout);
    if (r.raw_ms < 0) return r;
  }

  auto pool_log = std::make_shared<PoolLog>();
  tether::ConnectionPoolOptions po;
  po.target = proxy.address();
  po.observer = pool_log;
  po.standby_connections = absl::GetFlag(FLAGS_standby_connections);
  po.max_streams_per_connection =
      absl::GetFlag(FLAGS_max_streams_per_connection);
  po.max_connections = absl::GetFlag(FLAGS_max_connections);
  auto pool_or = tether::ConnectionPool::Create(po);
  if (!pool_or.ok()) {
    std::fprintf(stderr, "%s\n", pool_or.status().ToString().c_str());
    return r;
  }
  std::shared_ptr<tether::ConnectionPool> pool = *pool_or;

  auto log =
      std::make_shared<AttemptLog>(static_cast<std::size_t>(n) * 4 + 1024);
  tether::ReconnectingStreamOptions so;
  so.observer = log;
  so.migrate_on_drain = absl::GetFlag(FLAGS_migrate_on_drain);
  so.reopen_after_progress_jitter =
      absl::Milliseconds(absl::GetFlag(FLAGS_reopen_jitter_ms));
  so.migration_jitter = migration_jitter;
  so.migration_hold_fallback = absl::GetFlag(FLAGS_hold_fallback);

  std::vector<Slot> slots(static_cast<std::size_t>(n));
  std::vector<std::unique_ptr<Stream>> streams;
  streams.reserve(static_cast<std::size_t>(n));
  std::atomic<int> ended{0};
  const std::int64_t t_open = NowNs();
  for (int i = 0; i < n; ++i) {
    tether::StreamSpec<lv1::WatchAccountRequest, lv1::AccountEvent> spec;
    spec.start = [](const std::shared_ptr<grpc::Channel>& ch,
                    grpc::ClientContext* ctx,
                    const lv1::WatchAccountRequest* req,
                    grpc::ClientReadReactor<lv1::AccountEvent>* r) {
      lv1::Ledger::NewStub(ch)->async()->WatchAccount(ctx, req, r);
    };
    spec.request.set_account("acct-" + std::to_string(i));
    spec.sequence_of = [](const lv1::AccountEvent& e) {
      return absl::optional<std::uint64_t>(e.seq());
    };
    spec.resume_after = [](lv1::WatchAccountRequest& r, std::uint64_t s) {
      r.set_after_seq(s);
    };
    Slot* slot = &slots[static_cast<std::size_t>(i)];
    auto s = Stream::Start(
        pool, std::move(spec), so,
        [slot](lv1::AccountEvent&& e) {
          std::uint64_t last = slot->last_seq.load(std::memory_order_relaxed);
          if (e.seq() != last + 1 ||
              e.balance() != static_cast<std::int64_t>(10 * e.seq())) {
            slot->bad.fetch_add(1, std::memory_order_relaxed);
          }
          slot->last_seq.store(e.seq(), std::memory_order_relaxed);
          slot->events.fetch_add(1, std::memory_order_relaxed);
          std::int64_t now = NowNs();
          if (slot->first_ns.load(std::memory_order_relaxed) < 0) {
            slot->first_ns.store(now, std::memory_order_relaxed);
          }
          std::int64_t prev = slot->last_ns.exchange(now);
          if (prev >= 0 && now - prev > slot->max_gap_ns.load()) {
            slot->max_gap_ns.store(now - prev);
          }
          if (e.replica() == "b" &&
              slot->first_b_ns.load(std::memory_order_relaxed) < 0) {
            slot->first_b_ns.store(NowNs(), std::memory_order_relaxed);
          }
        },
        [&ended](const absl::Status&) { ended.fetch_add(1); });
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
      return r;
    }
    streams.push_back(*std::move(s));
  }
  const std::int64_t t_opened = NowNs();
  bool all_live = WaitUntil(
      [&] {
        for (const Slot& s : slots) {
          if (s.events.load(std::memory_order_relaxed) < 1) return false;
        }
        return true;
      },
      timeout);
  const std::int64_t t_live = NowNs();
  tether::ConnectionPoolStats before = pool->Stats();
  std::printf(
      "%d streams opened in %.0f ms, all delivering after %.0f ms%s; pool: "
      "%zu connection(s) open, %zu picks\n",
      n, (t_opened - t_open) / 1e6, (t_live - t_open) / 1e6,
      all_live ? "" : " (TIMED OUT)", before.open, before.picks);
  if (!all_live) return r;

  // One GOAWAY for all: b takes new connections, a shuts down.
  auto b = make("b");
  if (!proxy.AddBackend(b->address()).ok()) return r;
  proxy.RemoveBackend(a->address());
  const std::size_t attempts_before = log->total();
  const std::int64_t t_goaway = NowNs();
  std::thread stopper([&] { a->Stop(ex::ShutdownMode::kGraceful); });
  std::int64_t t_b_has_all = -1;  // b holds a watch for every stream
  bool all_moved = WaitUntil(
      [&] {
        if (t_b_has_all < 0 && b->open_streams() >= n) t_b_has_all = NowNs();
        for (const Slot& s : slots) {
          if (s.first_b_ns.load(std::memory_order_relaxed) < 0) return false;
        }
        return true;
      },
      timeout + absl::Milliseconds(absl::GetFlag(FLAGS_drain_ms)));
  const std::int64_t t_moved = NowNs();
  stopper.join();
  const std::int64_t t_a_gone = NowNs();

  // Figures.
  std::vector<double> move_ms;
  std::int64_t bad = 0, moved = 0;
  for (const Slot& s : slots) {
    bad += s.bad.load();
    std::int64_t t = s.first_b_ns.load();
    if (t >= 0) {
      ++moved;
      move_ms.push_back((t - t_goaway) / 1e6);
    }
  }
  std::sort(move_ms.begin(), move_ms.end());
  std::vector<double> live_ms;  // GOAWAY -> first message of new attempt
  for (std::int64_t t : log->FirstMessages()) {
    if (t >= t_goaway) live_ms.push_back((t - t_goaway) / 1e6);
  }
  std::vector<double> gap_ms;
  for (const Slot& s : slots) gap_ms.push_back(s.max_gap_ns.load() / 1e6);
  std::sort(gap_ms.begin(), gap_ms.end());
  std::vector<std::int64_t> starts = log->StartsSince(t_goaway);
  std::map<std::int64_t, int> buckets;  // 10 ms bucket -> attempts
  for (std::int64_t t : starts) ++buckets[(t - t_goaway) / 10'000'000];
  int peak = 0;
  std::int64_t peak_at = 0;
  for (const auto& kv : buckets) {
    if (kv.second > peak) {
      peak = kv.second;
      peak_at = kv.first;
    }
  }
  // The busiest buckets, to tell a burst (a backlog of timers fired at
  // once) from a ramp.
  std::vector<std::pair<int, std::int64_t>> busiest;
  for (const auto& kv : buckets) busiest.push_back({kv.second, kv.first});
  std::sort(busiest.rbegin(), busiest.rend());
  busiest.resize(std::min<std::size_t>(busiest.size(), 5));
  std::string busiest_text;
  for (const auto& b : busiest) {
    busiest_text += " +" + std::to_string(b.second * 10) +
                    " ms: " + std::to_string(b.first) + ";";
  }
  double spread_ms =
      starts.empty() ? 0 : (starts.back() - starts.front()) / 1e6;
  double first_ms = starts.empty() ? -1 : (starts.front() - t_goaway) / 1e6;
  tether::ConnectionPoolStats after = pool->Stats();
  const double last_start_ms =
      starts.empty() ? -1 : (starts.back() - t_goaway) / 1e6;
  std::int64_t drain_seen = pool_log->first_drain_ns();

  std::printf(
      "settings: tick %d ms, drain deadline %d ms, migrate_on_drain %s, "
      "reopen_after_progress_jitter %d ms, migration_jitter %.0f ms, backoff "
      "default (100 ms x2, full jitter), pool max_connections %d\n",
      absl::GetFlag(FLAGS_tick_ms), absl::GetFlag(FLAGS_drain_ms),
      so.migrate_on_drain ? "true" : "false",
      absl::GetFlag(FLAGS_reopen_jitter_ms),
      absl::ToDoubleMilliseconds(migration_jitter), po.max_connections);
  std::printf(
      "pool saw the drain %.1f ms after Shutdown; the new replica held a "
      "watch for every stream %.0f ms after Shutdown (polled every 20 ms)\n",
      drain_seen < 0 ? -1.0 : (drain_seen - t_goaway) / 1e6,
      t_b_has_all < 0 ? -1.0 : (t_b_has_all - t_goaway) / 1e6);
  std::printf(
      "scale: %zu new attempts got their first message (duplicate or not), "
      "the last %.0f ms after Shutdown (p50 %.0f ms, p99 %.0f ms)\n",
      live_ms.size(), live_ms.empty() ? -1.0 : live_ms.back(),
      Pct(live_ms, 0.5), Pct(live_ms, 0.99));
  std::printf(
      "scale: %lld of %d streams delivered a new event from the new replica; "
      "all within %.0f ms of Shutdown%s (per stream p50 %.0f ms, p99 %.0f "
      "ms)\n",
      static_cast<long long>(moved), n, all_moved ? move_ms.back() : -1.0,
      all_moved ? "" : " (TIMED OUT)", Pct(move_ms, 0.5), Pct(move_ms, 0.99));
  std::printf(
      "longest time between two delivered events of one stream, whole run: "
      "max %.0f ms, p99 %.0f ms, p50 %.0f ms (tick %d ms)\n",
      gap_ms.empty() ? -1.0 : gap_ms.back(), Pct(gap_ms, 0.99),
      Pct(gap_ms, 0.5), absl::GetFlag(FLAGS_tick_ms));
  std::printf(
      "attempts after GOAWAY: %zu (migrations %lld, reopens %lld), first at "
      "+%.1f ms, spread over %.1f ms in %zu busy 10 ms buckets; peak %d "
      "attempts per 10 ms (bucket +%lld0 ms) = %.0f/s\n",
      starts.size(), static_cast<long long>(log->migrations()),
      static_cast<long long>(log->reopens()), first_ms, spread_ms,
      buckets.size(), peak, static_cast<long long>(peak_at), peak * 100.0);
  std::printf("busiest 10 ms buckets:%s\n", busiest_text.c_str());
  std::printf(
      "checks: attempts before GOAWAY %zu, attempt error ends %lld, gave up "
      "%lld, streams ended %d, seq/balance violations %lld\n",
      attempts_before, static_cast<long long>(log->error_ends()),
      static_cast<long long>(log->gave_up()), ended.load(),
      static_cast<long long>(bad));
  std::printf(
      "pool: %llu connection(s) ever opened, %zu open now (%zu ready, %zu "
      "draining); old replica fully stopped %.0f ms after Shutdown "
      "(all moved at %.0f ms)\n",
      static_cast<unsigned long long>(after.total_opened), after.open,
      after.ready, after.draining, (t_a_gone - t_goaway) / 1e6,
      (t_moved - t_goaway) / 1e6);

  // Let the cancelled calls finish before dropping the pool: the last
  // reference to a channel must not go away on a gRPC callback thread
  // (gRPC 1.51 then tears down its callback queue from that thread; see
  // grpc/grpc#32584).
  streams.clear();
  WaitUntil([&] { return b->open_streams() == 0; }, absl::Seconds(10));
  pool.reset();
  b->Stop(ex::ShutdownMode::kAbrupt);
  std::int64_t last_first_ns = -1;
  for (const Slot& s : slots) {
    last_first_ns = std::max(last_first_ns, s.first_ns.load());
  }
  const double cold_ms = (last_first_ns - t_open) / 1e6;
  const double migration_ms = all_moved ? move_ms.back() : -1.0;
  std::printf(
      "cold open -> all delivering %.0f ms; GOAWAY -> all delivering from "
      "the new replica %.0f ms; ratio %.2f\n",
      cold_ms, migration_ms, migration_ms / cold_ms);
  if (r.raw_ms > 0) {
    std::printf(
        "over raw gRPC's open of as many calls (%.0f ms): cold open %.2f, "
        "move %.2f\n",
        r.raw_ms, cold_ms / r.raw_ms, migration_ms / r.raw_ms);
  }
  r.ok = all_moved && bad == 0 && log->gave_up() == 0;
  r.cold_ms = cold_ms;
  r.migration_ms = migration_ms;
  r.p50_ms = Pct(move_ms, 0.5);
  r.p99_ms = Pct(move_ms, 0.99);
  r.peak = peak;
  r.last_start_ms = last_start_ms;
  r.violations = bad;
  r.error_ends = log->error_ends();
  r.gave_up = log->gave_up();
  r.ended = ended.load();
  r.moved = moved;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::int64_t t_start = NowNs();
  if (!absl::GetFlag(FLAGS_absl_deadlock_detection)) {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
  RaiseFdLimit();
  const int spread_ms = absl::GetFlag(FLAGS_spread_ms);
  if (spread_ms > 0) std::printf("== rollout 1: without spread ==\n");
  const Rollout base =
      RunRollout(absl::Milliseconds(absl::GetFlag(FLAGS_migration_jitter_ms)));
  Rollout spread;
  if (spread_ms > 0) {
    std::printf("== rollout 2: migration_jitter %d ms ==\n", spread_ms);
    spread = RunRollout(absl::Milliseconds(spread_ms));
    const int drain_ms = absl::GetFlag(FLAGS_drain_ms);
    std::printf(
        "spread: peak attempts per 10 ms %d without, %d with (ratio %.3f); "
        "with: error ends %lld, violations %lld, gave up %lld, streams "
        "ended %d, moved %lld of %d; last move started %.0f ms and the last "
        "stream delivered from the new replica %.0f ms after Shutdown "
        "(drain deadline %d ms)\n",
        base.peak, spread.peak,
        base.peak > 0 ? static_cast<double>(spread.peak) / base.peak : -1.0,
        static_cast<long long>(spread.error_ends),
        static_cast<long long>(spread.violations),
        static_cast<long long>(spread.gave_up), spread.ended,
        static_cast<long long>(spread.moved), absl::GetFlag(FLAGS_streams),
        spread.last_start_ms, spread.migration_ms, drain_ms);
  }
  std::printf("total runtime %.1f s\n", (NowNs() - t_start) / 1e9);
  tether::support::JsonLine json;
  json.Set("streams", absl::GetFlag(FLAGS_streams));
  json.Set("cold_open_all_delivering_ms", base.cold_ms);
  json.Set("migration_all_delivering_ms", base.migration_ms);
  json.Set("migration_vs_cold", base.migration_ms / base.cold_ms);
  if (base.raw_ms > 0) {
    json.Set("raw_open_all_delivering_ms", base.raw_ms);
    json.Set("cold_open_vs_raw", base.cold_ms / base.raw_ms);
    json.Set("migration_vs_raw_open", base.migration_ms / base.raw_ms);
  }
  json.Set("migration_p50_ms", base.p50_ms);
  json.Set("migration_p99_ms", base.p99_ms);
  json.Set("standby_connections", absl::GetFlag(FLAGS_standby_connections));
  json.Set("max_streams_per_connection",
           absl::GetFlag(FLAGS_max_streams_per_connection));
  json.Set("violations", base.violations);
  json.Set("gave_up", base.gave_up);
  json.Set("peak_attempts_per_10ms", base.peak);
  bool ok = base.ok;
  if (spread_ms > 0) {
    const int drain_ms = absl::GetFlag(FLAGS_drain_ms);
    json.Set("spread_ms", spread_ms);
    json.Set("drain_ms", drain_ms);
    json.Set("spread_peak_attempts_per_10ms", spread.peak);
    json.Set(
        "spread_peak_ratio",
        base.peak > 0 ? static_cast<double>(spread.peak) / base.peak : -1.0);
    json.Set("spread_error_ends", spread.error_ends);
    json.Set("spread_violations", spread.violations);
    json.Set("spread_gave_up", spread.gave_up);
    json.Set("spread_last_start_ms", spread.last_start_ms);
    json.Set("spread_all_delivering_ms", spread.migration_ms);
    const bool in_time = spread.ok && spread.migration_ms < drain_ms;
    json.Set("spread_moved_before_deadline", in_time);
    ok = ok && in_time && spread.error_ends == 0 && spread.ended == 0;
  }
  json.Print();
  return ok ? 0 : 1;
}
