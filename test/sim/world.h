// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The simulator's shared ground: one seeded random source, simulated time
// (a `FakeClock`), a bounded trace of what happened, and the first broken
// invariant. Everything in a run happens on one thread, in the order the
// clock's timers fall due, so a seed decides everything.
#ifndef TETHER_TEST_SIM_WORLD_H_
#define TETHER_TEST_SIM_WORLD_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tether/testing/fake_clock.h"

namespace tether {
namespace sim {

// A seeded random source whose sequence is fixed by this file (SplitMix64),
// so a seed replays the same run with any standard library.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  std::uint64_t Next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); 0 when n is 0.
  std::uint64_t Below(std::uint64_t n) { return n == 0 ? 0 : Next() % n; }
  // Uniform in [lo, hi].
  std::int64_t Between(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(
                    Below(static_cast<std::uint64_t>(hi - lo) + 1));
  }
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  bool Chance(double p) { return Unit() < p; }
  // Uniform in [lo, hi], to the microsecond.
  absl::Duration Between(absl::Duration lo, absl::Duration hi) {
    return absl::Microseconds(Between(absl::ToInt64Microseconds(lo),
                                      absl::ToInt64Microseconds(hi)));
  }
  // A new source for a part of the run, so that adding draws to one part
  // does not shift another's.
  Rng Fork() { return Rng(Next()); }

 private:
  std::uint64_t state_;
};

// The last `capacity` events, for the report of a failed run. A ring of
// (time, text): the time is formatted only when the trace is read (a run
// records millions of events and reads the trace only when it fails).
class Trace {
 public:
  explicit Trace(std::size_t capacity) : events_(capacity) {}
  void Add(absl::Time at, std::string what) {
    if (echo_) std::fprintf(stderr, "%s %s\n", Stamp(at).c_str(), what.c_str());
    Event& e = events_[next_ % events_.size()];
    e.at = at;
    e.what = std::move(what);
    ++next_;
  }
  void set_echo(bool echo) { echo_ = echo; }
  // The events kept, oldest first.
  std::deque<std::string> lines() const {
    std::deque<std::string> out;
    const std::size_t n = std::min(next_, events_.size());
    for (std::size_t i = next_ - n; i < next_; ++i) {
      const Event& e = events_[i % events_.size()];
      out.push_back(absl::StrCat(Stamp(e.at), " ", e.what));
    }
    return out;
  }
  void set_origin(absl::Time origin) { origin_ = origin; }

 private:
  struct Event {
    absl::Time at;
    std::string what;
  };
  std::string Stamp(absl::Time at) const {
    return absl::StrCat(
        "t=", absl::StrFormat("%.6f", absl::ToDoubleSeconds(at - origin_)),
        "s");
  }
  std::vector<Event> events_;
  std::size_t next_ = 0;  // events ever added
  absl::Time origin_ = absl::UnixEpoch();
  bool echo_ = false;
};

// The run's context, handed to every part of the simulation.
class World {
 public:
  World(std::uint64_t seed, std::size_t trace_capacity)
      : clock_(std::make_shared<fakes::FakeClock>()),
        rng_(seed),
        trace_(trace_capacity),
        start_(clock_->Now()) {
    trace_.set_origin(start_);
  }

  const std::shared_ptr<fakes::FakeClock>& clock() { return clock_; }
  absl::Time Now() { return clock_->Now(); }
  // Simulated time since the run started.
  absl::Duration Elapsed() { return clock_->Now() - start_; }
  Rng& rng() { return rng_; }
  Trace& trace() { return trace_; }

  // Runs `fn` after `delay` on the simulated clock.
  void After(absl::Duration delay, std::function<void()> fn) {
    clock_->RunAfter(delay, std::move(fn));
  }

  void Note(std::string what) { trace_.Add(Now(), std::move(what)); }

  // Records a broken invariant; the first one ends the run.
  void Fail(std::string what) {
    if (!failure_.empty()) return;
    trace_.Add(Now(), absl::StrCat("VIOLATION ", what));
    failure_ = std::move(what);
  }
  bool failed() const { return !failure_.empty(); }
  const std::string& failure() const { return failure_; }

 private:
  std::shared_ptr<fakes::FakeClock> clock_;
  Rng rng_;
  Trace trace_;
  const absl::Time start_;
  std::string failure_;
};

}  // namespace sim
}  // namespace tether

#endif  // TETHER_TEST_SIM_WORLD_H_
