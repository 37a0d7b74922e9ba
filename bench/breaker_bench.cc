// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// breaker_bench: what the circuit breaker does for many streams on a real
// two-replica service (gRPC servers on 127.0.0.1, each behind a FaultProxy that
// plays its Kubernetes Service, an address-list ConnectionPool over the two
// proxies, one shared CircuitBreaker). Prints:
//
//  1. breaker transitions during 20 rollouts with all streams open (each
//     rollout replaces both replicas, one after the other, new pod first,
//     old pod drained with a GOAWAY); the floor is zero;
//  2. time from "all replicas down" to every stream ended, against the
//     configured give-up bound (max_time_without_progress);
//  3. with the replicas still down and 1,000 new streams waiting: TCP
//     connection attempts per second (accepts at the proxies) and stream
//     attempts per second while the breaker is open, next to the same
//     streams without a breaker;
//  4. the time from "replicas back" to the breaker closed and every new
//     stream delivering.
//
//   breaker_bench [--streams=N] [--rollouts=N]
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "support/figures.h"
#include "grpcpp/grpcpp.h"
#include "seqstream.grpc.pb.h"
#include "support/fault_proxy.h"
#include "test/support/test_server.h"
#include "tether/circuit_breaker.h"
#include "tether/connection_pool.h"
#include "tether/reconnecting_stream.h"

ABSL_FLAG(int, streams, 1000, "streams");
ABSL_FLAG(int, rollouts, 20, "rollouts of both replicas");

namespace {

using tether::BreakerState;
using tether::support::FaultProxy;
using tether::testsupport::TestServer;
using tether::testsupport::TestServerOptions;
using Event = tether::test::Event;
using WatchRequest = tether::test::WatchRequest;
using Stream = tether::ReconnectingStream<WatchRequest, Event>;

constexpr absl::Duration kWait = absl::Seconds(60);

void Die(const std::string& what) {
  std::fprintf(stderr, "breaker_bench: %s\n", what.c_str());
  std::exit(1);
}

// Waits, on a condition variable notified by every event source below,
// until a predicate holds.
class Waiter {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  bool WaitFor(const std::function<bool()>& pred, absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    // Re-checks at least every 50 ms: some predicates read counters that
    // change without an event (the proxies' accept counts).
    const absl::Time deadline = absl::Now() + timeout;
    while (!pred()) {
      absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return false;
      cv_.wait_for(lock, absl::ToChronoNanoseconds(
                             std::min(left, absl::Milliseconds(50))));
    }
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

Waiter& waiter() {
  static Waiter* w = new Waiter;
  return *w;
}

class PoolCounter : public tether::ConnectionObserver {
 public:
  void OnConnectionOpened(std::uint64_t, absl::string_view) override {
    ++opened;
    waiter().Notify();
  }
  void OnConnectionReady(std::uint64_t) override { waiter().Notify(); }
  void OnConnectionDraining(std::uint64_t, absl::string_view) override {
    waiter().Notify();
  }
  void OnConnectionRetired(std::uint64_t) override { waiter().Notify(); }
  std::atomic<std::uint64_t> opened{0};
};

class AttemptCounter : public tether::StreamObserver {
 public:
  void OnAttemptStarted(const tether::AttemptInfo&) override { ++started; }
  std::atomic<std::uint64_t> started{0};
};

// One stream's counters.
struct Slot {
  std::atomic<std::uint64_t> messages{0};
  std::atomic<bool> done{false};
  std::atomic<std::int64_t> done_at_ns{0};  // absl::Now() at the end
  std::mutex mu;
  absl::Status status;
};

tether::StreamSpec<WatchRequest, Event> Spec(const std::string& key) {
  tether::StreamSpec<WatchRequest, Event> spec;
  spec.start = [](const std::shared_ptr<grpc::Channel>& channel,
                  grpc::ClientContext* context, const WatchRequest* request,
                  grpc::ClientReadReactor<Event>* reactor) {
    tether::test::SeqStream::NewStub(channel)->async()->Watch(context, request,
                                                              reactor);
  };
  spec.request.set_key(key);
  spec.sequence_of = [](const Event& e) -> absl::optional<std::uint64_t> {
    if (e.seq() == 0) return absl::nullopt;
    return e.seq();
  };
  spec.resume_after = [](WatchRequest& r, std::uint64_t seq) {
    r.set_after_seq(seq);
  };
  return spec;
}

// A group of streams started together.
struct Fleet {
  std::vector<std::unique_ptr<Slot>> slots;
  std::vector<std::unique_ptr<Stream>> streams;

  void Start(int n, const std::shared_ptr<tether::ConnectionPool>& pool,
             const tether::ReconnectingStreamOptions& options,
             const std::string& prefix) {
    for (int i = 0; i < n; ++i) {
      auto slot = std::make_unique<Slot>();
      Slot* s = slot.get();
      auto stream = Stream::Start(
          pool, Spec(absl::StrCat(prefix, i)), options,
          [s](Event&&) { ++s->messages; },
          [s](const absl::Status& st) {
            {
              std::lock_guard<std::mutex> lock(s->mu);
              s->status = st;
            }
            s->done_at_ns = absl::ToUnixNanos(absl::Now());
            s->done = true;
            waiter().Notify();
          });
      if (!stream.ok()) Die(stream.status().ToString());
      slots.push_back(std::move(slot));
      streams.push_back(*std::move(stream));
    }
  }
  std::vector<std::uint64_t> Snapshot() const {
    std::vector<std::uint64_t> v;
    for (const auto& s : slots) v.push_back(s->messages.load());
    return v;
  }
  // Every stream delivered `n` more than in `base`.
  bool AllProgressed(const std::vector<std::uint64_t>& base,
                     std::uint64_t n) const {
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (slots[i]->done || slots[i]->messages < base[i] + n) return false;
    }
    return true;
  }
  std::size_t Ended() const {
    std::size_t n = 0;
    for (const auto& s : slots) n += s->done ? 1 : 0;
    return n;
  }
};

// One replica: a proxy (its Service address) and two pods that take turns.
struct Replica {
  FaultProxy proxy;
  std::unique_ptr<TestServer> pods[2];
  int current = 0;
};

bool WaitForReady(const std::shared_ptr<tether::ConnectionPool>& pool,
                  std::size_t n) {
  return waiter().WaitFor([&] { return pool->Stats().ready >= n; }, kWait);
}

int TotalAccepted(Replica* replicas) {
  return replicas[0].proxy.total_accepted() +
         replicas[1].proxy.total_accepted();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int kStreams = absl::GetFlag(FLAGS_streams);
  const int kRollouts = absl::GetFlag(FLAGS_rollouts);
  if (kStreams < 1 || kRollouts < 1) Die("--streams and --rollouts must be >= 1");
  tether::support::JsonLine json;
  json.Set("streams", kStreams);
  json.Set("rollouts", kRollouts);
  const absl::Duration kGiveUp = absl::Seconds(3);
  const absl::Duration kMeasure = absl::Seconds(5);

  // Two replicas; pods tick slowly so 1,000 streams stay cheap (2 msg/s each).
  Replica replicas[2];
  for (int r = 0; r < 2; ++r) {
    for (int p = 0; p < 2; ++p) {
      TestServerOptions o;
      o.name = absl::StrCat("r", r, "-pod", p);
      o.tick = absl::Milliseconds(500);
      replicas[r].pods[p] = std::make_unique<TestServer>(o);
    }
    if (!replicas[r].pods[0]->Start().ok()) Die("cannot start a server");
    if (!replicas[r].proxy.Start().ok()) Die("cannot start a proxy");
    if (!replicas[r].proxy.SetBackend(replicas[r].pods[0]->address()).ok()) {
      Die("bad backend");
    }
  }

  auto pool_events = std::make_shared<PoolCounter>();
  tether::ConnectionPoolOptions po;
  po.addresses = {replicas[0].proxy.address(), replicas[1].proxy.address()};
  po.observer = pool_events;
  auto pool_or = tether::ConnectionPool::Create(std::move(po));
  if (!pool_or.ok()) Die(pool_or.status().ToString());
  std::shared_ptr<tether::ConnectionPool> pool = *std::move(pool_or);

  tether::CircuitBreakerOptions bo;
  bo.name = "seqstream";
  bo.window_size = 20;
  bo.minimum_calls = 10;
  bo.failure_rate_threshold = 50;
  bo.break_duration = absl::Milliseconds(500);
  bo.max_break_duration = absl::Seconds(2);
  bo.half_open_permits = 3;
  auto breaker = tether::CircuitBreaker::Create(bo).value();
  std::atomic<int> opens{0};
  std::atomic<std::int64_t> closed_at_ns{0};
  breaker->AddListener([&](BreakerState, BreakerState to) {
    if (to == BreakerState::kClosed) {
      closed_at_ns = absl::ToUnixNanos(absl::Now());
    }
    if (to == BreakerState::kOpen) ++opens;
    waiter().Notify();
  });

  auto attempts = std::make_shared<AttemptCounter>();
  auto make_options = [&](absl::Duration give_up, bool with_breaker) {
    tether::ReconnectingStreamOptions o;
    o.max_attempts_without_progress = 100000;  // the time bound decides
    o.max_time_without_progress = give_up;
    o.observer = attempts;
    if (with_breaker) o.breaker = breaker;
    return o;
  };

  std::printf(
      "breaker_bench: %d streams, 2 replicas behind TCP proxies, "
      "breaker: window %d, min %d calls, %.0f%%, break %s..%s, "
      "%d probes\n",
      kStreams, bo.window_size, bo.minimum_calls, bo.failure_rate_threshold,
      absl::FormatDuration(bo.break_duration).c_str(),
      absl::FormatDuration(bo.max_break_duration).c_str(),
      bo.half_open_permits);
  if (!WaitForReady(pool, 2)) Die("pool never became ready");

  // --- 1. Rollouts ---------------------------------------------------------
  Fleet fleet;
  fleet.Start(kStreams, pool, make_options(absl::Minutes(2), true), "k");
  if (!waiter().WaitFor(
          [&] {
            return fleet.AllProgressed(
                std::vector<std::uint64_t>(fleet.slots.size(), 0), 1);
          },
          kWait)) {
    Die("streams never delivered");
  }
  const tether::BreakerCounts before = breaker->counts();
  const absl::Time rollouts_start = absl::Now();
  for (int round = 0; round < kRollouts; ++round) {
    for (Replica& r : replicas) {
      const int next = 1 - r.current;
      if (!r.pods[next]->Start().ok()) Die("cannot restart a pod");
      if (!r.proxy.SetBackend(r.pods[next]->address()).ok()) Die("backend");
      r.pods[r.current]->Shutdown(absl::Milliseconds(300));  // GOAWAY
      r.current = next;
      if (!WaitForReady(pool, 2)) Die("pool never reconnected");
    }
    // Between rollouts: every stream has delivered again.
    std::vector<std::uint64_t> base = fleet.Snapshot();
    if (!waiter().WaitFor([&] { return fleet.AllProgressed(base, 1); },
                          kWait)) {
      Die(absl::StrCat("streams stalled after rollout ", round + 1, "; ",
                       fleet.Ended(), " ended"));
    }
  }
  const tether::BreakerCounts after = breaker->counts();
  std::printf(
      "rollouts: %d (each replica replaced %d times) in %.1f s, %zu/%d "
      "streams alive\n"
      "  breaker transitions during rollouts: %llu (floor 0), state %s, "
      "failures %llu, successes %llu, ignored %llu, not permitted %llu\n",
      kRollouts, kRollouts, absl::ToDoubleSeconds(absl::Now() - rollouts_start),
      fleet.slots.size() - fleet.Ended(), kStreams,
      static_cast<unsigned long long>(after.transitions - before.transitions),
      std::string(tether::BreakerStateName(after.state)).c_str(),
      static_cast<unsigned long long>(after.failed - before.failed),
      static_cast<unsigned long long>(after.successful - before.successful),
      static_cast<unsigned long long>(after.ignored - before.ignored),
      static_cast<unsigned long long>(after.not_permitted -
                                      before.not_permitted));
  json.Set("transitions_during_rollouts",
           static_cast<std::uint64_t>(after.transitions - before.transitions));
  json.Set("failures_during_rollouts",
           static_cast<std::uint64_t>(after.failed - before.failed));
  fleet.streams.clear();
  fleet.slots.clear();

  // --- 2. All replicas down: time to every stream ended --------------------
  Fleet doomed;
  doomed.Start(kStreams, pool, make_options(kGiveUp, true), "d");
  if (!waiter().WaitFor(
          [&] {
            return doomed.AllProgressed(
                std::vector<std::uint64_t>(doomed.slots.size(), 0), 1);
          },
          kWait)) {
    Die("doomed streams never delivered");
  }
  const int opens_before = opens.load();
  const absl::Time down = absl::Now();
  for (Replica& r : replicas) r.pods[r.current]->Kill();
  if (!waiter().WaitFor([&] { return doomed.Ended() == doomed.slots.size(); },
                        kGiveUp + absl::Seconds(30))) {
    Die(absl::StrCat("only ", doomed.Ended(), " streams ended"));
  }
  absl::Duration slowest = absl::ZeroDuration();
  absl::Duration fastest = absl::InfiniteDuration();
  int unavailable = 0;
  int naming_breaker = 0;
  for (const auto& s : doomed.slots) {
    absl::Duration d = absl::FromUnixNanos(s->done_at_ns) - down;
    slowest = std::max(slowest, d);
    fastest = std::min(fastest, d);
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->status.code() == absl::StatusCode::kUnavailable) ++unavailable;
    if (absl::StrContains(s->status.message(), "circuit breaker")) {
      ++naming_breaker;
    }
  }
  std::printf(
      "all replicas down: every stream ended %.3f s after the kill "
      "(first %.3f s); bound %.1f s (+1 s allowed): %s\n"
      "  %d/%d ended UNAVAILABLE, %d naming the breaker; breaker opened %d "
      "time(s)\n",
      absl::ToDoubleSeconds(slowest), absl::ToDoubleSeconds(fastest),
      absl::ToDoubleSeconds(kGiveUp),
      slowest <= kGiveUp + absl::Seconds(1) ? "within" : "EXCEEDED",
      unavailable, kStreams, naming_breaker, opens.load() - opens_before);
  json.Set("all_down_every_stream_ended_s", absl::ToDoubleSeconds(slowest));
  json.Set("give_up_bound_s", absl::ToDoubleSeconds(kGiveUp));
  json.Set("ended_naming_breaker", naming_breaker);
  doomed.streams.clear();
  doomed.slots.clear();

  // --- 3. Attempts per second while open, with and without the breaker ----
  struct Rate {
    double accepts_per_s;
    double opens_per_s;
    double attempts_per_s;
    std::uint64_t not_permitted;
    BreakerState state;
  };
  auto run_window = [&](bool with_breaker) {
    Fleet waiting;
    waiting.Start(kStreams, pool, make_options(absl::Minutes(10), with_breaker),
                  with_breaker ? "w" : "n");
    // Let the start-up burst pass (the first attempts of 1,000 new streams).
    waiter().WaitFor([] { return false; }, absl::Seconds(1));
    const int acc0 = TotalAccepted(replicas);
    const std::uint64_t open0 = pool_events->opened;
    const std::uint64_t att0 = attempts->started;
    const std::uint64_t np0 = breaker->counts().not_permitted;
    const absl::Time t0 = absl::Now();
    waiter().WaitFor([] { return false; }, kMeasure);
    const double secs = absl::ToDoubleSeconds(absl::Now() - t0);
    Rate r;
    r.accepts_per_s = (TotalAccepted(replicas) - acc0) / secs;
    r.opens_per_s = static_cast<double>(pool_events->opened - open0) / secs;
    r.attempts_per_s = static_cast<double>(attempts->started - att0) / secs;
    r.not_permitted = breaker->counts().not_permitted - np0;
    r.state = breaker->state();
    const std::size_t ended = waiting.Ended();
    waiting.streams.clear();
    if (ended != 0) Die("streams ended during the measurement");
    return r;
  };
  Rate without = run_window(false);
  Rate with = run_window(true);
  std::printf(
      "replicas down, %d streams waiting, %.0f s window:\n"
      "  with breaker:    %.1f TCP connects/s at the proxies, %.1f pool "
      "connections opened/s, %.1f stream attempts/s, %llu refusals, breaker "
      "%s at the end\n"
      "  without breaker: %.1f TCP connects/s, %.1f pool connections "
      "opened/s, %.1f stream attempts/s\n",
      kStreams, absl::ToDoubleSeconds(kMeasure), with.accepts_per_s,
      with.opens_per_s, with.attempts_per_s,
      static_cast<unsigned long long>(with.not_permitted),
      std::string(tether::BreakerStateName(with.state)).c_str(),
      without.accepts_per_s, without.opens_per_s, without.attempts_per_s);

  // --- 4. Replicas back ----------------------------------------------------
  Fleet back;
  back.Start(kStreams, pool, make_options(absl::Minutes(2), true), "b");
  const absl::Time up = absl::Now();
  for (Replica& r : replicas) {
    if (!r.pods[r.current]->Start().ok()) Die("cannot restart");
  }
  if (!waiter().WaitFor(
          [&] {
            return back.AllProgressed(
                std::vector<std::uint64_t>(back.slots.size(), 0), 1);
          },
          kWait)) {
    Die(absl::StrCat("new streams never delivered; breaker ",
                     tether::BreakerStateName(breaker->state())));
  }
  const absl::Duration all_flowing = absl::Now() - up;
  std::printf(
      "replicas back: breaker closed %.3f s later, all %d new streams "
      "delivering %.3f s later\n",
      absl::ToDoubleSeconds(absl::FromUnixNanos(closed_at_ns) - up), kStreams,
      absl::ToDoubleSeconds(all_flowing));
  json.Set("down_connects_per_s_with_breaker", with.accepts_per_s);
  json.Set("down_attempts_per_s_with_breaker", with.attempts_per_s);
  json.Set("down_attempts_per_s_without_breaker", without.attempts_per_s);
  json.Set("back_all_delivering_s", absl::ToDoubleSeconds(all_flowing));
  back.streams.clear();
  json.Print();
  return 0;
}
