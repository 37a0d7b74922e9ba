// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// drain_bench: how fast tether streams leave a server that is going away,
// against a cold connect measured on the same servers in the same run.
//
// --streams tether streams share one ConnectionPool aimed at a loopback
// Service-like proxy (FaultProxy: each new connection goes to the current
// backend). Each rollout starts a new TestServer replica, routes new
// connections to it, and takes an old one away:
//   graceful   Shutdown(5 s): GOAWAY at once, streams cut at +5 s;
//   cancel1st  the ordering bug: every stream ends UNAVAILABLE before any
//              GOAWAY, new streams fail for 300 ms, then Shutdown.
// Each runs twice: without standby connections (the pool has one connection
// and must connect a new one on the critical path) and with
// `standby_connections = 1` (the pool keeps a second READY connection, to
// the previous replica; the rollout then takes away the oldest replica, the
// one most streams are on, and they move to the standby).
//
// Per stream on the replica taken away and per rollout it measures the time
// from the signal (the Shutdown / CancelFirstDrain call) to the first
// message *delivered* from another replica. The anchor, "cold", is measured
// on the same proxy and servers after each rollout: a fresh channel (its own
// subchannel) plus one raw gRPC call, from before the channel is created to
// its first message. Two more anchors, measured right after it, start as
// many raw calls as the rollout moved streams, together, each timed to its
// own first message: "cold_n" on a fresh channel (what a client without
// tether pays to reopen that many streams), "warm_n" on a channel already
// connected (the same with a standby connection and no notice to wait
// for). "notice" is the signal -> the pool marking the connection draining
// or suspect; a move is timed from the stream's own notice: that mark, or
// its attempt's end when that came first, and split in two: the notice to
// the start of the move's call (*_notice_to_start_p99_ms, tether's part)
// and that call to its first message (*_call_p99_ms, gRPC's and the
// server's). The last line is one JSON object with the figures
// (cold_first_msg_p99_ms, cold_n_first_msg_p99_ms, warm_n_first_msg_p99_ms,
// notice_p99_ms, graceful_p99_ms, cancel_first_p99_ms, their standby
// variants, each p99 over the single cold call (*_vs_cold) and over cold_n
// (*_vs_cold_n), attempts_on_draining, errors, lost, duplicates, ...).
//
//   drain_bench [--streams=64] [--rollouts=20] [--tick_ms=5]
//               [--jitter_ms=5] [--cold_samples=5] [--pace_ms=400]
//               [--scenario=all|graceful|cancel1st] [--standby=both|0|1]
//               [--trace]
//
// Build it RelWithDebInfo (or Release): timings from a Debug build mostly
// measure the Debug build.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "support/figures.h"
#include "grpcpp/grpcpp.h"
#include "seqstream.grpc.pb.h"
#include "support/fault_proxy.h"
#include "test/support/one_shot.h"
#include "test/support/test_server.h"
#include "tether/connection_pool.h"
#include "tether/observer.h"
#include "tether/reconnecting_stream.h"

ABSL_FLAG(int, streams, 64, "tether streams over the one pool");
ABSL_FLAG(int, rollouts, 20, "rollouts per scenario");
ABSL_FLAG(int, tick_ms, 5, "server tick (one event per stream per tick)");
ABSL_FLAG(int, jitter_ms, 5,
          "ReconnectingStreamOptions::reopen_after_progress_jitter, ms");
ABSL_FLAG(bool, hold_fallback, true,
          "ReconnectingStreamOptions::migration_hold_fallback");
ABSL_FLAG(int, cold_samples, 5,
          "cold connects (fresh channel + call) measured after each rollout");
ABSL_FLAG(int, pace_ms, 400,
          "pause before each rollout (connections stable > 300 ms)");
ABSL_FLAG(std::string, scenario, "all", "all, graceful or cancel1st");
ABSL_FLAG(std::string, standby, "both",
          "both, 0 or 1: ConnectionPoolOptions::standby_connections");
ABSL_FLAG(bool, trace, false,
          "print each rollout's timeline to stderr: the connections it "
          "opened (and when each turned READY), and each moved stream's "
          "attempts (start, first message, end), in ms after the signal");

namespace {

using tether::support::Distribution;
using tether::support::Percentile;
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
  int cold_samples = 5;
  int pace_ms = 400;
  bool hold_fallback = true;
  bool trace = false;
};

// Everything the application and the stream observers saw, under one lock
// so that the bench can wait for a condition over all streams.
class Book {
 public:
  struct Attempt {
    std::uint64_t connection_id = 0;
    absl::Time started;
    absl::Time first_message = absl::InfiniteFuture();
    bool ended = false;
    absl::Time ended_at = absl::InfiniteFuture();
    bool by_client = false;
  };
  struct Stream {
    std::uint64_t last = 0;
    std::int64_t delivered = 0;
    std::int64_t lost = 0;        // seqs skipped
    std::int64_t duplicates = 0;  // seq <= last delivered
    std::string server;           // of the last message delivered
    bool done = false;
    absl::Status status;
    // For the rollout under way: was the stream on the replica going away,
    // and when did it first deliver from another one.
    bool affected = false;
    absl::Time moved = absl::InfiniteFuture();
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
      // Wake the waiting bench thread only when something it waits for
      // changed (not on every message: that contention would be measured).
      bool changed = s.server != e.server();
      s.server = e.server();
      if (!leaving_.empty() && e.server() != leaving_ &&
          s.moved == absl::InfiniteFuture()) {
        s.moved = now;
        changed = true;
      }
      if (changed) cv_.notify_all();
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
      const absl::Time now = absl::Now();
      std::lock_guard<std::mutex> lock(book_->mu_);
      Attempt& a = book_->streams_[i_].attempts[info.attempt];
      a.ended = true;
      a.ended_at = now;
      a.by_client = by_client;
    }

   private:
    Book* const book_;
    const int i_;
  };

  // The replica `server` is about to go away: remember which streams are on
  // it. Returns how many are.
  int Arm(const std::string& server) {
    std::lock_guard<std::mutex> lock(mu_);
    leaving_ = server;
    int n = 0;
    for (Stream& s : streams_) {
      s.affected = s.server == server;
      s.moved = absl::InfiniteFuture();
      n += s.affected ? 1 : 0;
    }
    return n;
  }

  // True once every stream that was on the replica going away delivered
  // from another one (false on timeout or if a stream ended).
  bool WaitAllMoved(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] {
      for (const Stream& s : streams_) {
        if (s.done) return true;
        if (s.affected && s.moved == absl::InfiniteFuture()) return false;
      }
      return true;
    }) && std::none_of(streams_.begin(), streams_.end(), [](const Stream& s) {
             return s.done;
           });
  }

  // True once every stream delivered from `server` (any server if empty).
  bool WaitAllOn(const std::string& server, absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] {
      for (const Stream& s : streams_) {
        if (s.done) return true;
        if (s.server.empty() || (!server.empty() && s.server != server)) {
          return false;
        }
      }
      return true;
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
  std::string leaving_;
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
    ready_.emplace(id, absl::Now());
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
  std::map<std::uint64_t, absl::Time> opened_at() const {
    std::lock_guard<std::mutex> lock(mu_);
    return opened_;
  }
  // When each connection first turned READY.
  std::map<std::uint64_t, absl::Time> ready_at() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ready_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::uint64_t, absl::Time> opened_;
  std::map<std::uint64_t, absl::Time> signalled_;
  std::map<std::uint64_t, absl::Time> ready_;
  const std::shared_ptr<OneShot> gone_;
};

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// Milliseconds after `t0`, or -1 for a time that did not come.
double MsAfter(absl::Time t, absl::Time t0) {
  return t == absl::InfiniteFuture() ? -1.0 : Ms(t - t0);
}

// One rollout's timeline (--trace): when the pool noticed, opened
// connections and saw them READY, and for each stream that had to move,
// its attempts since the signal `t0` (connection, start, first message,
// end; -1: none).
void PrintTrace(int rollout, absl::Time t0, absl::Time noticed,
                const std::map<std::uint64_t, absl::Time>& opened,
                const std::map<std::uint64_t, absl::Time>& ready,
                const std::vector<Book::Stream>& streams) {
  std::fprintf(stderr, "rollout %d: noticed %.2f ms\n", rollout,
               MsAfter(noticed, t0));
  for (const auto& [id, at] : opened) {
    const auto r = ready.find(id);
    std::fprintf(stderr, "  connection %llu opened %.2f, ready %.2f\n",
                 static_cast<unsigned long long>(id), MsAfter(at, t0),
                 r == ready.end() ? -1.0 : MsAfter(r->second, t0));
  }
  for (std::size_t i = 0; i < streams.size(); ++i) {
    const Book::Stream& s = streams[i];
    if (!s.affected) continue;
    std::string line = absl::StrFormat("  stream %d moved %.2f", i,
                                       MsAfter(s.moved, t0));
    for (const auto& [n, a] : s.attempts) {
      if (a.started < t0 && a.ended_at < t0) continue;  // before the signal
      absl::StrAppendFormat(
          &line, " | attempt %d on %llu: start %.2f, first %.2f, end %.2f%s",
          n, static_cast<unsigned long long>(a.connection_id),
          a.started < t0 ? -1.0 : Ms(a.started - t0),
          a.first_message < t0 ? -1.0 : MsAfter(a.first_message, t0),
          MsAfter(a.ended_at, t0), a.by_client ? " (by the client)" : "");
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

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

// One raw call that reports its first message and its end.
class ColdReader final
    : public grpc::ClientReadReactor<tether::test::Event> {
 public:
  void OnReadDone(bool ok) override {
    if (ok) first_at_ = absl::Now();
    first_.Signal();  // no further read: the call is cancelled next
  }
  void OnDone(const grpc::Status&) override { done_.Signal(); }

  grpc::ClientContext context;
  tether::test::WatchRequest request;
  tether::test::Event event;
  OneShot first_;
  OneShot done_;
  absl::Time first_at_ = absl::InfiniteFuture();
};

// A cold start of `n` streams, as a client without tether would reopen the
// streams of a replica going away: a fresh channel (its own subchannel, so
// no connection is shared with anything else) and `n` calls started
// together, each measured from before the channel exists to its own first
// message. Empty on failure.
// With `warm`, the channel is connected first and the clock starts after:
// the floor for streams that move to a READY standby connection.
std::vector<double> ColdBatchFirstMessageMs(const std::string& target, int id,
                                            int n, bool warm = false) {
  absl::Time t0 = absl::Now();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetString("tether.bench.cold", absl::StrCat(id));
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      target, grpc::InsecureChannelCredentials(), args);
  if (warm) {
    if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + kWait))) {
      return {};
    }
    t0 = absl::Now();
  }
  auto stub = tether::test::SeqStream::NewStub(channel);
  std::vector<std::unique_ptr<ColdReader>> readers;
  for (int i = 0; i < n; ++i) {
    readers.push_back(std::make_unique<ColdReader>());
    ColdReader* r = readers.back().get();
    r->request.set_key(absl::StrCat("cold", id, "-", i));
    stub->async()->Watch(&r->context, &r->request, r);
    r->StartRead(&r->event);
    r->StartCall();
  }
  bool ok = true;
  for (auto& r : readers) ok = r->first_.Wait(kWait) && ok;
  for (auto& r : readers) r->context.TryCancel();
  for (auto& r : readers) r->done_.Wait(kWait);
  std::vector<double> out;
  for (auto& r : readers) {
    if (r->first_at_ == absl::InfiniteFuture()) ok = false;
    out.push_back(Ms(r->first_at_ - t0));
  }
  return ok ? out : std::vector<double>{};
}

// A cold connect: the same with one call. -1 on failure.
double ColdFirstMessageMs(const std::string& target, int id) {
  const std::vector<double> one = ColdBatchFirstMessageMs(target, id, 1);
  return one.empty() ? -1 : one[0];
}

struct ScenarioResult {
  std::vector<double> to_delivered;  // signal -> delivered from elsewhere
  std::vector<double> cold;          // cold connect anchors (one call)
  std::vector<double> cold_n;        // cold start of as many streams as
                                     // the rollout moved (one channel)
  std::vector<double> warm_n;        // the same on a connected channel
  std::vector<double> to_noticed;    // signal -> the pool marked the
                                     // connection draining or suspect
  std::vector<double> notice_to_delivered;  // the stream's notice (that
                                            // mark, or its own attempt's
                                            // end when first) -> delivered
                                            // from elsewhere, per stream
  std::vector<double> to_started;    // signal -> the move's attempt started
  std::vector<double> notice_to_started;  // the stream's notice -> the
                                          // move's attempt started: what
                                          // tether adds before gRPC's call
  std::vector<double> to_opened;     // signal -> a connection opened
  std::vector<double> started_to_first;  // that attempt -> first message
  std::int64_t late_attempts = 0;    // attempts on a signalled connection
  std::int64_t errors = 0, lost = 0, duplicates = 0;
  int timeouts = 0;
  int affected_min = 1 << 30;  // streams on the replica taken away
  std::uint64_t connections_opened = 0;
  std::int64_t opened_on_critical_path = 0;  // connections opened between
                                             // signal and last stream moved
  std::int64_t moves_on_fresh_connection = 0;  // moves whose attempt ran on
                                               // a connection opened after
                                               // the signal
};

ScenarioResult RunScenario(const Flags& f, bool cancel_first, int standby) {
  const std::string name =
      absl::StrCat(cancel_first ? "cancel1st" : "graceful",
                   standby > 0 ? absl::StrCat(", standby ", standby) : "");
  ScenarioResult out;
  FaultProxy proxy;
  if (!proxy.Start().ok()) std::exit(1);
  int gen = 0;
  std::deque<std::unique_ptr<TestServer>> replicas;  // oldest first
  replicas.push_back(NewReplica(gen, f));
  if (!proxy.SetBackend(replicas.back()->address()).ok()) std::exit(1);

  auto pool_gone = std::make_shared<OneShot>();
  auto conns_owner = std::make_shared<ConnLog>(pool_gone);
  ConnLog* conns = conns_owner.get();  // valid while the pool lives
  tether::ConnectionPoolOptions po;
  po.target = proxy.address();
  po.observer = std::move(conns_owner);
  po.standby_connections = standby;
  std::shared_ptr<tether::ConnectionPool> pool =
      tether::ConnectionPool::Create(std::move(po)).value();
  auto wait_ready = [&](std::size_t n) {
    const absl::Time end = absl::Now() + kWait;
    while (pool->Stats().ready < n && absl::Now() < end) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    return pool->Stats().ready >= n;
  };
  if (standby > 0) {
    // The standby connections, opened once streams exist, go to the next
    // replica: a rollout then finds one READY elsewhere.
    if (!wait_ready(1)) std::exit(1);
    replicas.push_back(NewReplica(++gen, f));
    if (!proxy.SetBackend(replicas.back()->address()).ok()) std::exit(1);
  }

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
    so.migration_hold_fallback = f.hold_fallback;
    streams.push_back(SeqStream::Start(pool, std::move(spec), std::move(so),
                                       book.MessageFn(i), book.DoneFn(i))
                          .value());
  }
  if (!book.WaitAllOn(standby == 0 ? replicas.front()->name() : "", kWait)) {
    std::fprintf(stderr, "%s: streams did not start\n", name.c_str());
    std::exit(1);
  }

  int cold_id = 0;
  for (int k = 1; k <= f.rollouts; ++k) {
    // Every connection the pool wants is READY before the rollout.
    if (!wait_ready(1 + static_cast<std::size_t>(standby))) {
      std::fprintf(stderr, "%s: the pool has %zu READY connections\n",
                   name.c_str(), pool->Stats().ready);
    }
    // Rollouts at a realistic pace: the pool treats a connection lost less
    // than probe_max_backoff (300 ms) after it became usable as a failing
    // one and paces its replacement (storm protection); a
    // healthy one lost later is replaced at once.
    absl::SleepFor(absl::Milliseconds(f.pace_ms));
    std::unique_ptr<TestServer>& old = replicas.front();
    replicas.push_back(NewReplica(++gen, f));
    if (!proxy.SetBackend(replicas.back()->address()).ok()) std::exit(1);
    const int affected = book.Arm(old->name());
    out.affected_min = std::min(out.affected_min, affected);
    const auto marked_before = conns->signalled();
    const auto opened_before = conns->opened_at();
    const absl::Time t0 = absl::Now();
    if (cancel_first) {
      old->CancelFirstDrain(absl::Milliseconds(300));
    } else {
      old->ShutdownAsync(absl::Seconds(5));
    }
    if (!book.WaitAllMoved(kWait)) ++out.timeouts;
    const absl::Time t_moved = absl::Now();
    old->WaitForStopped(kWait);
    replicas.pop_front();

    // Connections marked draining/suspect by this rollout.
    std::map<std::uint64_t, absl::Time> marked;
    for (const auto& e : conns->signalled()) {
      if (!marked_before.count(e.first)) marked.insert(e);
    }
    absl::Time noticed = absl::InfiniteFuture();
    for (const auto& e : marked) noticed = std::min(noticed, e.second);
    if (noticed != absl::InfiniteFuture()) {
      out.to_noticed.push_back(Ms(noticed - t0));
    }
    // Connections opened by this rollout.
    std::map<std::uint64_t, absl::Time> opened;
    for (const auto& e : conns->opened_at()) {
      if (!opened_before.count(e.first)) opened.insert(e);
    }
    for (const auto& e : opened) {
      if (e.second < t_moved) {
        ++out.opened_on_critical_path;
        out.to_opened.push_back(Ms(e.second - t0));
      }
    }
    const std::vector<Book::Stream> streams = book.Snapshot();
    if (f.trace) {
      PrintTrace(k, t0, noticed, opened, conns->ready_at(), streams);
    }
    for (const Book::Stream& s : streams) {
      if (s.affected && s.moved != absl::InfiniteFuture()) {
        out.to_delivered.push_back(Ms(s.moved - t0));
        // The stream's notice: the pool's, or its own attempt's end when
        // that came first (one stream cut by a cancel-first server moves on
        // its own end; the pool weighs it as weak evidence and may mark
        // the connection only at the server's GOAWAY, after the move).
        absl::Time notice = noticed;
        for (const auto& a : s.attempts) {
          if (a.second.ended && !a.second.by_client &&
              a.second.ended_at >= t0) {
            notice = std::min(notice, a.second.ended_at);
          }
        }
        if (notice != absl::InfiniteFuture()) {
          out.notice_to_delivered.push_back(Ms(s.moved - notice));
        }
        // The breakdown: when the move's attempt started (after the signal
        // and after the notice), and how long its first message took after
        // that.
        for (const auto& a : s.attempts) {
          if (a.second.started < t0) continue;
          out.to_started.push_back(Ms(a.second.started - t0));
          if (notice != absl::InfiniteFuture()) {
            out.notice_to_started.push_back(Ms(a.second.started - notice));
          }
          if (!opened_before.count(a.second.connection_id)) {
            ++out.moves_on_fresh_connection;  // waited for a connect
          }
          if (a.second.first_message != absl::InfiniteFuture()) {
            out.started_to_first.push_back(
                Ms(a.second.first_message - a.second.started));
          }
          break;
        }
      }
      for (const auto& a : s.attempts) {
        const Book::Attempt& at = a.second;
        if (at.started < t0) continue;
        auto m = marked.find(at.connection_id);
        if (m != marked.end()) ++out.late_attempts;
      }
    }
    // The anchor, on the same proxy and replicas.
    for (int c = 0; c < f.cold_samples; ++c) {
      const double ms = ColdFirstMessageMs(proxy.address(), ++cold_id);
      if (ms >= 0) out.cold.push_back(ms);
    }
    if (affected > 0) {
      const std::vector<double> batch =
          ColdBatchFirstMessageMs(proxy.address(), ++cold_id, affected);
      out.cold_n.insert(out.cold_n.end(), batch.begin(), batch.end());
      const std::vector<double> warm = ColdBatchFirstMessageMs(
          proxy.address(), ++cold_id, affected, /*warm=*/true);
      out.warm_n.insert(out.warm_n.end(), warm.begin(), warm.end());
    }
  }

  for (const Book::Stream& s : book.Snapshot()) {
    if (s.done) ++out.errors;
    out.lost += s.lost;
    out.duplicates += s.duplicates;
  }
  out.connections_opened = pool->Stats().total_opened;
  const double p99 = Percentile(out.to_delivered, 0.99);
  const double cold99 = Percentile(out.cold, 0.99);
  std::printf(
      "\n[%s] %d streams x %d rollouts, tick %d ms, reopen jitter %d ms, "
      "at least %d streams on the replica taken away\n",
      name.c_str(), f.streams, f.rollouts, f.tick_ms, f.jitter_ms,
      out.affected_min);
  std::printf("  signal -> first message delivered from another replica: %s\n",
              Distribution(out.to_delivered).c_str());
  std::printf("    signal -> the pool marked the connection: %s\n",
              Distribution(out.to_noticed).c_str());
  std::printf(
      "    the stream's notice (the pool's mark, or its own attempt's end "
      "when first) -> first message delivered: %s\n",
      Distribution(out.notice_to_delivered).c_str());
  std::printf("      of which the notice -> the move's attempt started: %s\n",
              Distribution(out.notice_to_started).c_str());
  std::printf("    signal -> a new connection opened: %s\n",
              Distribution(out.to_opened).c_str());
  std::printf("    signal -> the move's attempt started: %s\n",
              Distribution(out.to_started).c_str());
  std::printf("    that attempt started -> its first message: %s\n",
              Distribution(out.started_to_first).c_str());
  std::printf("  cold connect (fresh channel + call -> first message): %s\n",
              Distribution(out.cold).c_str());
  std::printf(
      "  cold start of as many streams (fresh channel + one call each, "
      "started together -> each first message): %s\n",
      Distribution(out.cold_n).c_str());
  std::printf(
      "  warm start of as many streams (a connected channel, one call each, "
      "started together -> each first message): %s\n",
      Distribution(out.warm_n).c_str());
  std::printf("  p99 ratio to cold: %.2f; to the cold start of as many: %.2f\n",
              p99 / cold99, p99 / Percentile(out.cold_n, 0.99));
  std::printf(
      "  attempts on a draining/suspect connection after its signal: %lld; "
      "connections opened %llu, of which between a signal and the last "
      "stream moved: %lld; moves that waited for a new connection: %lld\n",
      static_cast<long long>(out.late_attempts),
      static_cast<unsigned long long>(out.connections_opened),
      static_cast<long long>(out.opened_on_critical_path),
      static_cast<long long>(out.moves_on_fresh_connection));
  std::printf(
      "  app-visible errors %lld, lost %lld, duplicates %lld, rollouts timed "
      "out %d\n",
      static_cast<long long>(out.errors), static_cast<long long>(out.lost),
      static_cast<long long>(out.duplicates), out.timeouts);
  std::fflush(stdout);
  streams.clear();
  std::weak_ptr<tether::ConnectionPool> weak_pool = pool;
  pool.reset();  // calls in flight still hold it for a moment
  if (!pool_gone->Wait(kWait)) {
    std::fprintf(stderr,
                 "%s: the pool outlived its streams by %s: %ld references "
                 "left\n",
                 name.c_str(), absl::FormatDuration(kWait).c_str(),
                 weak_pool.use_count());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  Flags f;
  f.streams = absl::GetFlag(FLAGS_streams);
  f.rollouts = absl::GetFlag(FLAGS_rollouts);
  f.tick_ms = absl::GetFlag(FLAGS_tick_ms);
  f.jitter_ms = absl::GetFlag(FLAGS_jitter_ms);
  f.cold_samples = absl::GetFlag(FLAGS_cold_samples);
  f.pace_ms = absl::GetFlag(FLAGS_pace_ms);
  f.hold_fallback = absl::GetFlag(FLAGS_hold_fallback);
  f.trace = absl::GetFlag(FLAGS_trace);
  const std::string scenario = absl::GetFlag(FLAGS_scenario);
  const std::string standby = absl::GetFlag(FLAGS_standby);
  if (f.streams <= 0 || f.rollouts <= 0 || f.tick_ms < 0 || f.jitter_ms < 0 ||
      f.cold_samples < 1 || f.pace_ms < 0 ||
      (scenario != "all" && scenario != "graceful" &&
       scenario != "cancel1st") ||
      (standby != "both" && standby != "0" && standby != "1")) {
    std::fprintf(stderr, "invalid flags (see the header of drain_bench.cc)\n");
    return 2;
  }
  std::vector<double> cold, cold_n, warm_n, noticed;
  std::map<std::string, double> p99s, from_notice;
  std::int64_t late = 0, errors = 0, lost = 0, dups = 0, timeouts = 0;
  tether::support::JsonLine json;
  for (int sb : {0, 1}) {
    if ((sb == 0 && standby == "1") || (sb == 1 && standby == "0")) continue;
    for (bool cancel_first : {false, true}) {
      if ((cancel_first && scenario == "graceful") ||
          (!cancel_first && scenario == "cancel1st")) {
        continue;
      }
      ScenarioResult r = RunScenario(f, cancel_first, sb);
      cold.insert(cold.end(), r.cold.begin(), r.cold.end());
      cold_n.insert(cold_n.end(), r.cold_n.begin(), r.cold_n.end());
      warm_n.insert(warm_n.end(), r.warm_n.begin(), r.warm_n.end());
      noticed.insert(noticed.end(), r.to_noticed.begin(), r.to_noticed.end());
      late += r.late_attempts;
      errors += r.errors;
      lost += r.lost;
      dups += r.duplicates;
      timeouts += r.timeouts;
      const std::string key = absl::StrCat(
          cancel_first ? "cancel_first" : "graceful", sb > 0 ? "_standby" : "");
      json.Set(key + "_p50_ms", Percentile(r.to_delivered, 0.5));
      json.Set(key + "_p99_ms", Percentile(r.to_delivered, 0.99));
      from_notice[key] = Percentile(r.notice_to_delivered, 0.99);
      json.Set(key + "_from_notice_p99_ms", from_notice[key]);
      // The two parts of a move from the notice: tether's (to the start of
      // the new call) and gRPC's call (to its first message).
      json.Set(key + "_notice_to_start_p99_ms",
               Percentile(r.notice_to_started, 0.99));
      json.Set(key + "_call_p99_ms", Percentile(r.started_to_first, 0.99));
      p99s[key] = Percentile(r.to_delivered, 0.99);
      json.Set(key + "_moves_on_new_connection", r.moves_on_fresh_connection);
    }
  }
  const double cold99 = Percentile(cold, 0.99);
  std::printf("\ncold connect over all scenarios: %s\n",
              Distribution(cold).c_str());
  const double cold_n99 = Percentile(cold_n, 0.99);
  std::printf("cold start of as many streams over all scenarios: %s\n",
              Distribution(cold_n).c_str());
  const double warm_n99 = Percentile(warm_n, 0.99);
  std::printf("warm start of as many streams over all scenarios: %s\n",
              Distribution(warm_n).c_str());
  std::printf("signal -> the pool marked the connection: %s\n",
              Distribution(noticed).c_str());
  // What raw gRPC itself does here: the same calls started together on an
  // already connected channel, with no notice to wait for, against one call.
  std::printf("raw gRPC, warm start of as many p99 / cold p99 = %.2f\n",
              warm_n99 / cold99);
  for (const auto& [key, p99] : p99s) {
    json.Set(key + "_vs_cold", p99 / cold99);
    json.Set(key + "_vs_cold_n", p99 / cold_n99);
    std::printf("%s p99 / cold p99 = %.2f, / cold start of as many = %.2f\n",
                key.c_str(), p99 / cold99, p99 / cold_n99);
    // From the client's own notice, against raw gRPC starting the same
    // calls: on a connected channel when the move has a standby, else on a
    // fresh one.
    const bool standby_key = key.find("_standby") != std::string::npos;
    const double floor99 = standby_key ? warm_n99 : cold_n99;
    json.Set(key + "_from_notice_vs_raw", from_notice[key] / floor99);
    std::printf("%s from the notice p99 = %.2f ms, / raw gRPC's %s start of "
                "as many = %.2f\n",
                key.c_str(), from_notice[key], standby_key ? "warm" : "cold",
                from_notice[key] / floor99);
  }
  json.Set("streams", f.streams);
  json.Set("rollouts", f.rollouts);
  json.Set("cold_first_msg_p50_ms", Percentile(cold, 0.5));
  json.Set("cold_first_msg_p99_ms", cold99);
  json.Set("cold_n_first_msg_p50_ms", Percentile(cold_n, 0.5));
  json.Set("cold_n_first_msg_p99_ms", cold_n99);
  json.Set("warm_n_first_msg_p50_ms", Percentile(warm_n, 0.5));
  json.Set("warm_n_first_msg_p99_ms", warm_n99);
  json.Set("warm_n_vs_cold", warm_n99 / cold99);
  json.Set("notice_p50_ms", Percentile(noticed, 0.5));
  json.Set("notice_p99_ms", Percentile(noticed, 0.99));
  json.Set("attempts_on_draining", late);
  json.Set("errors", errors);
  json.Set("lost", lost);
  json.Set("duplicates", dups);
  json.Set("rollouts_timed_out", timeouts);
  json.Print();
  return late == 0 && errors == 0 && lost == 0 && dups == 0 && timeouts == 0
             ? 0
             : 1;
}
