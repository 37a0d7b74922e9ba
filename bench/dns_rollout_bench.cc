// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// dns_rollout_bench: tether against raw gRPC through the rolling update of a
// Kubernetes headless Service, the same one test/integration/
// endpoints_dns_test.cc runs (its pods and DNS server: test/support/
// dns_pods.h).
//
// Pods on 127.0.0.11, .12, ... share one port; dnsmasq lists them under
// svc.test. A Deployment's rolling update with surge 1, three times so that
// no original pod is left: a new pod starts and its record is added; a
// second later the oldest pod's record is removed and the pod is stopped
// (SIGTERM), the record 1 s before the stop or 1 s after it (endpoint
// propagation faster or slower than the signal). A pod stops gracefully
// (GOAWAY, 2 s grace) or cancel-first (its streams end before its GOAWAY
// and new ones are refused for 2 s). Four modes, each with each client on
// fresh pods and a fresh DNS server.
//
// Each client keeps --streams watches open through it, each resuming after
// the last seq it saw:
//   tether  ReconnectingStreams (default options) over one ConnectionPool fed
//           by ResolvedEndpoints(dns://.../svc.test:PORT), re-resolving every
//           --resolve_interval_ms (the endpoint tests' 300 ms by default;
//           the library's default is 5 s), 50 ms at the soonest;
//   grpc    what a user picks instead: one channel to the same dns:// target
//           with the round_robin policy (gRPC's defaults otherwise: it looks
//           the name up again on a connection failure or GOAWAY, at most
//           every 30 s; --grpc_min_resolve_ms sets that minimum,
//           GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS), and per watch the
//           usual loop on a blocking stub:
//           read until the call ends, then call again after the last seq
//           (after 100 ms when the call delivered nothing, like tether's
//           first backoff).
//
// Per client and mode it prints: errors (calls that ended with an error the
// application saw), lost and duplicate messages, the longest stall of a
// stream (gap between two messages), attempts on leaving pods (Watch calls
// that reached a pod after its record left, and after its stop began),
// attempts those pods refused (ended before their first message), calls
// started and how many of them reached no pod (failed in the client), steps
// after which some watch delivered nothing within --wait_s, and the streams
// per pod at the end. The last line is one JSON object with the same
// figures ("<mode>_<client>_<figure>"). Exit 1 when tether lost, repeated or
// surfaced anything, or one of its watches got stuck.
//
//   dns_rollout_bench [--streams=24] [--modes=all] [--resolve_interval_ms=300]
//                     [--grpc_min_resolve_ms=0] [--wait_s=60]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "seqstream.grpc.pb.h"
#include "support/figures.h"
#include "test/integration/stream_test_util.h"
#include "test/support/dns_pods.h"
#include "tether/connection_pool.h"
#include "tether/resolved_endpoints.h"

ABSL_FLAG(int, streams, 24, "watches per client, in [1, 1000]");
ABSL_FLAG(std::string, modes, "all",
          "comma list of graceful_record_first, graceful_record_after, "
          "cancel_first_record_first, cancel_first_record_after; or all");
ABSL_FLAG(int, resolve_interval_ms, 300,
          "tether's ResolverOptions::resolve_interval, in [50, 3600000]");
ABSL_FLAG(int, grpc_min_resolve_ms, 0,
          "gRPC's minimum time between two lookups of the name, in "
          "[0, 3600000]; 0: gRPC's default (30 s)");
ABSL_FLAG(int, wait_s, 60,
          "how long each step waits for every watch to deliver again, in "
          "[1, 600]");

namespace tether {
namespace {

using testsupport::DnsPods;
using testsupport::SeqStream;

// The scenario's pace (waiting on the clock is the rollout here).
constexpr absl::Duration kNewPodLead = absl::Seconds(1);
constexpr absl::Duration kRecordToStop = absl::Seconds(1);

// What the application of one client received, per watch.
class Book {
 public:
  explicit Book(int n) : watches_(static_cast<std::size_t>(n)) {}

  void OnEvent(int i, std::uint64_t seq) {
    std::lock_guard<std::mutex> lock(mu_);
    Watch& w = watches_[static_cast<std::size_t>(i)];
    if (seq <= w.last) {
      ++duplicates_;
      return;
    }
    lost_ += static_cast<std::int64_t>(seq - w.last - 1);
    w.last = seq;
    ++w.count;
    const absl::Time now = absl::Now();
    if (w.last_at != absl::InfinitePast()) {
      max_stall_ = std::max(max_stall_, now - w.last_at);
    }
    w.last_at = now;
  }
  void OnError() {
    std::lock_guard<std::mutex> lock(mu_);
    ++errors_;
  }
  std::uint64_t last(int i) {
    std::lock_guard<std::mutex> lock(mu_);
    return watches_[static_cast<std::size_t>(i)].last;
  }
  std::vector<int> counts() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<int> out;
    for (const Watch& w : watches_) out.push_back(w.count);
    return out;
  }
  // Waits until every watch delivered `n` more messages than `base` says.
  bool WaitMore(const std::vector<int>& base, int n, absl::Duration timeout) {
    const absl::Time until = absl::Now() + timeout;
    for (;;) {
      std::vector<int> now = counts();
      bool all = true;
      for (std::size_t i = 0; i < now.size(); ++i) {
        all = all && now[i] >= base[i] + n;
      }
      if (all) return true;
      if (absl::Now() >= until) return false;
      absl::SleepFor(absl::Milliseconds(10));  // a bench polls a count
    }
  }

  struct Figures {
    std::int64_t errors, lost, duplicates;
    absl::Duration max_stall;
  };
  Figures figures() {
    std::lock_guard<std::mutex> lock(mu_);
    return {errors_, lost_, duplicates_, max_stall_};
  }

 private:
  struct Watch {
    std::uint64_t last = 0;
    int count = 0;
    absl::Time last_at = absl::InfinitePast();
  };
  std::mutex mu_;
  std::vector<Watch> watches_;
  std::int64_t errors_ = 0;
  std::int64_t lost_ = 0;
  std::int64_t duplicates_ = 0;
  absl::Duration max_stall_ = absl::ZeroDuration();
};

// One client's watches, open from construction to destruction.
class Client {
 public:
  virtual ~Client() = default;
  // Calls started so far (attempts, for tether).
  virtual std::int64_t calls() = 0;
};

class TetherClient final : public Client {
 public:
  TetherClient(const std::string& target, int n, Book* book) {
    ResolverOptions ro;
    ro.resolve_interval =
        absl::Milliseconds(absl::GetFlag(FLAGS_resolve_interval_ms));
    ro.min_resolve_interval = absl::Milliseconds(50);
    ro.query_timeout = absl::Milliseconds(500);
    auto source = ResolvedEndpoints(target, ro);
    Check(source.status());
    ConnectionPoolOptions o;
    o.endpoints = *std::move(source);
    auto pool = ConnectionPool::Create(std::move(o));
    Check(pool.status());
    pool_ = *std::move(pool);
    for (int i = 0; i < n; ++i) {
      auto s = SeqStream::Start(
          pool_, testsupport::WatchSpec(absl::StrCat("t", i)),
          ReconnectingStreamOptions(),
          [book, i](tether::test::Event&& e) { book->OnEvent(i, e.seq()); },
          [book](const absl::Status&) { book->OnError(); });
      Check(s.status());
      streams_.push_back(*std::move(s));
    }
  }
  std::int64_t calls() override {
    std::int64_t n = 0;
    for (const auto& s : streams_) {
      n += static_cast<std::int64_t>(s->stats().attempts);
    }
    return n;
  }

 private:
  static void Check(const absl::Status& s) {
    if (s.ok()) return;
    std::fprintf(stderr, "dns_rollout_bench: %s\n", s.ToString().c_str());
    std::exit(2);
  }

  std::shared_ptr<ConnectionPool> pool_;
  std::vector<std::unique_ptr<SeqStream>> streams_;
};

class GrpcClient final : public Client {
 public:
  GrpcClient(const std::string& target, int n, Book* book) : book_(book) {
    grpc::ChannelArguments args;
    args.SetServiceConfigJSON(
        R"({"loadBalancingConfig":[{"round_robin":{}}]})");
    const int min_resolve_ms = absl::GetFlag(FLAGS_grpc_min_resolve_ms);
    if (min_resolve_ms > 0) {
      args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, min_resolve_ms);
    }
    channel_ = grpc::CreateCustomChannel(
        target, grpc::InsecureChannelCredentials(), args);
    stub_ = tether::test::SeqStream::NewStub(channel_);
    contexts_.resize(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) threads_.emplace_back([this, i] { Run(i); });
  }
  ~GrpcClient() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      for (grpc::ClientContext* c : contexts_) {
        if (c != nullptr) c->TryCancel();
      }
    }
    for (std::thread& t : threads_) t.join();
  }
  std::int64_t calls() override {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  void Run(int i) {
    for (;;) {
      grpc::ClientContext context;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;
        contexts_[static_cast<std::size_t>(i)] = &context;
        ++calls_;
      }
      tether::test::WatchRequest request;
      request.set_key(absl::StrCat("g", i));
      request.set_after_seq(book_->last(i));
      auto reader = stub_->Watch(&context, request);
      tether::test::Event e;
      bool got = false;
      while (reader->Read(&e)) {
        got = true;
        book_->OnEvent(i, e.seq());
      }
      const grpc::Status status = reader->Finish();
      {
        std::lock_guard<std::mutex> lock(mu_);
        contexts_[static_cast<std::size_t>(i)] = nullptr;
        if (stopping_) return;
      }
      if (!status.ok()) book_->OnError();
      if (!got) absl::SleepFor(absl::Milliseconds(100));
    }
  }

  Book* const book_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<tether::test::SeqStream::Stub> stub_;
  std::mutex mu_;
  bool stopping_ = false;
  std::int64_t calls_ = 0;
  std::vector<grpc::ClientContext*> contexts_;
  std::vector<std::thread> threads_;
};

struct Mode {
  const char* name;
  DnsPods::Stop stop;
  bool record_after_stop;
};

constexpr Mode kModes[] = {
    {"graceful_record_first", DnsPods::Stop::kGraceful, false},
    {"graceful_record_after", DnsPods::Stop::kGraceful, true},
    {"cancel_first_record_first", DnsPods::Stop::kCancelFirst, false},
    {"cancel_first_record_after", DnsPods::Stop::kCancelFirst, true},
};

struct Result {
  Book::Figures app{};
  std::int64_t after_record = 0;  // attempts on a pod after its record left
  std::int64_t after_stop = 0;    // ... after its stop began
  std::int64_t refused = 0;       // by leaving pods
  std::int64_t calls = 0;
  std::int64_t unplaced = 0;      // calls that reached no pod
  int stuck = 0;         // steps after which a watch delivered nothing
  std::string per_pod;   // open streams per live pod at the end
};

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "dns_rollout_bench: %s\n", what.c_str());
  std::exit(2);
}

Result Run(bool use_tether, const Mode& mode, int n, absl::Duration wait) {
  Result r;
  auto started = DnsPods::Start();
  if (!started.ok()) Fail(started.status().ToString());
  DnsPods& pods = **started;
  std::vector<int> live = {1, 2, 3};
  for (int i : live) {
    if (pods.StartPod(i) == nullptr) Fail("a pod did not start");
  }
  auto publish = [&pods](const std::vector<int>& set) {
    const absl::Status s = pods.Publish(set);
    if (!s.ok()) Fail(s.ToString());
  };
  publish(live);
  Book book(n);
  std::unique_ptr<Client> client;
  if (use_tether) {
    client = std::make_unique<TetherClient>(pods.Target(), n, &book);
  } else {
    client = std::make_unique<GrpcClient>(pods.Target(), n, &book);
  }
  if (!book.WaitMore(std::vector<int>(static_cast<std::size_t>(n), 0), 3,
                     wait)) {
    ++r.stuck;
  }
  for (int step = 0; step < 3; ++step) {
    const int old_pod = live.front();
    const int new_pod = 4 + step;
    if (pods.StartPod(new_pod) == nullptr) Fail("a pod did not start");
    live.push_back(new_pod);
    publish(live);
    absl::SleepFor(kNewPodLead);  // a readiness gate's delay
    live.erase(live.begin());
    testsupport::TestServer& old = *pods.pod(old_pod);
    std::int64_t at_record = 0;
    if (!mode.record_after_stop) {
      publish(live);
      at_record = old.stats().watches_started;
      absl::SleepFor(kRecordToStop);
    }
    const std::int64_t at_stop = old.stats().watches_started;
    const absl::Time stop_at = absl::Now();
    pods.StopPod(old_pod, mode.stop);
    if (mode.record_after_stop) {
      absl::SleepFor(kRecordToStop - (absl::Now() - stop_at));
      publish(live);
      at_record = old.stats().watches_started;
    }
    if (!old.WaitForStopped(wait)) Fail("a pod did not stop");
    const testsupport::TestServerStats stats = old.stats();
    r.after_record += stats.watches_started - at_record;
    r.after_stop += stats.watches_started - at_stop;
    r.refused += stats.watches_failed_before_first;
    if (!book.WaitMore(book.counts(), 3, wait)) ++r.stuck;
  }
  std::vector<std::string> per_pod;
  for (int i : live) {
    per_pod.push_back(absl::StrCat(pods.pod(i)->stats().open_streams));
  }
  r.per_pod = absl::StrJoin(per_pod, "/");
  r.calls = client->calls();
  r.unplaced = r.calls - pods.WatchesStarted();
  client.reset();
  r.app = book.figures();
  return r;
}

}  // namespace
}  // namespace tether

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int n = absl::GetFlag(FLAGS_streams);
  const int resolve_ms = absl::GetFlag(FLAGS_resolve_interval_ms);
  const int wait_s = absl::GetFlag(FLAGS_wait_s);
  const std::string modes = absl::GetFlag(FLAGS_modes);
  if (n < 1 || n > 1000) tether::Fail("--streams must be in [1, 1000]");
  if (resolve_ms < 50 || resolve_ms > 3600000) {
    tether::Fail("--resolve_interval_ms must be in [50, 3600000]");
  }
  if (wait_s < 1 || wait_s > 600) tether::Fail("--wait_s must be in [1, 600]");
  const int grpc_min_resolve_ms = absl::GetFlag(FLAGS_grpc_min_resolve_ms);
  if (grpc_min_resolve_ms < 0 || grpc_min_resolve_ms > 3600000) {
    tether::Fail("--grpc_min_resolve_ms must be in [0, 3600000]");
  }
  std::vector<const tether::Mode*> chosen;
  for (const tether::Mode& m : tether::kModes) {
    if (modes == "all" || absl::StrContains(absl::StrCat(",", modes, ","),
                                            absl::StrCat(",", m.name, ","))) {
      chosen.push_back(&m);
    }
  }
  if (chosen.empty()) tether::Fail("--modes names no mode");
  std::printf(
      "rolling update x3 (surge 1) of 3 pods behind a DNS name, %d watches "
      "per client; tether re-resolves every %d ms, gRPC (round_robin) on "
      "failures and GOAWAYs, at most every %s\n",
      n, resolve_ms,
      grpc_min_resolve_ms > 0 ? absl::StrCat(grpc_min_resolve_ms, " ms").c_str()
                              : "30 s (its default)");
  std::fflush(stdout);
  tether::support::JsonLine json;
  bool ok = true;
  for (const tether::Mode* m : chosen) {
    for (bool use_tether : {true, false}) {
      const char* who = use_tether ? "tether" : "grpc";
      const tether::Result r =
          tether::Run(use_tether, *m, n, absl::Seconds(wait_s));
      std::printf(
          "%-26s %-6s errors %lld, lost %lld, duplicates %lld, max stall "
          "%.0f ms, attempts on leaving pods %lld after the record left / "
          "%lld after the stop (refused %lld), calls %lld (%lld reached no "
          "pod), stuck steps %d, streams per pod %s\n",
          m->name, who, static_cast<long long>(r.app.errors),
          static_cast<long long>(r.app.lost),
          static_cast<long long>(r.app.duplicates),
          absl::ToDoubleMilliseconds(r.app.max_stall),
          static_cast<long long>(r.after_record),
          static_cast<long long>(r.after_stop),
          static_cast<long long>(r.refused), static_cast<long long>(r.calls),
          static_cast<long long>(r.unplaced), r.stuck, r.per_pod.c_str());
      std::fflush(stdout);
      const std::string k = absl::StrCat(m->name, "_", who, "_");
      json.Set(k + "errors", r.app.errors);
      json.Set(k + "lost", r.app.lost);
      json.Set(k + "duplicates", r.app.duplicates);
      json.Set(k + "max_stall_ms", absl::ToDoubleMilliseconds(r.app.max_stall));
      json.Set(k + "attempts_after_record", r.after_record);
      json.Set(k + "attempts_after_stop", r.after_stop);
      json.Set(k + "refused", r.refused);
      json.Set(k + "calls", r.calls);
      json.Set(k + "calls_reaching_no_pod", r.unplaced);
      json.Set(k + "stuck", r.stuck);
      json.Set(k + "streams_per_pod", r.per_pod);
      if (use_tether) {
        ok = ok && r.app.errors == 0 && r.app.lost == 0 &&
             r.app.duplicates == 0 && r.stuck == 0;
      }
    }
  }
  json.Set("streams", n);
  json.Set("resolve_interval_ms", resolve_ms);
  json.Set("grpc_min_resolve_ms", grpc_min_resolve_ms);
  json.Print();
  return ok ? 0 : 1;
}
