// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// One simulated run: the scenario a seed draws (fleet, topology, streams,
// faults, options) and what running it found.
#ifndef TETHER_TEST_SIM_SCENARIO_H_
#define TETHER_TEST_SIM_SCENARIO_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "test/sim/clients.h"
#include "test/sim/network.h"

namespace tether {
namespace sim {

// Settings a command line may force instead of the seed's draw.
struct Overrides {
  absl::optional<int> streams;
  absl::optional<absl::Duration> length;
  absl::optional<Topology> topology;
  absl::optional<absl::Duration> rollout_every;
  absl::optional<absl::Duration> item_every;
  // Only rollouts (no other fault, no outage, no app cancels): the
  // throughput measurement.
  bool rollouts_only = false;
  // Also draw the scenarios of open findings (see docs/simulator.md).
  bool open_findings = false;
  // Echo every trace line as it happens.
  bool trace = false;
};

struct Scenario {
  std::uint64_t seed = 0;
  Topology topology = Topology::kHeadless;
  int replicas = 3;
  int streams = 10;
  std::vector<StreamKind> kinds;  // drawn from, per stream
  absl::Duration length = absl::Minutes(2);
  absl::Duration rollout_every = absl::Seconds(10);
  // Replicas each rollout step replaces (a Deployment's maxUnavailable):
  // with 2, the second shuts down 0-5 ms after the first, so a stream
  // leaving the first may land on the second just as it drains.
  int rollout_batch = 1;
  std::vector<ShutdownKind> shutdowns;  // drawn from, per rollout
  absl::Duration item_every = absl::Seconds(2);  // per stream, on average
  // Chance, per rollout, of an extra fault somewhere (black hole, pause,
  // slow, shed load, pushback).
  double fault_rate = 0;
  // Chance per stream that the app cancels or destroys it at some time.
  double app_end_rate = 0;
  AppBehavior app;
  bool health_check = false;
  // An outage: every replica down for `outage_length` from `outage_at`.
  bool outage = false;
  absl::Duration outage_at;
  absl::Duration outage_length;
  // Stream options drawn.
  bool migrate_on_drain = true;
  bool hold_fallback = true;
  absl::Duration migration_jitter;
  absl::Duration stall_timeout;
  absl::Duration max_time_without_progress = absl::Minutes(2);
  bool breaker = false;
  std::size_t max_outbox = 64;
  // Chance that starting a call lets other events run first (see
  // Network::Options::slow_start).
  double slow_start = 0;
  // Chance, every 1-5 s, that the store compacts the logs of the streams
  // that resync (dense, sparse, batch) up to their heads: a stream that
  // resumes below that must resync (its app's listing answers, slowly or
  // not, or hangs: `app.resync_*`).
  double compaction = 0;
  // The workers of the streams' resync pool (a `ResyncPool::OnClock`): a
  // listing holds one until it answers (a hung one, for a long while);
  // more resyncs than workers wait.
  int resync_workers = 8;
  // The app logs through a `LoggingObserver` (every stream's lines and the
  // pool's) whose sink checks the storm control: at most `log_lines` lines
  // of an event kind per `log_window`. 0: no logging.
  int log_lines = 0;
  absl::Duration log_window = absl::Seconds(1);
  // Chance that a call of the logger to its clock, made with no tether lock
  // held, is a preemption point: that "thread" stalls there for up to 3
  // simulated ms while every other event due meanwhile runs (see
  // PreemptingClock).
  double preempt = 0;

  std::string Describe() const;
};

Scenario Draw(std::uint64_t seed, const Overrides& overrides);

struct RunResult {
  bool ok = true;
  std::string failure;
  std::deque<std::string> trace;  // the last events, when it failed
  double simulated_seconds = 0;
  double cpu_seconds = 0;
  std::uint64_t messages = 0;
  std::uint64_t calls = 0;
  std::uint64_t rollouts = 0;
  // The longest time a stream took, after the fleet healed, to deliver
  // everything.
  absl::Duration catch_up = absl::ZeroDuration();
};

// How long after the fleet heals every live stream must have delivered
// everything the log had.
inline constexpr absl::Duration kLivenessBound = absl::Seconds(60);

RunResult Run(const Scenario& scenario, const Overrides& overrides);

}  // namespace sim
}  // namespace tether

#endif  // TETHER_TEST_SIM_SCENARIO_H_
