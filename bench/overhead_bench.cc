// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// overhead_bench: messages per second through ReconnectingStream against the
// raw gRPC callback reader (ClientReadReactor), same in-process server (it
// writes as fast as flow control allows), same channel, same run, small
// messages (AccountEvent, 25 bytes on the wire; both sides use 6-character
// account names so the messages are the same size).
//
// Runs --rounds blocks of four measurements, raw, tether, tether, raw
// (ABBA), and takes each block's ratio tether/raw from the sums of its two
// measurements of each kind. Each kind runs once first/last and once after
// each kind, so effects of position (the second of a raw-then-tether pair
// ran systematically faster in one run here) and linear drift cancel within
// a block. Reports every measurement, every block ratio, the median
// block ratio (target: >= 0.97, see docs/performance.md) and
// the ratio of the medians of all measurements. The last line is one JSON
// object: ratio_median, ratio_min, ratio_max, raw_msgs_per_s,
// tether_msgs_per_s.
//
//   overhead_bench [--seconds=1.5] [--rounds=5] [--check]
#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "support/figures.h"
#include "bench/fast_ledger.h"
#include "tether/reconnecting_stream.h"

ABSL_FLAG(double, seconds, 1.5, "length of one measurement");
ABSL_FLAG(int, rounds, 5, "ABBA blocks (raw, tether, tether, raw)");
ABSL_FLAG(bool, check, false,
          "exit 1 when the median ratio is below the 0.97 floor");

namespace tb = ::tether::bench;
using tb::lv1::AccountEvent;
using tb::lv1::WatchAccountRequest;

namespace {

using tether::support::Median;

double RawRate(const std::shared_ptr<grpc::Channel>& ch, absl::Duration d) {
  auto stub = tb::lv1::Ledger::NewStub(ch);
  std::atomic<std::int64_t> n{0};
  tb::RawReader r(stub.get(), "acct-r", &n);
  absl::SleepFor(absl::Milliseconds(200));  // warm up
  std::int64_t a = n.load();
  absl::Time t0 = absl::Now();
  absl::SleepFor(d);
  std::int64_t b = n.load();
  double secs = absl::ToDoubleSeconds(absl::Now() - t0);
  r.Cancel();
  while (!r.done()) absl::SleepFor(absl::Milliseconds(1));
  return (b - a) / secs;
}

double TetherRate(const std::shared_ptr<grpc::Channel>& ch, absl::Duration d) {
  tether::StreamSpec<WatchAccountRequest, AccountEvent> spec;
  spec.start = [](const std::shared_ptr<grpc::Channel>& c,
                  grpc::ClientContext* ctx, const WatchAccountRequest* req,
                  grpc::ClientReadReactor<AccountEvent>* r) {
    tb::lv1::Ledger::NewStub(c)->async()->WatchAccount(ctx, req, r);
  };
  spec.request.set_account("acct-t");
  spec.sequence_of = [](const AccountEvent& e) {
    return absl::optional<std::uint64_t>(e.seq());
  };
  spec.resume_after = [](WatchAccountRequest& r, std::uint64_t s) {
    r.set_after_seq(s);
  };
  std::atomic<std::int64_t> n{0};
  auto s = tether::ReconnectingStream<WatchAccountRequest, AccountEvent>::Start(
      ch, spec, {},
      [&n](AccountEvent&&) { n.fetch_add(1, std::memory_order_relaxed); },
      [](const absl::Status&) {});
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
    std::exit(1);
  }
  absl::SleepFor(absl::Milliseconds(200));
  std::int64_t a = n.load();
  absl::Time t0 = absl::Now();
  absl::SleepFor(d);
  std::int64_t b = n.load();
  double secs = absl::ToDoubleSeconds(absl::Now() - t0);
  s->reset();  // cancels and waits for callbacks
  return (b - a) / secs;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Duration d = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  tb::FastLedger service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  auto ch = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                grpc::InsecureChannelCredentials());
  std::vector<double> raw, tet, ratio;
  for (int i = 0; i < absl::GetFlag(FLAGS_rounds); ++i) {
    const double r1 = RawRate(ch, d);
    const double t1 = TetherRate(ch, d);
    const double t2 = TetherRate(ch, d);
    const double r2 = RawRate(ch, d);
    raw.insert(raw.end(), {r1, r2});
    tet.insert(tet.end(), {t1, t2});
    ratio.push_back((t1 + t2) / (r1 + r2));
    std::printf(
        "block %d: raw %.0f, tether %.0f, tether %.0f, raw %.0f "
        "msg/s; ratio %.3f\n",
        i + 1, r1, t1, t2, r2, ratio.back());
    std::fflush(stdout);
  }
  const double r = Median(raw), t = Median(tet), m = Median(ratio);
  const auto [lo, hi] = std::minmax_element(ratio.begin(), ratio.end());
  std::printf(
      "overhead: median ratio tether/raw %.3f over %zu ABBA blocks (range "
      "%.3f-%.3f); medians raw %.0f msg/s, tether %.0f msg/s (ratio of "
      "medians %.3f); floor 0.97: %s\n",
      m, ratio.size(), *lo, *hi, r, t, t / r, m >= 0.97 ? "met" : "NOT met");
  server->Shutdown(std::chrono::system_clock::now());
  tether::support::JsonLine json;
  json.Set("ratio_median", m);
  json.Set("ratio_min", *lo);
  json.Set("ratio_max", *hi);
  json.Set("raw_msgs_per_s", r);
  json.Set("tether_msgs_per_s", t);
  json.Set("blocks", static_cast<int>(ratio.size()));
  json.Print();
  return (absl::GetFlag(FLAGS_check) && m < 0.97) ? 1 : 0;
}
