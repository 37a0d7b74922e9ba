// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// migration_bench: GOAWAY -> first message from the new replica, p50/p99,
// for --streams tether streams (one ConnectionPool, through a Service-like
// proxy) over --rollouts rolling restarts of two graceful replicas (no
// pre-drain, so the GOAWAY is the signal; tick 2 ms).
//
//   migration_bench [--streams=64] [--rollouts=5]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "examples/common/ledger_replica.h"
#include "examples/common/ledger_watchers.h"
#include "examples/common/service_proxy.h"
#include "tether/connection_pool.h"

ABSL_FLAG(int, streams, 64, "streams");
ABSL_FLAG(int, rollouts, 5, "rolling restarts (two replicas each)");

namespace ex = ::tether::examples;

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int n = absl::GetFlag(FLAGS_streams);
  const int rollouts = absl::GetFlag(FLAGS_rollouts);
  ex::ServiceProxy proxy;
  if (!proxy.Start().ok()) return 1;
  int gen = 0;
  auto make = [&]() {
    ex::LedgerReplicaOptions o;
    o.name = absl::StrCat("r", ++gen);
    o.tick = absl::Milliseconds(2);
    o.pre_drain = absl::ZeroDuration();
    o.drain = absl::Milliseconds(1000);
    auto r = std::make_unique<ex::LedgerReplica>(o);
    if (!r->Start().ok() || !proxy.AddEndpoint(r->address()).ok()) {
      std::exit(1);
    }
    return r;
  };
  std::unique_ptr<ex::LedgerReplica> slot[2] = {make(), make()};
  tether::ConnectionPoolOptions po;
  po.target = proxy.address();
  auto pool = tether::ConnectionPool::Create(po).value();
  absl::Time epoch = absl::Now();
  std::vector<std::shared_ptr<ex::WatchRecorder>> recs;
  std::vector<std::unique_ptr<ex::TetherWatch>> ws;
  for (int i = 0; i < n; ++i) {
    recs.push_back(std::make_shared<ex::WatchRecorder>(
        absl::StrCat("acct-", i), epoch));
    ws.push_back(ex::TetherWatch::Start(pool, recs.back(), {}).value());
  }
  absl::SleepFor(absl::Milliseconds(500));
  struct Step {
    double t_ms;
    std::string replica;
  };
  std::vector<Step> steps;
  for (int k = 0; k < rollouts; ++k) {
    for (int i = 0; i < 2; ++i) {
      auto fresh = make();
      proxy.RemoveEndpoint(slot[i]->address());
      steps.push_back(Step{absl::ToDoubleMilliseconds(absl::Now() - epoch),
                           slot[i]->name()});
      slot[i]->Stop(ex::ShutdownMode::kGraceful);  // GOAWAY now
      slot[i] = std::move(fresh);
      absl::SleepFor(absl::Milliseconds(200));
    }
  }
  absl::SleepFor(absl::Milliseconds(300));
  for (auto& w : ws) w->Stop();
  std::vector<double> mig;
  std::int64_t errors = 0, gaps = 0, dups = 0;
  for (auto& r : recs) {
    auto t = r->total();
    errors += t.errors;
    gaps += t.gaps;
    dups += t.duplicates;
    auto segs = r->segments();
    for (const Step& s : steps) {
      for (std::size_t i = 0; i + 1 < segs.size(); ++i) {
        if (segs[i].replica == s.replica && segs[i].start_ms <= s.t_ms &&
            segs[i + 1].start_ms >= s.t_ms) {
          mig.push_back(segs[i + 1].start_ms - s.t_ms);
          break;
        }
      }
    }
  }
  std::sort(mig.begin(), mig.end());
  auto pct = [&](double p) -> double {
    if (mig.empty()) return NAN;
    std::size_t i = static_cast<std::size_t>(std::ceil(p * mig.size()));
    return mig[std::min(mig.size() - 1, i == 0 ? 0 : i - 1)];
  };
  std::printf("migration: %zu moves (%d streams, %d rollouts x 2 replicas), "
              "GOAWAY -> first message on the new replica: p50 %.1f ms, "
              "p99 %.1f ms, max %.1f ms; errors %lld, gaps %lld, "
              "duplicates %lld\n",
              mig.size(), n, rollouts, pct(0.5), pct(0.99),
              mig.empty() ? NAN : mig.back(), static_cast<long long>(errors),
              static_cast<long long>(gaps), static_cast<long long>(dups));
  ws.clear();
  pool.reset();
  return 0;
}
