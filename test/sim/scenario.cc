// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "test/sim/scenario.h"

#include <time.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "connections/pool_core.h"
#include "tether/circuit_breaker.h"
#include "tether/connection_pool.h"
#include "tether/logging.h"
#include "tether/resync_pool.h"
#include "test/sim/log_check.h"
#include "test/sim/preempting_clock.h"
#include "test/sim/tee_observers.h"

namespace tether {
namespace sim {
namespace {

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

template <class T>
std::vector<T> Subset(Rng& rng, const std::vector<T>& all) {
  std::vector<T> out;
  for (const T& t : all) {
    if (rng.Chance(0.5)) out.push_back(t);
  }
  if (out.empty()) out.push_back(all[rng.Below(all.size())]);
  return out;
}

// The pool's observer: tells the source which connections drain, and
// traces what the pool decided.
class PoolWatch final : public ConnectionObserver {
 public:
  explicit PoolWatch(World& world) : world_(world) {}
  void set_source(SimSource* source) { source_ = source; }
  void OnConnectionDraining(std::uint64_t id, absl::string_view why) override {
    if (source_) source_->MarkDraining(id);
    world_.Note(absl::StrCat("pool: connection ", id, " draining: ", why));
  }
  void OnConnectionSuspect(std::uint64_t id,
                           const absl::Status& status) override {
    world_.Note(absl::StrCat("pool: connection ", id, " suspect: ",
                             status.ToString()));
  }
  void OnConnectionOpened(std::uint64_t id, absl::string_view to) override {
    world_.Note(absl::StrCat("pool: connection ", id, " opened to ", to));
  }

 private:
  World& world_;
  SimSource* source_ = nullptr;
};

}  // namespace

std::string Scenario::Describe() const {
  std::vector<std::string> kinds_s, shut_s;
  for (StreamKind k : kinds) kinds_s.push_back(StreamKindName(k));
  for (ShutdownKind k : shutdowns) shut_s.push_back(ShutdownName(k));
  return absl::StrCat(
      "topology ", TopologyName(topology), ", ", replicas, " replicas, ",
      streams, " streams (", absl::StrJoin(kinds_s, ","), "), ",
      absl::FormatDuration(length), ", a rollout every ",
      absl::FormatDuration(rollout_every), " (", absl::StrJoin(shut_s, ","),
      rollout_batch > 1 ? absl::StrCat("; ", rollout_batch, " at a time")
                        : std::string(),
      "), an item every ", absl::FormatDuration(item_every),
      ", faults ", fault_rate, ", app ends ", app_end_rate,
      health_check ? ", health checks" : "",
      migrate_on_drain ? "" : ", no migration",
      hold_fallback ? "" : ", no hold",
      stall_timeout > absl::ZeroDuration()
          ? absl::StrCat(", stall ", absl::FormatDuration(stall_timeout))
          : "",
      breaker ? ", breaker" : "",
      max_outbox != 64 ? absl::StrCat(", outbox ", max_outbox) : "",
      app.write_burst > 0 ? ", write bursts" : "",
      slow_start > 0 ? ", slow starts" : "",
      app.slow_observer > slow_start ? ", slow observers" : "",
      compaction > 0 ? absl::StrCat(", compaction ", compaction, ", ",
                                    resync_workers, " resync workers")
                     : "",
      outage ? absl::StrCat(", outage of ", absl::FormatDuration(outage_length),
                            " at ", absl::FormatDuration(outage_at))
             : "",
      log_lines > 0
          ? absl::StrCat(", logging ", log_lines, " lines a kind per ",
                         absl::FormatDuration(log_window))
          : "",
      preempt > 0 ? absl::StrCat(", preemption ", preempt) : "");
}

Scenario Draw(std::uint64_t seed, const Overrides& o) {
  Rng rng(seed * 0x2545f4914f6cdd1dULL + 17);
  Scenario s;
  s.seed = seed;
  s.topology = static_cast<Topology>(rng.Below(3));
  s.replicas = static_cast<int>(rng.Between(2, 5));
  s.streams = rng.Chance(0.1) ? static_cast<int>(rng.Between(100, 300))
                              : static_cast<int>(rng.Between(1, 40));
  s.kinds = Subset<StreamKind>(rng, {StreamKind::kDense, StreamKind::kSparse,
                         StreamKind::kBatch, StreamKind::kCursor,
                         StreamKind::kBidi});
  s.length = rng.Between(absl::Seconds(60), absl::Seconds(240));
  s.rollout_every = rng.Between(absl::Seconds(4), absl::Seconds(20));
  s.shutdowns = Subset<ShutdownKind>(rng, {ShutdownKind::kGraceful, ShutdownKind::kCancelFirst,
                             ShutdownKind::kAbrupt, ShutdownKind::kUnready});
  s.item_every = rng.Between(absl::Milliseconds(200), absl::Seconds(4));
  s.fault_rate = rng.Chance(0.5) ? rng.Unit() * 0.6 : 0;
  s.app_end_rate = rng.Chance(0.3) ? 0.2 : 0;
  s.app.slow_callback = rng.Chance(0.3) ? 0.05 : 0;
  s.app.reentrant_end = rng.Chance(0.2) ? 0.003 : 0;
  s.app.write_every = rng.Between(absl::Milliseconds(300), absl::Seconds(5));
  s.health_check = rng.Chance(0.3);
  s.migrate_on_drain = rng.Chance(0.85);
  s.hold_fallback = rng.Chance(0.7);
  s.migration_jitter = rng.Chance(0.3)
                           ? rng.Between(absl::ZeroDuration(), absl::Seconds(2))
                           : absl::ZeroDuration();
  // A stall bound well above the longest quiet time between items.
  s.stall_timeout = rng.Chance(0.4)
                        ? std::max(absl::Seconds(5), s.item_every * 6) +
                              rng.Between(absl::ZeroDuration(),
                                          absl::Seconds(10))
                        : absl::ZeroDuration();
  s.breaker = rng.Chance(0.4);
  s.max_outbox = rng.Chance(0.3) ? static_cast<std::size_t>(rng.Between(1, 8))
                                 : 64;
  s.slow_start = rng.Chance(0.3) ? 0.05 : 0;
  s.app.slow_observer = s.slow_start;
  s.outage = rng.Chance(0.2);
  if (s.outage) {
    s.max_time_without_progress =
        rng.Between(absl::Seconds(20), absl::Seconds(40));
    s.outage_at = s.length * (0.3 + 0.3 * rng.Unit());
    s.outage_length =
        rng.Chance(0.5)
            ? rng.Between(absl::Seconds(1), s.max_time_without_progress / 3)
            : s.max_time_without_progress + absl::Seconds(45);
  }
  // Drawn from a source of their own, so that the draws above, and the
  // seeds that cover them, stay as they were.
  Rng more(seed * 0x9e3779b97f4a7c15ULL + 101);
  if (more.Chance(0.3)) {
    s.compaction = 0.2 + 0.6 * more.Unit();
    s.app.resync_slow = more.Chance(0.5) ? 0.4 : 0;
    s.app.resync_hang = more.Chance(0.3) ? 0.05 : 0;
  }
  s.rollout_batch = s.replicas >= 3 && more.Chance(0.3) ? 2 : 1;
  s.app.write_burst = more.Chance(0.5) ? 0.3 : 0;
  s.resync_workers = static_cast<int>(2 << more.Below(3));  // 2, 4 or 8
  // An app whose observer is slow now and then (it logs, or its thread is
  // preempted on a busy machine): the attempt it hears of starts only
  // after the observer returns, and other events (a drain of the
  // connection that attempt landed on) run meanwhile.
  if (more.Chance(0.5)) s.app.slow_observer = std::max(s.app.slow_observer, 0.3);
  // An app that logs, with a rate limit small enough that rollouts hit it,
  // and a logger that may be preempted between its lock and its clock.
  // From a source of its own, seeded by a mixed value (seeds next to each
  // other would otherwise draw shifted copies of one sequence).
  Rng logging(Rng(seed + 0x10c).Next());
  if (logging.Chance(0.5)) {
    s.log_lines = static_cast<int>(logging.Between(1, 3));
    s.log_window =
        logging.Between(absl::Milliseconds(1), absl::Milliseconds(50));
    s.preempt = logging.Chance(0.8) ? 0.1 + 0.5 * logging.Unit() : 0;
  }
  if (o.streams) s.streams = *o.streams;
  if (o.length) s.length = *o.length;
  if (o.topology) s.topology = *o.topology;
  if (o.rollout_every) s.rollout_every = *o.rollout_every;
  if (o.item_every) {
    s.item_every = *o.item_every;
    s.app.write_every = *o.item_every;
  }
  if (o.rollouts_only) {
    s.fault_rate = 0;
    s.app_end_rate = 0;
    s.app.reentrant_end = 0;
    s.outage = false;
    s.compaction = 0;
    s.max_time_without_progress = absl::Minutes(2);
    // One replica a step, one write at a time: the shape the throughput
    // figures were measured with.
    s.rollout_batch = 1;
    s.app.write_burst = 0;
    s.app.slow_observer = s.slow_start;
    s.log_lines = 0;
    s.preempt = 0;
  }
  return s;
}

namespace {

// Runs one scenario; everything below lives as long as the run.
class Runner {
 public:
  Runner(const Scenario& s, const Overrides& o)
      : s_(s), world_(s.seed, 400), rng_(world_.rng().Fork()) {
    world_.trace().set_echo(o.trace);
  }

  RunResult Go() {
    const double cpu0 = CpuSeconds();
    world_.Note(absl::StrCat("seed ", s_.seed, ": ", s_.Describe()));
    if (Setup()) {
      Schedule();
      const absl::Time end = world_.Now() + s_.length;
      RunUntil(end);
      if (!world_.failed()) Heal(end);
      if (!world_.failed()) Teardown();
    }
    RunResult r;
    r.ok = !world_.failed();
    r.failure = world_.failure();
    if (!r.ok) r.trace = world_.trace().lines();
    // The time the scenario ran (the teardown's wait for stale timers does
    // not count).
    r.simulated_seconds = absl::ToDoubleSeconds(
        simulated_ == absl::ZeroDuration() ? world_.Elapsed() : simulated_);
    r.cpu_seconds = CpuSeconds() - cpu0;
    for (const auto& c : clients_) r.messages += c->delivered();
    r.calls = network_ ? network_->calls_started() : 0;
    r.rollouts = rollouts_;
    r.catch_up = catch_up_;
    clients_.clear();
    return r;
  }

 private:
  bool Setup() {
    Network::Options no;
    no.topology = s_.topology;
    no.replicas = s_.replicas;
    no.health_check = s_.health_check;
    no.slow_start = s_.slow_start;
    network_ = std::make_unique<Network>(world_, no);

    if (s_.breaker) {
      CircuitBreakerOptions bo;
      bo.name = "sim";
      auto b = CircuitBreaker::Create(bo, world_.clock(), rng_.Next() | 1);
      if (!b.ok()) {
        world_.Fail(absl::StrCat("breaker: ", b.status().ToString()));
        return false;
      }
      breaker_ = *b;
    }
    ConnectionPoolOptions po;
    if (s_.topology == Topology::kHeadless) {
      po.addresses = network_->Addresses();
    } else {
      po.target = network_->Addresses().front();
    }
    po.clock = world_.clock();
    po.health_check = s_.health_check;
    po.breaker = breaker_;
    auto watch = std::make_shared<PoolWatch>(world_);
    po.observer = watch;
    if (s_.log_lines > 0) {
      if (!StartLogging()) return false;
      pool_log_ = std::make_shared<ConnectionTee>(watch, log_);
      po.observer = pool_log_;
    }
    absl::Status valid = Validate(po);
    if (!valid.ok()) {
      world_.Fail(absl::StrCat("pool options: ", valid.ToString()));
      return false;
    }
    core_ = internal::PoolCore::Create(po, network_.get(), rng_.Next() | 1);
    network_->set_core(core_);
    source_ = std::make_shared<SimSource>(world_, core_);
    watch->set_source(source_.get());
    network_->set_after_core([this] { source_->Flush(); });
    network_->set_on_write(
        [this](Call& call, std::uint64_t id) { OnWrite(call, id); });
    network_->set_on_call([this](Call& call) {
      clients_[static_cast<std::size_t>(call.feed()->index)]->OnCall(call);
    });
    network_->set_on_end(
        [this](Call& call, const absl::Status& status, const Metadata& t) {
          OnEnd(call, status, t);
        });
    core_->Start();
    source_->Flush();
    // Resyncs run on workers in simulated time: a listing holds one until
    // it answers.
    ResyncPoolOptions ro;
    ro.max_threads = s_.resync_workers;
    absl::StatusOr<std::shared_ptr<ResyncPool>> pool =
        ResyncPool::OnClock(ro, world_.clock());
    if (!pool.ok()) {
      world_.Fail(absl::StrCat("resync pool: ", pool.status().ToString()));
      return false;
    }
    resyncs_ = *pool;
    std::shared_ptr<ResyncPool> resyncs = resyncs_;

    for (int i = 0; i < s_.streams; ++i) {
      const StreamKind kind = s_.kinds[rng_.Below(s_.kinds.size())];
      auto feed = std::make_unique<Feed>();
      feed->index = i;
      feed->dense = kind != StreamKind::kSparse;
      feed->resyncs = s_.compaction > 0 && (kind == StreamKind::kDense ||
                                            kind == StreamKind::kSparse ||
                                            kind == StreamKind::kBatch);
      ReconnectingStreamOptions so;
      so.clock = world_.clock();
      so.random_seed = rng_.Next() | 1;
      so.migrate_on_drain = s_.migrate_on_drain;
      so.migration_hold_fallback = s_.hold_fallback;
      so.migration_jitter = s_.migration_jitter;
      so.stall_timeout = s_.stall_timeout;
      so.max_time_without_progress = s_.max_time_without_progress;
      so.breaker = breaker_;
      so.max_outbox = s_.max_outbox;
      so.resync_pool = resyncs;
      if (log_) so.observer = log_->ForStream(absl::StrCat("s", i));
      auto client = std::make_unique<Client>(world_, *network_, source_,
                                             *feed, kind, s_.app, so);
      feeds_.push_back(std::move(feed));
      clients_.push_back(std::move(client));
    }
    for (auto& c : clients_) {
      if (!c->Start()) return false;
    }
    return true;
  }

  // The app's logger: its lines go to a `LogCheck`, its clock is one of
  // preemption points (with its own random source, so that the world's
  // draws stay as they were).
  bool StartLogging() {
    PreemptingClock::Options co;
    co.chance = s_.preempt;
    co.user = "the logger";
    log_clock_ = std::make_shared<PreemptingClock>(
        world_, Rng(s_.seed + 0x9c1).Next(), co);
    log_check_ = std::make_shared<LogCheck>(world_, s_.log_lines,
                                            s_.log_window);
    LoggingOptions lo;
    lo.sink = log_check_;
    lo.clock = log_clock_;
    lo.max_lines_per_window = s_.log_lines;
    lo.rate_window = s_.log_window;
    absl::StatusOr<std::shared_ptr<LoggingObserver>> log =
        LoggingObserver::Create(lo);
    if (!log.ok()) {
      world_.Fail(absl::StrCat("logging: ", log.status().ToString()));
      return false;
    }
    log_ = *std::move(log);
    return true;
  }

  // Once every stream is gone and the pool lets go of it, the logger is
  // destroyed: every summary timer it armed has run or is cancelled (a
  // timer it lost track of would fire later, into nothing).
  void StopLogging() {
    if (!log_) return;
    pool_log_->DropSecond();
    std::weak_ptr<LoggingObserver> held = log_;
    log_.reset();
    if (!held.expired()) {
      world_.Fail("logging: the LoggingObserver is still held after every "
                  "stream was destroyed and the pool let go of it");
      return;
    }
    if (log_clock_->pending() != 0) {
      world_.Fail(absl::StrCat(
          "logging: ", log_clock_->pending(),
          " summary timers still armed after the LoggingObserver was "
          "destroyed (armed, and lost track of)"));
    }
  }

  void Schedule() {
    for (std::size_t i = 0; i < feeds_.size(); ++i) {
      world_.After(NextItemIn(), [this, i] { Produce(i); });
      if (clients_[i]->kind() == StreamKind::kBidi) {
        Client* c = clients_[i].get();
        world_.After(rng_.Between(absl::ZeroDuration(), s_.app.write_every),
                     [c] { c->WriteLoop(); });
      }
      if (s_.app_end_rate > 0 && rng_.Chance(s_.app_end_rate)) {
        Client* c = clients_[i].get();
        const bool destroy = rng_.Chance(0.5);
        world_.After(rng_.Between(absl::ZeroDuration(), s_.length),
                     [this, c, destroy] {
                       world_.Note(absl::StrCat("app: ",
                                                destroy ? "destroys" : "cancels",
                                                " a stream"));
                       if (destroy) {
                         c->Destroy();
                       } else {
                         c->Cancel();
                       }
                     });
      }
    }
    world_.After(s_.rollout_every, [this] { Rollout(); });
    if (s_.compaction > 0) {
      world_.After(rng_.Between(absl::Seconds(1), absl::Seconds(5)),
                   [this] { Compact(); });
    }
    if (s_.outage) {
      world_.After(s_.outage_at, [this] { StartOutage(); });
    }
  }

  absl::Duration NextItemIn() {
    return rng_.Between(s_.item_every / 2, s_.item_every * 3 / 2);
  }

  void Produce(std::size_t i) {
    if (producing_stopped_) return;
    Feed& f = *feeds_[i];
    SimMsg m;
    switch (clients_[i]->kind()) {
      case StreamKind::kSparse:
        if (rng_.Chance(0.2) && !f.log.empty()) {
          f.next += static_cast<std::uint64_t>(rng_.Between(1, 5));
          m.progress = true;
          m.first = m.last = f.next - 1;
          break;
        }
        f.next += static_cast<std::uint64_t>(rng_.Between(0, 4));
        m.first = m.last = f.next++;
        break;
      case StreamKind::kBatch: {
        const std::uint64_t k = static_cast<std::uint64_t>(rng_.Between(1, 4));
        m.first = f.next;
        m.last = f.next + k - 1;
        f.next += k;
        break;
      }
      default:
        m.first = m.last = f.next++;
        break;
    }
    network_->Publish(f, m);
    world_.After(NextItemIn(), [this, i] { Produce(i); });
  }

  void OnWrite(Call& call, std::uint64_t id) {
    Feed& f = *call.feed();
    Client& c = *clients_[static_cast<std::size_t>(f.index)];
    const absl::Time acked = c.AckedAt(id);
    if (acked < call.started()) {
      world_.Fail(absl::StrCat(
          "stream ", f.index, " (bidi): write w", id, " replayed by call ",
          call.id(), " (started at ",
          absl::FormatDuration(call.started() - start_), ") after the app had "
          "its acknowledgement at ", absl::FormatDuration(acked - start_)));
      return;
    }
    if (!f.applied.insert(id).second) return;  // a replay: acked already
    SimMsg m;
    m.first = m.last = f.next++;
    m.ack = id;
    network_->Publish(f, m);
  }

  // A stream told "do not retry" or a pushback past its budget, on the
  // attempt it runs on with no other to fall back to, must end at once and
  // start nothing more.
  void OnEnd(Call& call, const absl::Status& status, const Metadata& trailers) {
    auto it = trailers.find("grpc-retry-pushback-ms");
    if (it == trailers.end() || status.ok()) return;
    std::int64_t ms = 0;
    if (!absl::SimpleAtoi(it->second, &ms)) return;
    const bool stop = ms < 0;
    if (!stop && absl::Milliseconds(ms) <= s_.max_time_without_progress) return;
    Client* c = clients_[static_cast<std::size_t>(call.feed()->index)].get();
    c->AllowEnd();
    if (c->latest_call() != call.id() || c->OtherCallRunning(call)) return;
    const std::string why = absl::StrCat(
        "call ", call.id(), " ended with grpc-retry-pushback-ms ", it->second,
        stop ? " (do not retry)" : " (past max_time_without_progress)");
    c->ExpectEnd(why);
    const int index = call.feed()->index;
    world_.After(absl::Seconds(1), [this, c, why, index] {
      if (c->live()) {
        world_.Fail(absl::StrCat("pushback: stream ", index,
                                 " still runs 1s after ", why));
      }
    });
  }

  void Rollout() {
    if (healing_) return;
    for (int k = 0; k < s_.rollout_batch && !in_outage_; ++k) {
      const int r = network_->OldestServing();
      if (r < 0) break;
      ++rollouts_;
      const ShutdownKind kind = s_.shutdowns[rng_.Below(s_.shutdowns.size())];
      // Drawn in this order (the runs of the seeds drawn before depend on
      // it).
      const absl::Duration dns =
          rng_.Between(absl::Seconds(-1), absl::Seconds(3));
      const absl::Duration startup =
          rng_.Between(absl::ZeroDuration(), absl::Seconds(3));
      const absl::Duration grace =
          rng_.Between(absl::Milliseconds(500), absl::Seconds(5));
      if (k == 0) {
        network_->Replace(r, kind, grace, startup, dns);
        continue;
      }
      // The next replica of the step: a few milliseconds later.
      network_->MarkLeaving(r);
      world_.After(rng_.Between(absl::ZeroDuration(), absl::Milliseconds(5)),
                   [this, r, kind, grace, startup, dns] {
                     network_->Replace(r, kind, grace, startup, dns);
                   });
    }
    if (s_.fault_rate > 0 && rng_.Chance(s_.fault_rate)) InjectFault();
    world_.After(s_.rollout_every, [this] { Rollout(); });
  }

  // Now and then the store compacts every log whose stream resyncs up to
  // its head: a stream behind it (paused, black-holed, in an outage, or an
  // item in flight) resyncs when it resumes.
  void Compact() {
    if (healing_) return;
    if (rng_.Chance(s_.compaction)) {
      world_.Note("store: compacts the logs up to their heads");
      for (auto& f : feeds_) {
        if (f->resyncs) f->compacted_below = f->head();
      }
    }
    world_.After(rng_.Between(absl::Seconds(1), absl::Seconds(5)),
                 [this] { Compact(); });
  }

  void InjectFault() {
    std::vector<int> up = network_->Accepting();
    if (up.empty()) return;
    const int r = up[rng_.Below(up.size())];
    switch (rng_.Below(5)) {
      case 0:
        SetFaultFor(r, Fault::kBlackHole, "black hole",
                    rng_.Between(absl::Seconds(2), absl::Seconds(20)));
        break;
      case 1:
        SetFaultFor(r, Fault::kPause, "pause",
                    rng_.Between(absl::Seconds(1), absl::Seconds(10)));
        break;
      case 2:
        SetFaultFor(r, Fault::kSlow, "slow",
                    rng_.Between(absl::Seconds(5), absl::Seconds(30)));
        break;
      case 3:
        world_.Note(absl::StrCat("fault: replica ", r, " sheds load"));
        network_->EndCalls(r, absl::UnavailableError("shedding load"), {});
        break;
      case 4: {
        // Mostly a delay within the budget; now and then "do not retry"
        // (-1) or one past max_time_without_progress: both end the
        // stream at once.
        const double u = rng_.Unit();
        const std::int64_t ms =
            u < 0.08 ? -1
                     : u < 0.16 ? absl::ToInt64Milliseconds(
                                      s_.max_time_without_progress) +
                                      rng_.Between(1000, 3600 * 1000)
                                : rng_.Between(0, 3000);
        world_.Note(absl::StrCat("fault: replica ", r, " pushes back ", ms,
                                 " ms"));
        network_->EndCalls(
            r, absl::UnavailableError("overloaded"),
            Metadata{{"grpc-retry-pushback-ms", absl::StrCat(ms)}});
        break;
      }
    }
  }

  void SetFaultFor(int r, Fault f, const char* name, absl::Duration d) {
    world_.Note(absl::StrCat("fault: replica ", r, " ", name, " for ",
                             absl::FormatDuration(d)));
    network_->SetFault(r, f, true);
    world_.After(d, [this, r, f] { network_->SetFault(r, f, false); });
  }

  void StartOutage() {
    if (healing_) return;
    world_.Note(absl::StrCat("outage: every replica down for ",
                             absl::FormatDuration(s_.outage_length)));
    in_outage_ = true;
    outage_started_ = world_.Now();
    const bool long_one = s_.outage_length > s_.max_time_without_progress;
    for (auto& c : clients_) c->set_outage(long_one);
    network_->Outage(true);
    world_.After(s_.outage_length, [this] { EndOutage(); });
  }

  void EndOutage() {
    world_.Note("outage: a fresh fleet starts");
    in_outage_ = false;
    network_->Outage(false);
    if (s_.outage_length <= s_.max_time_without_progress) return;
    // Budget bound: with the dependency down, every stream ended within
    // max_time_without_progress plus one backoff and an open timeout.
    const absl::Duration bound =
        s_.max_time_without_progress + absl::Seconds(10) + absl::Seconds(10);
    for (auto& c : clients_) {
      if (c->app_ended()) continue;
      if (c->live()) {
        world_.Fail(absl::StrCat(
            "budget: a stream still runs ",
            absl::FormatDuration(world_.Now() - outage_started_),
            " into an outage; max_time_without_progress is ",
            absl::FormatDuration(s_.max_time_without_progress)));
        return;
      }
      if (c->done_at() - outage_started_ > bound) {
        world_.Fail(absl::StrCat(
            "budget: a stream ended ",
            absl::FormatDuration(c->done_at() - outage_started_),
            " into an outage (bound ", absl::FormatDuration(bound), ")"));
        return;
      }
    }
  }

  void RunUntil(absl::Time t) {
    auto& clock = world_.clock();
    while (!world_.failed() && clock->NextDue() <= t) {
      clock->AdvanceToNextTimer();
      source_->Flush();
      network_->Sweep();
      if (s_.compaction > 0) CheckResyncPool();
    }
    if (!world_.failed()) clock->AdvanceTo(t);
  }

  // The pool's bound: a resync waits only while every worker is taken (by
  // listings that have not answered), so one stream's slow or hung listing
  // never keeps another's, which would answer at once, from running.
  void CheckResyncPool() {
    const std::size_t queued = resyncs_->queued();
    if (queued == 0) return;
    const std::size_t taken = resyncs_->running();
    const int workers = resyncs_->max_threads();
    if (taken < static_cast<std::size_t>(workers)) {
      world_.Fail(absl::StrCat(
          "resync pool: ", queued, " resyncs wait for a worker although ",
          "only ", taken, " of ", workers, " are taken (a stream whose "
          "listing answers at once waits behind another's)"));
    }
  }

  // The fleet heals: no new fault; once the rollouts in flight are over,
  // the feeds stop, and every live stream must deliver all within
  // kLivenessBound.
  void Heal(absl::Time end) {
    healing_ = true;
    for (const Replica& r : network_->replicas()) {
      network_->SetFault(r.id, Fault::kBlackHole, false);
      network_->SetFault(r.id, Fault::kPause, false);
      network_->SetFault(r.id, Fault::kSlow, false);
    }
    RunUntil(end + absl::Seconds(10));
    if (world_.failed()) return;
    producing_stopped_ = true;
    for (auto& c : clients_) c->StopWriting();
    const absl::Time healed = world_.Now();
    world_.Note("healed: the feeds stop; every stream must catch up");
    std::string why;
    for (absl::Duration d = absl::ZeroDuration(); d <= kLivenessBound;
         d += absl::Seconds(1)) {
      RunUntil(healed + d);
      if (world_.failed()) return;
      why.clear();
      bool all = true;
      for (auto& c : clients_) {
        if (!c->CaughtUp(&why)) {
          all = false;
          break;
        }
      }
      if (all) {
        catch_up_ = d;
        return;
      }
    }
    world_.Fail(absl::StrCat("liveness: ",
                             absl::FormatDuration(kLivenessBound),
                             " after the fleet healed, ", why));
  }

  void Teardown() {
    for (auto& c : clients_) {
      const absl::Status s = c->CheckerStatus();
      if (!s.ok()) {
        world_.Fail(std::string(s.message()));
        return;
      }
      c->Destroy();
    }
    RunUntil(world_.Now() + absl::Seconds(10));
    if (world_.failed()) return;
    std::vector<std::shared_ptr<Call>> left = network_->UnfinishedCalls();
    if (!left.empty()) {
      world_.Fail(absl::StrCat(
          left.size(), " calls still open 10s after every stream was "
          "destroyed, e.g. call ", left.front()->id(), " of stream ",
          left.front()->feed()->index));
      return;
    }
    const ConnectionPoolStats stats = core_->Stats();
    if (stats.picks != 0) {
      world_.Fail(absl::StrCat(stats.picks, " picks still held after every "
                               "stream was destroyed"));
      return;
    }
    core_->Shutdown();
    source_->Flush();
    StopLogging();
    if (world_.failed()) return;
    simulated_ = world_.Elapsed();
    RunUntil(world_.Now() + absl::Hours(2));
    const std::size_t timers = world_.clock()->PendingTimers();
    if (timers != 0) {
      world_.Fail(absl::StrCat(timers, " timers still armed two hours after "
                               "every stream and the pool were gone"));
    }
  }

  const Scenario& s_;
  World world_;
  Rng rng_;
  const absl::Time start_ = world_.Now();
  std::unique_ptr<Network> network_;
  std::shared_ptr<CircuitBreaker> breaker_;
  std::shared_ptr<internal::PoolCore> core_;
  std::shared_ptr<SimSource> source_;
  std::shared_ptr<ResyncPool> resyncs_;
  std::shared_ptr<PreemptingClock> log_clock_;
  std::shared_ptr<LogCheck> log_check_;
  std::shared_ptr<LoggingObserver> log_;
  std::shared_ptr<ConnectionTee> pool_log_;
  std::vector<std::unique_ptr<Feed>> feeds_;
  std::vector<std::unique_ptr<Client>> clients_;
  bool healing_ = false;
  bool producing_stopped_ = false;
  bool in_outage_ = false;
  absl::Time outage_started_;
  std::uint64_t rollouts_ = 0;
  absl::Duration catch_up_ = absl::ZeroDuration();
  absl::Duration simulated_ = absl::ZeroDuration();
};

}  // namespace

RunResult Run(const Scenario& scenario, const Overrides& overrides) {
  Runner runner(scenario, overrides);
  return runner.Go();
}

}  // namespace sim
}  // namespace tether
