// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// drain_bench: how fast tether streams leave a server that is going away.
//
// --streams tether streams share one ConnectionPool aimed at a loopback
// Service-like proxy (FaultProxy: each new connection goes to the current
// backend). Each rollout starts a new TestServer replica, routes new
// connections to it, and takes the old one away:
//   graceful   Shutdown(5 s): GOAWAY at once, streams cut at +5 s;
//   cancel1st  the ordering bug: every stream ends UNAVAILABLE before any
//              GOAWAY, new streams fail for 300 ms, then Shutdown.
// Per stream and rollout it measures the time from the signal (the Shutdown /
// CancelFirstDrain call) to the first message *delivered* from the new
// replica, and prints p50/p99/max with the floors of issue 3: p99 < 20 ms,
// no attempt on a draining connection after its signal, no app-visible
// error, no loss, no duplicate.
//
//   drain_bench [--streams=64] [--rollouts=20] [--tick_ms=5]
//               [--jitter_ms=5] [--scenario=all|graceful|cancel1st]
//
// Build it RelWithDebInfo (or Release): timings from a Debug build mostly
// measure the Debug build.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "seqstream.grpc.pb.h"
#include "support/fault_proxy.h"
#include "test/support/one_shot.h"
#include "test/support/test_server.h"
#include "tether/connection_pool.h"
#include "tether/observer.h"
#include "tether/reconnecting_stream.h"

namespace {

using tether::support::FaultProxy;
using tether::testsupport::OneShot;
using tether::testsupport::TestServer;
using tether::testsupport::TestServerOptions;
using SeqStream =
    tether::ReconnectingStream<tether::test::WatchRequest, tether::test::Event>;

constexpr absl::Duration kWait = absl::Seconds(30);

struct Flags {
  int streams = 64;
  int rollouts = 20;
  int tick_ms = 5;
  int jitter_ms = 5;
  std::string scenario = "all";
};

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    auto value = [&](absl::string_view name, int* out) {
      const std::string prefix = absl::StrCat("--", name, "=");
      if (!absl::StartsWith(a, prefix)) return false;
      return absl::SimpleAtoi(a.substr(prefix.size()), out) && *out >= 0;
    };
    if (value("streams", &f->streams) || value("rollouts", &f->rollouts) ||
        value("tick_ms", &f->tick_ms) || value("jitter_ms", &f->jitter_ms)) {
      continue;
    }
    if (absl::StartsWith(a, "--scenario=")) {
      f->scenario = std::string(a.substr(std::strlen("--scenario=")));
      continue;
    }
    std::fprintf(stderr, "unknown or invalid flag: %s\n", argv[i]);
    return false;
  }
  return f->streams > 0 && f->rollouts > 0;
}

// Everything the application and the stream observers saw, under one lock
// so that the bench can wait for a condition over all streams.
class Book {
 public:
  struct Attempt {
    std::uint64_t connection_id = 0;
    tether::AttemptReason reason = tether::AttemptReason::kFirst;
    absl::Time started;
    absl::Time first_message = absl::InfiniteFuture();
    bool ended = false;
    bool by_client = false;
  };
  struct Stream {
    std::uint64_t last = 0;
    std::int64_t delivered = 0;
    std::int64_t lost = 0;        // seqs skipped
    std::int64_t duplicates = 0;  // seq <= last delivered
    std::map<std::string, absl::Time> first_from;
    bool done = false;
    absl::Status status;
    std::map<std::uint64_t, Attempt> attempts;  // by attempt number
  };

  explicit Book(int n) : streams_(n) {}

  SeqStream::MessageCallback MessageFn(int i) {
    return [this, i](tether::test::Event&& e) {
      const absl::Time now = absl::Now();
      std::lock_guard<std::mutex> lock(mu_);
      Stream& s = streams_[i];
      if (e.seq() <= s.last) {
        ++s.duplicates;
      } else {
        s.lost += static_cast<std::int64_t>(e.seq() - s.last - 1);
        s.last = e.seq();
      }
      ++s.delivered;
      s.first_from.emplace(e.server(), now);
      cv_.notify_all();
    };
  }
  SeqStream::DoneCallback DoneFn(int i) {
    return [this, i](const absl::Status& st) {
      std::lock_guard<std::mutex> lock(mu_);
      streams_[i].done = true;
      streams_[i].status = st;
      cv_.notify_all();
    };
  }

  class Observer final : public tether::StreamObserver {
   public:
    Observer(Book* book, int i) : book_(book), i_(i) {}
    void OnAttemptStarted(const tether::AttemptInfo& info) override {
      const absl::Time now = absl::Now();
      std::lock_guard<std::mutex> lock(book_->mu_);
      Attempt& a = book_->streams_[i_].attempts[info.attempt];
      a.connection_id = info.connection_id;
      a.reason = info.reason;
      a.started = now;
    }
    void OnFirstMessage(const tether::AttemptInfo& info,
                        absl::Duration) override {
      const absl::Time now = absl::Now();
      std::lock_guard<std::mutex> lock(book_->mu_);
      book_->streams_[i_].attempts[info.attempt].first_message = now;
    }
    void OnAttemptEnded(const tether::AttemptInfo& info, const absl::Status&,
                        tether::EndClass, bool by_client) override {
      std::lock_guard<std::mutex> lock(book_->mu_);
      Attempt& a = book_->streams_[i_].attempts[info.attempt];
      a.ended = true;
      a.by_client = by_client;
    }

   private:
    Book* const book_;
    const int i_;
  };

  // True once every stream delivered from `server` (false on timeout or if
  // a stream ended).
  bool WaitAllFrom(const std::string& server, absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] {
      for (const Stream& s : streams_) {
        if (s.done) return true;
        if (!s.first_from.count(server)) return false;
      }
      return true;
    }) && std::none_of(streams_.begin(), streams_.end(), [](const Stream& s) {
             return s.done;
           });
  }

  std::vector<Stream> Snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    return streams_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Stream> streams_;
};

// The pool's connection events with their times. Owned by the pool; tells
// `gone` when the pool is destroyed.
class ConnLog final : public tether::ConnectionObserver {
 public:
  explicit ConnLog(std::shared_ptr<OneShot> gone) : gone_(std::move(gone)) {}
  ~ConnLog() override { gone_->Signal(); }

  void OnConnectionOpened(std::uint64_t id, absl::string_view) override {
    std::lock_guard<std::mutex> lock(mu_);
    opened_[id] = absl::Now();
  }
  void OnConnectionReady(std::uint64_t id) override {
    std::lock_guard<std::mutex> lock(mu_);
    ready_[id] = absl::Now();
  }
  void OnConnectionDraining(std::uint64_t id, absl::string_view) override {
    std::lock_guard<std::mutex> lock(mu_);
    signalled_.emplace(id, absl::Now());
  }
  void OnConnectionSuspect(std::uint64_t id, const absl::Status&) override {
    std::lock_guard<std::mutex> lock(mu_);
    signalled_.emplace(id, absl::Now());
  }
  // When each connection first turned draining or suspect.
  std::map<std::uint64_t, absl::Time> signalled() const {
    std::lock_guard<std::mutex> lock(mu_);
    return signalled_;
  }
  std::size_t opened() const {
    std::lock_guard<std::mutex> lock(mu_);
    return opened_.size();
  }
  std::map<std::uint64_t, absl::Time> opened_at() const {
    std::lock_guard<std::mutex> lock(mu_);
    return opened_;
  }
  std::map<std::uint64_t, absl::Time> ready_at() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ready_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::uint64_t, absl::Time> opened_;
  std::map<std::uint64_t, absl::Time> ready_;
  std::map<std::uint64_t, absl::Time> signalled_;
  const std::shared_ptr<OneShot> gone_;
};

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  std::size_t i = static_cast<std::size_t>(std::ceil(p * v.size()));
  return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
}

std::string Dist(const std::vector<double>& v) {
  return absl::StrCat("n=", v.size(), " p50 ",
                      absl::StrFormat("%.2f", Pct(v, 0.5)), " ms, p99 ",
                      absl::StrFormat("%.2f", Pct(v, 0.99)), " ms, max ",
                      absl::StrFormat("%.2f", Pct(v, 1.0)), " ms");
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

std::unique_ptr<TestServer> NewReplica(int gen, const Flags& f) {
  TestServerOptions o;
  o.name = absl::StrCat("r", gen);
  o.tick = absl::Milliseconds(f.tick_ms);
  auto s = std::make_unique<TestServer>(o);
  absl::Status st = s->Start();
  if (!st.ok()) {
    std::fprintf(stderr, "replica %d: %s\n", gen, st.ToString().c_str());
    std::exit(1);
  }
  return s;
}

// Returns true when every floor holds.
bool RunScenario(const Flags& f, bool cancel_first) {
  const char* name = cancel_first ? "cancel1st" : "graceful";
  FaultProxy proxy;
  if (!proxy.Start().ok()) std::exit(1);
  int gen = 0;
  std::unique_ptr<TestServer> current = NewReplica(gen, f);
  if (!proxy.SetBackend(current->address()).ok()) std::exit(1);

  auto pool_gone = std::make_shared<OneShot>();
  auto conns_owner = std::make_shared<ConnLog>(pool_gone);
  ConnLog* conns = conns_owner.get();  // valid while the pool lives
  tether::ConnectionPoolOptions po;
  po.target = proxy.address();
  po.observer = std::move(conns_owner);
  std::shared_ptr<tether::ConnectionPool> pool =
      tether::ConnectionPool::Create(std::move(po)).value();

  Book book(f.streams);
  std::vector<std::unique_ptr<SeqStream>> streams;
  for (int i = 0; i < f.streams; ++i) {
    SeqStream::Spec spec;
    spec.start = [](const std::shared_ptr<grpc::Channel>& ch,
                    grpc::ClientContext* ctx,
                    const tether::test::WatchRequest* req,
                    grpc::ClientReadReactor<tether::test::Event>* r) {
      tether::test::SeqStream::NewStub(ch)->async()->Watch(ctx, req, r);
    };
    spec.request.set_key(absl::StrCat("k", i));
    spec.sequence_of = [](const tether::test::Event& e) {
      return absl::optional<std::uint64_t>(e.seq());
    };
    spec.resume_after = [](tether::test::WatchRequest& r, std::uint64_t s) {
      r.set_after_seq(s);
    };
    tether::ReconnectingStreamOptions so;
    so.observer = std::make_shared<Book::Observer>(&book, i);
    so.reopen_after_progress_jitter = absl::Milliseconds(f.jitter_ms);
    streams.push_back(SeqStream::Start(pool, std::move(spec), std::move(so),
                                       book.MessageFn(i), book.DoneFn(i))
                          .value());
  }
  if (!book.WaitAllFrom(current->name(), kWait)) {
    std::fprintf(stderr, "%s: streams did not start\n", name);
    std::exit(1);
  }

  std::vector<double> to_delivered;   // signal -> first delivered, new replica
  std::vector<double> to_received;    // signal -> first message received
  std::vector<double> signal_seen;    // signal -> pool marks connection
  std::vector<double> seen_to_deliv;  // pool mark -> first delivered
  std::vector<double> to_started;     // signal -> new attempt started
  std::vector<double> started_to_rx;  // new attempt started -> first message
  std::vector<double> to_opened;      // signal -> replacement connection
  std::vector<double> to_ready;       //   opened, READY
  std::int64_t late_attempts = 0;     // attempts on a signalled connection
  std::int64_t late_at_server = 0;    // watches reaching the old replica
  std::int64_t failed_attempts = 0;   // ended before a message, not by us
  int timeouts = 0;
  for (int k = 1; k <= f.rollouts; ++k) {
    std::unique_ptr<TestServer> next = NewReplica(++gen, f);
    if (!proxy.SetBackend(next->address()).ok()) std::exit(1);
    const std::int64_t watches_before = current->stats().watches_started;
    const auto marked_before = conns->signalled();
    const auto opened_before = conns->opened_at();
    const absl::Time t0 = absl::Now();
    if (cancel_first) {
      current->CancelFirstDrain(absl::Milliseconds(300));
    } else {
      current->ShutdownAsync(absl::Seconds(5));
    }
    if (!book.WaitAllFrom(next->name(), kWait)) ++timeouts;
    current->WaitForStopped(kWait);
    late_at_server += current->stats().watches_started - watches_before;
    current.reset();

    // Connections marked draining/suspect by this rollout, and when.
    std::map<std::uint64_t, absl::Time> marked;
    for (const auto& e : conns->signalled()) {
      if (!marked_before.count(e.first)) marked.insert(e);
    }
    absl::Time first_mark = absl::InfiniteFuture();
    for (const auto& e : marked) first_mark = std::min(first_mark, e.second);
    if (first_mark != absl::InfiniteFuture()) {
      signal_seen.push_back(Ms(first_mark - t0));
    }
    const auto ready = conns->ready_at();
    for (const auto& e : conns->opened_at()) {
      if (opened_before.count(e.first)) continue;
      to_opened.push_back(Ms(e.second - t0));
      auto r = ready.find(e.first);
      if (r != ready.end()) to_ready.push_back(Ms(r->second - t0));
    }
    for (const Book::Stream& s : book.Snapshot()) {
      auto it = s.first_from.find(next->name());
      if (it != s.first_from.end()) {
        to_delivered.push_back(Ms(it->second - t0));
        if (first_mark != absl::InfiniteFuture()) {
          seen_to_deliv.push_back(Ms(it->second - first_mark));
        }
      }
      absl::Time first_rx = absl::InfiniteFuture();
      for (const auto& a : s.attempts) {
        const Book::Attempt& at = a.second;
        if (at.started < t0) continue;
        auto m = marked.find(at.connection_id);
        if (m != marked.end()) ++late_attempts;
        if (m == marked.end()) {
          if (first_rx == absl::InfiniteFuture() &&
              at.first_message != absl::InfiniteFuture()) {
            to_started.push_back(Ms(at.started - t0));
            started_to_rx.push_back(Ms(at.first_message - at.started));
          }
          first_rx = std::min(first_rx, at.first_message);
        }
        if (at.ended && !at.by_client &&
            at.first_message == absl::InfiniteFuture()) {
          ++failed_attempts;
        }
      }
      if (first_rx != absl::InfiniteFuture()) {
        to_received.push_back(Ms(first_rx - t0));
      }
    }
    current = std::move(next);
  }

  std::int64_t errors = 0, lost = 0, dups = 0, attempts = 0, migrations = 0,
               dropped = 0;
  for (const Book::Stream& s : book.Snapshot()) {
    if (s.done) ++errors;
    lost += s.lost;
    dups += s.duplicates;
    attempts += static_cast<std::int64_t>(s.attempts.size());
  }
  for (const auto& s : streams) {
    const tether::StreamStats st = s->stats();
    migrations += static_cast<std::int64_t>(st.migrations);
    dropped += static_cast<std::int64_t>(st.duplicates_dropped);
  }
  const double p99 = Pct(to_delivered, 0.99);
  const bool ok = p99 < 20.0 && late_attempts == 0 && errors == 0 &&
                  lost == 0 && dups == 0 && timeouts == 0;
  std::printf(
      "\n[%s] %d streams x %d rollouts, tick %d ms, reopen jitter %d ms"
      "\n",
      name, f.streams, f.rollouts, f.tick_ms, f.jitter_ms);
  std::printf("  signal -> first message delivered from new replica: %s\n",
              Dist(to_delivered).c_str());
  std::printf("  signal -> first message received on the new attempt: %s\n",
              Dist(to_received).c_str());
  std::printf("  signal -> pool marks the connection %s: %s\n",
              cancel_first ? "suspect" : "draining", Dist(signal_seen).c_str());
  std::printf("  pool mark -> first message delivered: %s\n",
              Dist(seen_to_deliv).c_str());
  std::printf("  breakdown: signal -> new attempt started: %s\n",
              Dist(to_started).c_str());
  std::printf("             new attempt started -> its first message: %s\n",
              Dist(started_to_rx).c_str());
  std::printf("             signal -> replacement connection opened: %s\n",
              Dist(to_opened).c_str());
  std::printf("             signal -> replacement connection READY: %s\n",
              Dist(to_ready).c_str());
  std::printf(
      "  attempts on a draining/suspect connection after its signal: "
      "%lld (client side); watches reaching the old replica after the "
      "signal: %lld\n",
      static_cast<long long>(late_attempts),
      static_cast<long long>(late_at_server));
  std::printf(
      "  attempts: %lld total, %lld migrations, %lld failed before a "
      "message; connections opened: %zu; duplicates dropped by tether:"
      " %lld\n",
      static_cast<long long>(attempts), static_cast<long long>(migrations),
      static_cast<long long>(failed_attempts), conns->opened(),
      static_cast<long long>(dropped));
  std::printf(
      "  app-visible errors %lld, lost %lld, duplicates %lld, "
      "rollouts timed out %d\n",
      static_cast<long long>(errors), static_cast<long long>(lost),
      static_cast<long long>(dups), timeouts);
  std::printf(
      "  floors (p99 < 20 ms, 0 attempts on draining, 0 errors/lost/"
      "dup): %s\n",
      ok ? "MET" : "MISSED");
  std::fflush(stdout);
  streams.clear();
  std::weak_ptr<tether::ConnectionPool> weak_pool = pool;
  pool.reset();  // calls in flight still hold it for a moment
  if (!pool_gone->Wait(kWait)) {
    int open_attempts = 0;
    for (const Book::Stream& s : book.Snapshot()) {
      for (const auto& a : s.attempts) open_attempts += a.second.ended ? 0 : 1;
    }
    std::fprintf(stderr,
                 "%s: the pool outlived its streams by %s: %ld references "
                 "left, %d attempts not ended\n",
                 name, absl::FormatDuration(kWait).c_str(),
                 weak_pool.use_count(), open_attempts);
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  if (!ParseFlags(argc, argv, &f)) return 2;
  bool ok = true;
  if (f.scenario == "all" || f.scenario == "graceful") {
    ok = RunScenario(f, /*cancel_first=*/false) && ok;
  }
  if (f.scenario == "all" || f.scenario == "cancel1st") {
    ok = RunScenario(f, /*cancel_first=*/true) && ok;
  }
  return ok ? 0 : 1;
}
