// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// tether_sim: runs tether's streams, pool and breaker against a simulated
// fleet, one seeded scenario after another. See docs/simulator.md.
//
//   tether_sim --seed=N             replays one seed (prints its trace on
//                                   failure; --trace echoes every event)
//   tether_sim --seeds=N [--first-seed=S]
//                                   runs N seeds from S (default 1)
//   tether_sim --seed-file=FILE     runs the seeds listed in FILE (a seed
//                                   or a range A-B a line, '#' starts a
//                                   comment), then --seeds=N more if given
//   --limit=N                       runs only the first N seeds listed
//   tether_sim --bench              a simulated hour of rollouts (one
//                                   every 10 s, 1,000 streams); prints
//                                   simulated hours per CPU second
//
// Overrides (applied to every seed; a replay command repeats them):
//   --streams=N --minutes=M --topology=headless|service|proxy
//   --rollout-every-s=S --item-every-ms=MS --rollouts-only
//   --open-findings (also draws scenarios of known open defects)
//
// Exit status 0 when every seed held every invariant, 1 otherwise, 2 for
// a bad command line.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "test/sim/scenario.h"

namespace {

using tether::sim::Overrides;
using tether::sim::RunResult;
using tether::sim::Scenario;

struct Flags {
  std::vector<std::uint64_t> seeds;
  std::uint64_t count = 0;
  std::uint64_t first = 1;
  std::uint64_t limit = 0;  // 0: all
  bool bench = false;
  bool quiet = false;
  Overrides overrides;
  std::string replay_extra;  // the overrides, as flags
};

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "tether_sim: %s\nusage: tether_sim [--seed=N | --seeds=N "
               "[--first-seed=S] | --seed-file=FILE [--limit=N] | --bench] [--streams=N] "
               "[--minutes=M] [--topology=headless|service|proxy] "
               "[--rollout-every-s=S] [--item-every-ms=MS] [--rollouts-only] "
               "[--open-findings] "
               "[--trace] [--quiet]\n",
               why.c_str());
  return 2;
}

bool ReadSeedFile(const std::string& path, std::vector<std::uint64_t>* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    const auto hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    absl::string_view t = absl::StripAsciiWhitespace(line);
    if (t.empty()) continue;
    // "N" or a range "A-B".
    std::uint64_t first, last;
    const auto dash = t.find('-');
    if (dash == absl::string_view::npos) {
      if (!absl::SimpleAtoi(t, &first)) return false;
      last = first;
    } else if (!absl::SimpleAtoi(t.substr(0, dash), &first) ||
               !absl::SimpleAtoi(t.substr(dash + 1), &last) || last < first) {
      return false;
    }
    for (std::uint64_t seed = first; seed <= last; ++seed) out->push_back(seed);
  }
  return true;
}

// Parses `arg` as --name=value into `value`; false if it is another flag.
bool Value(absl::string_view arg, absl::string_view name,
           absl::string_view* value) {
  if (!absl::ConsumePrefix(&arg, name) || !absl::ConsumePrefix(&arg, "=")) {
    return false;
  }
  *value = arg;
  return true;
}

int Report(const Scenario& s, const RunResult& r, const Flags& f) {
  std::printf("tether_sim: seed %llu FAILED: %s\n",
              static_cast<unsigned long long>(s.seed), r.failure.c_str());
  std::printf("  scenario: %s\n", s.Describe().c_str());
  std::printf("  replay:   tether_sim --seed=%llu%s\n",
              static_cast<unsigned long long>(s.seed), f.replay_extra.c_str());
  std::printf("  the last %zu events:\n", r.trace.size());
  for (const std::string& line : r.trace) std::printf("    %s\n", line.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i], v;
    std::uint64_t n = 0;
    if (Value(a, "--seed", &v) && absl::SimpleAtoi(v, &n)) {
      f.seeds.push_back(n);
    } else if (Value(a, "--seeds", &v) && absl::SimpleAtoi(v, &n)) {
      f.count = n;
    } else if (Value(a, "--limit", &v) && absl::SimpleAtoi(v, &n) && n > 0) {
      f.limit = n;
    } else if (Value(a, "--first-seed", &v) && absl::SimpleAtoi(v, &n)) {
      f.first = n;
    } else if (Value(a, "--seed-file", &v)) {
      if (!ReadSeedFile(std::string(v), &f.seeds)) {
        return Usage(absl::StrCat("cannot read seeds from ", v));
      }
    } else if (Value(a, "--streams", &v) && absl::SimpleAtoi(v, &n) &&
               n >= 1 && n <= 10000) {
      f.overrides.streams = static_cast<int>(n);
      absl::StrAppend(&f.replay_extra, " ", a);
    } else if (Value(a, "--minutes", &v) && absl::SimpleAtoi(v, &n) &&
               n >= 1 && n <= 24 * 60) {
      f.overrides.length = absl::Minutes(n);
      absl::StrAppend(&f.replay_extra, " ", a);
    } else if (Value(a, "--rollout-every-s", &v) && absl::SimpleAtoi(v, &n) &&
               n >= 1 && n <= 3600) {
      f.overrides.rollout_every = absl::Seconds(n);
      absl::StrAppend(&f.replay_extra, " ", a);
    } else if (Value(a, "--item-every-ms", &v) && absl::SimpleAtoi(v, &n) &&
               n >= 1 && n <= 3600 * 1000) {
      f.overrides.item_every = absl::Milliseconds(n);
      absl::StrAppend(&f.replay_extra, " ", a);
    } else if (Value(a, "--topology", &v)) {
      if (v == "headless") {
        f.overrides.topology = tether::sim::Topology::kHeadless;
      } else if (v == "service") {
        f.overrides.topology = tether::sim::Topology::kService;
      } else if (v == "proxy") {
        f.overrides.topology = tether::sim::Topology::kProxy;
      } else {
        return Usage(absl::StrCat("unknown topology ", v));
      }
      absl::StrAppend(&f.replay_extra, " ", a);
    } else if (a == "--open-findings") {
      f.overrides.open_findings = true;
      absl::StrAppend(&f.replay_extra, " ", a);
    } else if (a == "--rollouts-only") {
      f.overrides.rollouts_only = true;
      absl::StrAppend(&f.replay_extra, " ", a);
    } else if (a == "--bench") {
      f.bench = true;
    } else if (a == "--trace") {
      f.overrides.trace = true;
    } else if (a == "--quiet") {
      f.quiet = true;
    } else {
      return Usage(absl::StrCat("bad argument ", a));
    }
  }
  if (f.bench) {
    // The figure the docs give: a simulated hour of rollouts, one every
    // 10 s, over 1,000 streams (an item every 10 s each).
    f.overrides.streams = f.overrides.streams.value_or(1000);
    f.overrides.length = f.overrides.length.value_or(absl::Hours(1));
    f.overrides.rollout_every =
        f.overrides.rollout_every.value_or(absl::Seconds(10));
    f.overrides.item_every = f.overrides.item_every.value_or(absl::Seconds(10));
    f.overrides.rollouts_only = true;
    if (f.seeds.empty()) f.seeds.push_back(1);
  }
  for (std::uint64_t i = 0; i < f.count; ++i) f.seeds.push_back(f.first + i);
  if (f.limit > 0 && f.seeds.size() > f.limit) f.seeds.resize(f.limit);
  if (f.seeds.empty()) return Usage("no seed to run");

  double sim_s = 0, cpu_s = 0;
  std::uint64_t messages = 0, calls = 0, rollouts = 0;
  int failed = 0;
  for (std::uint64_t seed : f.seeds) {
    const Scenario s = tether::sim::Draw(seed, f.overrides);
    const RunResult r = tether::sim::Run(s, f.overrides);
    sim_s += r.simulated_seconds;
    cpu_s += r.cpu_seconds;
    messages += r.messages;
    calls += r.calls;
    rollouts += r.rollouts;
    if (!r.ok) {
      ++failed;
      Report(s, r, f);
    } else if (!f.quiet || f.seeds.size() == 1) {
      std::printf("seed %llu ok: %.0f simulated s in %.2f CPU s, %llu "
                  "messages, %llu attempts, %llu rollouts, caught up in %s "
                  "(%s)\n",
                  static_cast<unsigned long long>(seed), r.simulated_seconds,
                  r.cpu_seconds, static_cast<unsigned long long>(r.messages),
                  static_cast<unsigned long long>(r.calls),
                  static_cast<unsigned long long>(r.rollouts),
                  absl::FormatDuration(r.catch_up).c_str(),
                  s.Describe().c_str());
    }
    std::fflush(stdout);
  }
  std::printf("tether_sim: %zu seeds, %d failed; %.2f simulated hours in "
              "%.2f CPU seconds (%.2f simulated hours per CPU second); %llu "
              "messages, %llu attempts, %llu rollouts\n",
              f.seeds.size(), failed, sim_s / 3600, cpu_s,
              cpu_s > 0 ? sim_s / 3600 / cpu_s : 0.0,
              static_cast<unsigned long long>(messages),
              static_cast<unsigned long long>(calls),
              static_cast<unsigned long long>(rollouts));
  return failed == 0 ? 0 : 1;
}
