// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// overhead_bench: messages per second through ReconnectingStream against the
// raw gRPC callback reader, same in-process server, same run, small messages
// (~25 bytes). Alternates raw and tether rounds and reports the medians.
//
//   overhead_bench [--seconds=2] [--rounds=3]
#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "bench/fast_ledger.h"
#include "tether/reconnecting_stream.h"

ABSL_FLAG(double, seconds, 2, "length of one measurement");
ABSL_FLAG(int, rounds, 3, "raw/tether round pairs");

namespace tb = ::tether::bench;
using tb::lv1::AccountEvent;
using tb::lv1::WatchAccountRequest;

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double RawRate(const std::shared_ptr<grpc::Channel>& ch, absl::Duration d) {
  auto stub = tb::lv1::Ledger::NewStub(ch);
  std::atomic<std::int64_t> n{0};
  tb::RawReader r(stub.get(), "raw", &n);
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
  spec.request.set_account("tether");
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
  std::vector<double> raw, tet;
  for (int i = 0; i < absl::GetFlag(FLAGS_rounds); ++i) {
    raw.push_back(RawRate(ch, d));
    tet.push_back(TetherRate(ch, d));
    std::printf("round %d: raw %.0f msg/s, tether %.0f msg/s\n", i + 1,
                raw.back(), tet.back());
  }
  double r = Median(raw), t = Median(tet);
  std::printf("overhead: raw %.0f msg/s, tether %.0f msg/s, ratio %.3f "
              "(medians; floor 0.95)\n",
              r, t, t / r);
  server->Shutdown(std::chrono::system_clock::now());
  return 0;
}
