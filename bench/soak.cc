// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// soak: many ledger watches through a long mixed sequence of faults, checking
// every message and watching for slow leaks.
//
//   soak [--streams=64] [--rollouts=40] [--seed=1] [--short]
//        [--faults=graceful,cancel_first,abrupt,health,blackhole,outage,shed]
//        [--tick_ms=10] [--outage_ms=4000] [--stall_timeout_ms=1000]
//
// Setup (all in this process, all on 127.0.0.1): three ledger replicas
// (examples/common/ledger_replica.h) behind the fault proxy
// (support/fault_proxy.h), which routes new connections round robin like a
// Kubernetes Service; one health-checked ConnectionPool on the proxy; --streams
// tether watches (ReconnectingStream over the ledger's WatchAccount, resuming
// after the last seq), one account each.
//
// Then --rollouts fault rounds. Each round picks the next kind of a shuffled
// (--seed) cycle over --faults, applies it, waits (bounded) until every
// stream has delivered an event after the fault ended, and lets the streams
// run a moment:
//   graceful      replace one replica: new one in, old one out of the proxy,
//                 health NOT_SERVING, GOAWAY, drain (make before break)
//   cancel_first  the same with a replica that ends its streams UNAVAILABLE
//                 before its GOAWAY (the ordering bug)
//   abrupt        the same with a replica that dies: its connections are
//                 reset at the proxy, no GOAWAY
//   health        one replica reports NOT_SERVING and leaves the proxy for a
//                 while, then SERVING and back (it never stops)
//   blackhole     every connection to one replica goes silent (the proxy
//                 drops all bytes, sockets stay open) and the replica leaves
//                 the proxy; after the round the silent connections are reset.
//                 Needs the stream's stall timeout to recover within the round
//   outage        every replica down (--outage_ms), then three new ones
//   shed          one replica sheds load for a burst: open and new watches end
//                 RESOURCE_EXHAUSTED
//
// Counted: lost, duplicate and out-of-order messages as the application saw
// them (seq per account is 1, 2, 3, ...), app-visible errors (a watch ending
// by itself), the longest gap between two delivered messages of one stream
// per fault kind, rounds in which some stream did not recover in time,
// connections opened (proxy and pool), timers pending on the streams' and
// pool's clock, and heap (mallinfo2) and RSS (/proc/self/statm) growth per
// 1,000 migrations (reopens of any cause) from the end of the warm-up to the
// end of the run. It prints a table and, as its LAST line, one JSON object.
//
// Exit code 0 only with 0 lost, 0 duplicates, 0 out-of-order, 0 app-visible
// errors, every round recovered and every stream delivering at the end;
// 1 otherwise; 2 for bad flags or setup failures.
//
// --short is the CI size (ctest "soak.short", label soak): 64 streams, two
// rounds of each kind in kShortFaults, a 2 s outage; about 15 s.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "examples/common/flag_names.h"
#include "examples/common/ledger_replica.h"
#include "ledger/ledger.grpc.pb.h"
#include "support/fault_proxy.h"
#include "tether/backoff.h"
#include "tether/clock.h"
#include "tether/connection_pool.h"
#include "tether/reconnecting_stream.h"

ABSL_FLAG(int, streams, 64, "watches (one account each), >= 1");
ABSL_FLAG(int, rollouts, 40, "fault rounds, >= 1 (--short: 2 per kind)");
ABSL_FLAG(std::uint64_t, seed, 1, "seeds the order of the faults");
ABSL_FLAG(bool, short, false,
          "the CI size: two rounds of each kind that works on this build, "
          "2 s outage (well under 60 s)");
ABSL_FLAG(std::string, faults, "",
          "comma-separated kinds: graceful,cancel_first,abrupt,health,"
          "blackhole,outage,shed (default: all; --short: the ones that "
          "recover on this build)");
ABSL_FLAG(int, tick_ms, 10, "replica tick: one event per stream per tick");
ABSL_FLAG(int, outage_ms, 4000, "how long every replica is down (outage)");
ABSL_FLAG(int, stall_timeout_ms, 1000,
          "ReconnectingStreamOptions::stall_timeout, when this build has it");
ABSL_FLAG(int, recover_s, 30,
          "a round fails if some stream delivers nothing new this long "
          "after the fault ended");

namespace ex = ::tether::examples;
namespace lv1 = ::tether::examples::ledger::v1;
using ::tether::support::FaultProxy;
using ::tether::support::Select;
using Watch =
    tether::ReconnectingStream<lv1::WatchAccountRequest, lv1::AccountEvent>;

namespace {

enum Kind {
  kGraceful,
  kCancelFirst,
  kAbrupt,
  kHealth,
  kBlackHole,
  kOutage,
  kShed,
  kKinds,
  kWarmup = kKinds,  // stalls before the first round
};
const char* const kKindNames[] = {"graceful", "cancel_first", "abrupt",
                                  "health",   "blackhole",    "outage",
                                  "shed",     "warmup"};

// The kinds --short runs: all of them.
const Kind kShortFaults[] = {kGraceful, kCancelFirst, kAbrupt, kHealth,
                             kBlackHole, kOutage,     kShed};

// --- Measuring ---------------------------------------------------------------

// Heap in use (all arenas and mmapped blocks) and resident set, in bytes.
std::int64_t HeapBytes() {
  struct mallinfo2 m = mallinfo2();
  return static_cast<std::int64_t>(m.uordblks + m.hblkhd);
}

std::int64_t RssBytes() {
  std::ifstream f("/proc/self/statm");
  std::int64_t size = 0;
  std::int64_t resident = 0;
  f >> size >> resident;
  return resident * static_cast<std::int64_t>(sysconf(_SC_PAGESIZE));
}

// SystemClock() with a count of the timers set and not yet run or cancelled.
// The count lives in a shared_ptr the timer callbacks hold, so a timer that
// runs after the clock is gone is harmless.
class CountingClock final : public tether::Clock {
 public:
  absl::Time Now() override { return tether::SystemClock().Now(); }
  TimerId RunAfter(absl::Duration delay, std::function<void()> fn) override {
    auto fired = std::make_shared<std::atomic<bool>>(false);
    pending_->fetch_add(1);
    TimerId id = tether::SystemClock().RunAfter(
        delay, [pending = pending_, fired, fn = std::move(fn)] {
          if (!fired->exchange(true)) pending->fetch_sub(1);
          fn();
        });
    std::lock_guard<std::mutex> l(mu_);
    flags_[id] = fired;
    if (flags_.size() > 4096) {  // forget timers that ran
      for (auto it = flags_.begin(); it != flags_.end();) {
        it = it->second->load() ? flags_.erase(it) : std::next(it);
      }
    }
    return id;
  }
  bool Cancel(TimerId id) override {
    bool cancelled = tether::SystemClock().Cancel(id);
    std::shared_ptr<std::atomic<bool>> fired;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = flags_.find(id);
      if (it != flags_.end()) {
        fired = it->second;
        flags_.erase(it);
      }
    }
    if (cancelled && fired != nullptr && !fired->exchange(true)) {
      pending_->fetch_sub(1);
    }
    return cancelled;
  }
  std::int64_t pending() const { return pending_->load(); }

 private:
  std::shared_ptr<std::atomic<std::int64_t>> pending_ =
      std::make_shared<std::atomic<std::int64_t>>(0);
  std::mutex mu_;
  std::map<TimerId, std::shared_ptr<std::atomic<bool>>> flags_;
};

// What one watch delivered to the application, checked message by message.
class Checker {
 public:
  explicit Checker(std::string account) : account_(std::move(account)) {}

  void OnEvent(const lv1::AccountEvent& ev, int kind) {
    absl::Time now = absl::Now();
    std::lock_guard<std::mutex> l(mu_);
    if (ev.account() != account_ ||
        ev.balance() != static_cast<std::int64_t>(10 * ev.seq())) {
      ++bad_;
    }
    std::uint64_t seq = ev.seq();
    if (seq <= last_) {
      // Earlier than the last one: one that was missing (out of order), or
      // one already delivered (duplicate).
      for (auto it = missing_.begin(); it != missing_.end(); ++it) {
        if (seq >= it->first && seq <= it->second) {
          ++out_of_order_;
          std::pair<std::uint64_t, std::uint64_t> range = *it;
          missing_.erase(it);
          if (range.first < seq) missing_.push_back({range.first, seq - 1});
          if (seq < range.second) missing_.push_back({seq + 1, range.second});
          return;
        }
      }
      ++duplicates_;
      return;
    }
    if (seq > last_ + 1) missing_.push_back({last_ + 1, seq - 1});
    last_ = seq;
    replica_ = ev.replica();
    ++delivered_;
    double gap = absl::ToDoubleMilliseconds(now - last_time_);
    if (has_delivered_) {
      max_stall_ms_[kind] = std::max(max_stall_ms_[kind], gap);
    }
    has_delivered_ = true;
    last_time_ = now;
  }
  void OnDone(const absl::Status& status, bool cancelled_by_us) {
    std::lock_guard<std::mutex> l(mu_);
    done_ = true;
    if (!cancelled_by_us) {
      ++errors_;
      last_error_ = status.ToString();
    }
  }
  bool DeliveredSince(absl::Time t) const {
    std::lock_guard<std::mutex> l(mu_);
    return has_delivered_ && last_time_ > t;
  }
  bool done() const {
    std::lock_guard<std::mutex> l(mu_);
    return done_;
  }
  // The replica that sent the last event delivered.
  std::string replica() const {
    std::lock_guard<std::mutex> l(mu_);
    return replica_;
  }

  struct Totals {
    std::int64_t delivered = 0;
    std::int64_t lost = 0;
    std::int64_t duplicates = 0;
    std::int64_t out_of_order = 0;
    std::int64_t bad = 0;
    std::int64_t errors = 0;
    double max_stall_ms[kKinds + 1] = {};
  };
  void AddTo(Totals* t, std::string* error) const {
    std::lock_guard<std::mutex> l(mu_);
    t->delivered += delivered_;
    for (const auto& range : missing_) {
      t->lost += static_cast<std::int64_t>(range.second - range.first + 1);
    }
    t->duplicates += duplicates_;
    t->out_of_order += out_of_order_;
    t->bad += bad_;
    t->errors += errors_;
    for (int k = 0; k <= kKinds; ++k) {
      t->max_stall_ms[k] = std::max(t->max_stall_ms[k], max_stall_ms_[k]);
    }
    if (!last_error_.empty() && error->empty()) {
      *error = absl::StrCat(account_, ": ", last_error_);
    }
  }

 private:
  const std::string account_;
  mutable std::mutex mu_;
  std::uint64_t last_ = 0;
  std::string replica_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> missing_;
  std::int64_t delivered_ = 0;
  std::int64_t duplicates_ = 0;
  std::int64_t out_of_order_ = 0;
  std::int64_t bad_ = 0;
  std::int64_t errors_ = 0;
  bool has_delivered_ = false;
  bool done_ = false;
  absl::Time last_time_ = absl::Now();
  double max_stall_ms_[kKinds + 1] = {};
  std::string last_error_;
};

// --- The service -------------------------------------------------------------

// Three replica slots behind the proxy; a restart puts a new replica (new
// port, name a2, a3, ...) into the slot.
class Service {
 public:
  Service(FaultProxy* proxy, absl::Duration tick, absl::Duration drain)
      : proxy_(proxy), tick_(tick), drain_(drain) {}

  bool StartSlot(int i) {
    ex::LedgerReplicaOptions o;
    o.name = absl::StrCat(std::string(1, static_cast<char>('a' + i)),
                          ++generation_[i]);
    o.tick = tick_;
    o.pre_drain = absl::Milliseconds(50);
    o.drain = drain_;
    auto r = std::make_unique<ex::LedgerReplica>(o);
    absl::Status s = r->Start();
    if (s.ok()) s = proxy_->AddBackend(r->address());
    if (!s.ok()) {
      std::fprintf(stderr, "soak: replica: %s\n", s.ToString().c_str());
      return false;
    }
    slots_[i] = std::move(r);
    return true;
  }
  // Make before break: a new replica joins, then the old one leaves in
  // `mode` (an abrupt one loses its connections at the proxy first).
  bool Replace(int i, ex::ShutdownMode mode) {
    std::unique_ptr<ex::LedgerReplica> old = std::move(slots_[i]);
    if (!StartSlot(i)) return false;
    proxy_->RemoveBackend(old->address());
    if (mode == ex::ShutdownMode::kAbrupt) {
      proxy_->Reset(Select::Backend(old->address()));
    }
    old->Stop(mode);
    return true;
  }
  void StopAll() {
    for (auto& r : slots_) {
      if (r == nullptr) continue;
      proxy_->RemoveBackend(r->address());
      proxy_->Reset(Select::Backend(r->address()));
    }
    for (auto& r : slots_) {
      if (r != nullptr) r->Stop(ex::ShutdownMode::kAbrupt);
      r.reset();
    }
  }
  ex::LedgerReplica* slot(int i) { return slots_[i].get(); }
  // The slot whose replica `name` is, or -1.
  int SlotOf(const std::string& name) const {
    for (int i = 0; i < 3; ++i) {
      if (slots_[i] != nullptr && slots_[i]->name() == name) return i;
    }
    return -1;
  }

 private:
  FaultProxy* const proxy_;
  const absl::Duration tick_;
  const absl::Duration drain_;
  int generation_[3] = {0, 0, 0};
  std::unique_ptr<ex::LedgerReplica> slots_[3];
};

bool ParseFaults(const std::string& text, std::vector<Kind>* out) {
  out->clear();
  for (absl::string_view name : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    bool found = false;
    for (int k = 0; k < kKinds; ++k) {
      if (name == kKindNames[k]) {
        out->push_back(static_cast<Kind>(k));
        found = true;
      }
    }
    if (!found) {
      std::fprintf(stderr, "soak: unknown fault '%s'\n",
                   std::string(name).c_str());
      return false;
    }
  }
  return !out->empty();
}

bool WaitUntil(const std::function<bool()>& pred, absl::Duration timeout) {
  absl::Time end = absl::Now() + timeout;
  while (!pred()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("tether watches through a long mix of faults");
  ex::AcceptDashedFlags(argc, argv);
  absl::ParseCommandLine(argc, argv);
  const bool short_run = absl::GetFlag(FLAGS_short);
  const int n_streams = absl::GetFlag(FLAGS_streams);
  const int tick_ms = absl::GetFlag(FLAGS_tick_ms);
  const int stall_timeout_ms = absl::GetFlag(FLAGS_stall_timeout_ms);
  const absl::Duration outage = absl::Milliseconds(
      short_run ? std::min(2000, absl::GetFlag(FLAGS_outage_ms))
                : absl::GetFlag(FLAGS_outage_ms));
  const absl::Duration recover = absl::Seconds(absl::GetFlag(FLAGS_recover_s));
  std::vector<Kind> faults;
  if (!absl::GetFlag(FLAGS_faults).empty()) {
    if (!ParseFaults(absl::GetFlag(FLAGS_faults), &faults)) return 2;
  } else if (short_run) {
    faults.assign(std::begin(kShortFaults), std::end(kShortFaults));
  } else {
    for (int k = 0; k < kKinds; ++k) faults.push_back(static_cast<Kind>(k));
  }
  int rounds = absl::GetFlag(FLAGS_rollouts);
  if (short_run) rounds = 2 * static_cast<int>(faults.size());
  if (n_streams < 1 || rounds < 1 || tick_ms < 1 || stall_timeout_ms < 0 ||
      outage < absl::ZeroDuration() || recover <= absl::ZeroDuration()) {
    std::fprintf(
        stderr,
        "soak: need --streams >= 1, --rollouts >= 1, --tick_ms >= 1, "
        "--stall_timeout_ms >= 0, --outage_ms >= 0, --recover_s > 0\n");
    return 2;
  }
  const bool have_stall_timeout = stall_timeout_ms > 0;

  // The order of the rounds: a cycle over `faults`, shuffled per cycle.
  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed));
  std::vector<Kind> plan;
  while (static_cast<int>(plan.size()) < rounds) {
    std::vector<Kind> cycle = faults;
    std::shuffle(cycle.begin(), cycle.end(), rng);
    for (Kind k : cycle) {
      if (static_cast<int>(plan.size()) < rounds) plan.push_back(k);
    }
  }

  const absl::Time start = absl::Now();
  auto secs = [&] { return absl::ToDoubleSeconds(absl::Now() - start); };
  FaultProxy proxy;
  if (!proxy.Start().ok()) {
    std::fprintf(stderr, "soak: proxy did not start\n");
    return 2;
  }
  const absl::Duration tick = absl::Milliseconds(tick_ms);
  Service service(&proxy, tick, absl::Milliseconds(300));
  for (int i = 0; i < 3; ++i) {
    if (!service.StartSlot(i)) return 2;
  }

  auto clock = std::make_shared<CountingClock>();
  tether::ConnectionPoolOptions po;
  po.target = proxy.address();
  po.health_check = true;
  po.clock = clock;
  auto pool_or = tether::ConnectionPool::Create(std::move(po));
  if (!pool_or.ok()) {
    std::fprintf(stderr, "soak: %s\n", pool_or.status().ToString().c_str());
    return 2;
  }
  std::shared_ptr<tether::ConnectionPool> pool = *std::move(pool_or);

  tether::ReconnectingStreamOptions so;
  so.clock = clock;
  // The app's choices for a service with multi-second outages: retry at
  // least once a second, and give up only after 2 minutes without progress
  // (the default), not after 20 failed attempts (which a 4 s outage with a
  // 1 s backoff cap can use up).
  tether::ExponentialBackoffOptions backoff;
  backoff.max_delay = absl::Seconds(1);
  so.backoff = tether::ExponentialBackoff::Create(backoff).value();
  so.max_attempts_without_progress = 1000;
  if (have_stall_timeout) {
    so.stall_timeout = absl::Milliseconds(stall_timeout_ms);
  }

  std::atomic<int> kind{kWarmup};
  std::atomic<bool> closing{false};
  std::vector<std::shared_ptr<Checker>> checkers;
  std::vector<std::unique_ptr<Watch>> watches;
  for (int i = 0; i < n_streams; ++i) {
    auto checker = std::make_shared<Checker>(absl::StrCat("acct-", i));
    Watch::Spec spec;
    spec.start = [](const std::shared_ptr<grpc::Channel>& ch,
                    grpc::ClientContext* ctx,
                    const lv1::WatchAccountRequest* req,
                    grpc::ClientReadReactor<lv1::AccountEvent>* r) {
      lv1::Ledger::NewStub(ch)->async()->WatchAccount(ctx, req, r);
    };
    spec.request.set_account(absl::StrCat("acct-", i));
    spec.sequence_of = [](const lv1::AccountEvent& e) {
      return absl::optional<std::uint64_t>(e.seq());
    };
    spec.resume_after = [](lv1::WatchAccountRequest& r, std::uint64_t seq) {
      r.set_after_seq(seq);
    };
    auto w = Watch::Start(
        pool, std::move(spec), so,
        [checker, &kind](lv1::AccountEvent&& e) {
          checker->OnEvent(e, kind.load());
        },
        [checker, &closing](const absl::Status& s) {
          checker->OnDone(s, closing.load());
        });
    if (!w.ok()) {
      std::fprintf(stderr, "soak: %s\n", w.status().ToString().c_str());
      return 2;
    }
    checkers.push_back(checker);
    watches.push_back(*std::move(w));
  }
  std::int64_t max_pending = 0;
  auto all_since = [&](absl::Time t) {
    max_pending = std::max(max_pending, clock->pending());
    for (auto& c : checkers) {
      if (!c->DeliveredSince(t)) return false;
    }
    return true;
  };
  auto migrations = [&] {
    std::int64_t m = 0;
    for (auto& w : watches) {
      auto st = w->stats();
      m += static_cast<std::int64_t>(st.attempts > 0 ? st.attempts - 1 : 0);
    }
    return m;
  };

  std::printf(
      "soak: %d streams, %d rounds of {%s}, seed %llu, tick %d ms, 3 "
      "replicas behind %s, stall timeout %s\n",
      n_streams, rounds,
      absl::StrJoin(
          faults, ",",
          [](std::string* out, Kind k) { out->append(kKindNames[k]); })
          .c_str(),
      static_cast<unsigned long long>(absl::GetFlag(FLAGS_seed)), tick_ms,
      proxy.address().c_str(),
      have_stall_timeout ? absl::StrCat(stall_timeout_ms, " ms").c_str()
                         : "not in this build");
  std::fflush(stdout);

  // Warm-up: every stream delivering, then the memory baseline.
  if (!WaitUntil([&] { return all_since(start); }, recover)) {
    std::fprintf(stderr, "soak: streams did not start delivering\n");
    return 1;
  }
  absl::SleepFor(absl::Milliseconds(300));
  const std::int64_t heap0 = HeapBytes();
  const std::int64_t rss0 = RssBytes();
  const std::int64_t migrations0 = migrations();
  max_pending = clock->pending();  // from the baseline on

  int rounds_run[kKinds] = {};
  int rounds_unrecovered[kKinds] = {};
  double recovery_ms[kKinds] = {};  // longest fault end -> all delivering
  std::int64_t moves[kKinds] = {};
  for (int round = 0; round < rounds; ++round) {
    const Kind k = plan[static_cast<std::size_t>(round)];
    // The fault hits the replica that serves the most streams now (ties:
    // the seed decides), so that every round moves streams.
    int slot = static_cast<int>(rng() % 3);
    {
      int count[3] = {0, 0, 0};
      for (auto& c : checkers) {
        int i = service.SlotOf(c->replica());
        if (i >= 0) ++count[i];
      }
      for (int i = 0; i < 3; ++i) {
        if (count[i] > count[slot]) slot = i;
      }
    }
    const std::int64_t moves_before = migrations();
    kind = k;
    absl::Time fault_end;
    std::string what;
    std::string removed_backend;
    switch (k) {
      case kGraceful:
      case kCancelFirst:
      case kAbrupt: {
        ex::ShutdownMode mode = k == kGraceful ? ex::ShutdownMode::kGraceful
                                : k == kCancelFirst
                                    ? ex::ShutdownMode::kCancelFirst
                                    : ex::ShutdownMode::kAbrupt;
        what = service.slot(slot)->name();
        if (!service.Replace(slot, mode)) return 2;
        fault_end = absl::Now();
        break;
      }
      case kHealth: {
        ex::LedgerReplica* r = service.slot(slot);
        what = r->name();
        r->SetServing(false);
        proxy.RemoveBackend(r->address());
        fault_end = absl::Now();
        break;
      }
      case kBlackHole: {
        ex::LedgerReplica* r = service.slot(slot);
        what = r->name();
        removed_backend = r->address();
        proxy.RemoveBackend(r->address());
        proxy.BlackHole(Select::Backend(r->address()));
        fault_end = absl::Now();
        break;
      }
      case kOutage: {
        what = "all";
        service.StopAll();
        absl::SleepFor(outage);
        for (int i = 0; i < 3; ++i) {
          if (!service.StartSlot(i)) return 2;
        }
        fault_end = absl::Now();
        break;
      }
      case kShed: {
        ex::LedgerReplica* r = service.slot(slot);
        what = r->name();
        r->SetShedding(true);
        absl::SleepFor(short_run ? absl::Milliseconds(500) : absl::Seconds(1));
        r->SetShedding(false);
        fault_end = absl::Now();
        break;
      }
      default:
        return 2;
    }
    // A black-holed stream recovers only through the stall timeout: give it
    // that long (plus slack); otherwise the full recovery budget.
    absl::Duration budget = recover;
    if (k == kBlackHole) {
      budget = have_stall_timeout
                   ? absl::Milliseconds(stall_timeout_ms) * 3 + absl::Seconds(5)
                   : absl::Seconds(5);
    }
    bool recovered = WaitUntil([&] { return all_since(fault_end); }, budget);
    double took = absl::ToDoubleMilliseconds(absl::Now() - fault_end);
    // Undo what stays: the health flip, the black hole.
    if (k == kHealth) {
      ex::LedgerReplica* r = service.slot(slot);
      r->SetServing(true);
      if (!proxy.AddBackend(r->address()).ok()) return 2;
    }
    if (k == kBlackHole) {
      // The partition heals: the silent connections are reset, the replica
      // comes back. Streams still stuck on them now reopen; the round counts
      // as unrecovered all the same.
      proxy.Reset(Select::Backend(removed_backend));
      if (!proxy.AddBackend(removed_backend).ok()) return 2;
      if (!recovered) {
        const absl::Time healed = absl::Now();
        WaitUntil([&] { return all_since(healed); }, recover);
      }
    }
    ++rounds_run[k];
    if (!recovered) ++rounds_unrecovered[k];
    recovery_ms[k] = std::max(recovery_ms[k], took);
    // Steady state before the next round.
    absl::SleepFor(absl::Milliseconds(short_run ? 150 : 300));
    moves[k] += migrations() - moves_before;
    max_pending = std::max(max_pending, clock->pending());
    std::printf("  %6.1fs round %3d %-12s %-4s %s in %.0f ms\n", secs(),
                round + 1, kKindNames[k], what.c_str(),
                recovered ? "recovered" : "NOT RECOVERED", took);
    std::fflush(stdout);
  }

  // The end: every stream still delivering?
  const absl::Time check_from = absl::Now();
  const bool all_delivering =
      WaitUntil([&] { return all_since(check_from); }, recover);
  const std::int64_t heap1 = HeapBytes();
  const std::int64_t rss1 = RssBytes();
  const std::int64_t total_moves = migrations() - migrations0;
  const std::int64_t pending_end = clock->pending();
  max_pending = std::max(max_pending, pending_end);
  const tether::ConnectionPoolStats pool_stats = pool->Stats();

  closing = true;
  for (auto& w : watches) w->Cancel();
  WaitUntil(
      [&] {
        for (auto& c : checkers) {
          if (!c->done()) return false;
        }
        return true;
      },
      absl::Seconds(20));
  watches.clear();
  // Let cancelled calls finish before the pool goes: the last reference to
  // a channel must not be dropped on a gRPC thread.
  absl::SleepFor(absl::Milliseconds(200));
  pool.reset();
  service.StopAll();
  const std::int64_t pending_after = clock->pending();

  Checker::Totals t;
  std::string first_error;
  for (auto& c : checkers) c->AddTo(&t, &first_error);
  int unrecovered = 0;
  for (int k = 0; k < kKinds; ++k) unrecovered += rounds_unrecovered[k];

  std::printf("\n%-13s %6s %11s %13s %14s %9s\n", "fault", "rounds",
              "unrecovered", "max stall ms", "recovery ms", "reopens");
  for (int k = 0; k <= kKinds; ++k) {
    if (k < kKinds && rounds_run[k] == 0) continue;
    if (k == kKinds) {
      std::printf("%-13s %6s %11s %13.0f %14s %9s\n", kKindNames[k], "-", "-",
                  t.max_stall_ms[k], "-", "-");
      continue;
    }
    std::printf("%-13s %6d %11d %13.0f %14.0f %9lld\n", kKindNames[k],
                rounds_run[k], rounds_unrecovered[k], t.max_stall_ms[k],
                recovery_ms[k], static_cast<long long>(moves[k]));
  }
  const double per_k =
      total_moves > 0 ? 1000.0 / static_cast<double>(total_moves) : 0.0;
  const double heap_growth_per_1k = static_cast<double>(heap1 - heap0) * per_k;
  const double rss_growth_per_1k = static_cast<double>(rss1 - rss0) * per_k;
  std::printf(
      "\nmessages: %lld delivered, %lld lost, %lld duplicates, %lld out of "
      "order, %lld bad; app-visible errors %lld%s%s\n",
      static_cast<long long>(t.delivered), static_cast<long long>(t.lost),
      static_cast<long long>(t.duplicates),
      static_cast<long long>(t.out_of_order), static_cast<long long>(t.bad),
      static_cast<long long>(t.errors),
      first_error.empty() ? "" : ", first: ", first_error.c_str());
  std::printf(
      "connections: %d accepted by the proxy, %llu opened by the pool; "
      "timers pending: %lld at the end (max %lld seen), %lld after close\n",
      proxy.total_accepted(),
      static_cast<unsigned long long>(pool_stats.total_opened),
      static_cast<long long>(pending_end), static_cast<long long>(max_pending),
      static_cast<long long>(pending_after));
  std::printf(
      "memory: %lld migrations after warm-up; heap %+.1f KB, RSS %+.1f KB in "
      "all = %+.1f KB heap, %+.1f KB RSS per 1,000 migrations\n",
      static_cast<long long>(total_moves), (heap1 - heap0) / 1024.0,
      (rss1 - rss0) / 1024.0, heap_growth_per_1k / 1024.0,
      rss_growth_per_1k / 1024.0);
  std::printf("every stream delivering at the end: %s; run %.1f s\n",
              all_delivering ? "yes" : "NO", secs());

  const bool pass = t.lost == 0 && t.duplicates == 0 && t.out_of_order == 0 &&
                    t.bad == 0 && t.errors == 0 && unrecovered == 0 &&
                    all_delivering;
  std::string stalls;
  for (int k = 0; k <= kKinds; ++k) {
    if (k < kKinds && rounds_run[k] == 0) continue;
    absl::StrAppend(
        &stalls, stalls.empty() ? "" : ",",
        absl::StrFormat("\"%s\":%.0f", kKindNames[k], t.max_stall_ms[k]));
  }
  std::printf(
      "{\"streams\":%d,\"rounds\":%d,\"seed\":%llu,\"delivered\":%lld,"
      "\"lost\":%lld,\"duplicates\":%lld,\"out_of_order\":%lld,"
      "\"bad\":%lld,\"errors\":%lld,\"unrecovered_rounds\":%d,"
      "\"all_delivering_at_end\":%s,\"max_stall_ms\":{%s},"
      "\"migrations\":%lld,\"proxy_connections\":%d,"
      "\"pool_connections\":%llu,\"timers_pending_end\":%lld,"
      "\"timers_pending_max\":%lld,\"timers_pending_after_close\":%lld,"
      "\"heap_growth_bytes_per_1k_migrations\":%.0f,"
      "\"rss_growth_bytes_per_1k_migrations\":%.0f,\"seconds\":%.1f,"
      "\"pass\":%s}\n",
      n_streams, rounds,
      static_cast<unsigned long long>(absl::GetFlag(FLAGS_seed)),
      static_cast<long long>(t.delivered), static_cast<long long>(t.lost),
      static_cast<long long>(t.duplicates),
      static_cast<long long>(t.out_of_order), static_cast<long long>(t.bad),
      static_cast<long long>(t.errors), unrecovered,
      all_delivering ? "true" : "false", stalls.c_str(),
      static_cast<long long>(total_moves), proxy.total_accepted(),
      static_cast<unsigned long long>(pool_stats.total_opened),
      static_cast<long long>(pending_end), static_cast<long long>(max_pending),
      static_cast<long long>(pending_after), heap_growth_per_1k,
      rss_growth_per_1k, secs(), pass ? "true" : "false");
  std::fflush(stdout);
  return pass ? 0 : 1;
}
