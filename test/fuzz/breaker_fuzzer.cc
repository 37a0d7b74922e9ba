// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Fuzzes `CircuitBreaker` through its public API on a `FakeClock`: options
// from the first bytes, then permits taken, recorded with any outcome,
// dropped unrecorded or kept across state changes, time advances, and the
// forced-open and disabled switches. After every step the harness checks
// the breaker's contract (see `Check`).
//
// Single-threaded and deterministic (fixed jitter seed).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "test/fuzz/fuzz_input.h"
#include "tether/circuit_breaker.h"
#include "tether/testing/fake_clock.h"

namespace tether {
namespace fuzz {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "breaker_fuzzer: invariant violated: %s\n",
               what.c_str());
  std::fflush(stderr);
  std::abort();
}

bool Legal(BreakerState from, BreakerState to) {
  if (from == to) return false;
  switch (to) {
    case BreakerState::kForcedOpen:
    case BreakerState::kDisabled:
      return true;  // the switches apply in any state
    case BreakerState::kOpen:
      return from == BreakerState::kClosed || from == BreakerState::kHalfOpen;
    case BreakerState::kHalfOpen:
      return from == BreakerState::kOpen;
    case BreakerState::kClosed:
      // A successful half-open, or releasing the switches.
      return from == BreakerState::kHalfOpen ||
             from == BreakerState::kForcedOpen ||
             from == BreakerState::kDisabled;
  }
  return false;
}

class Harness {
 public:
  explicit Harness(FuzzInput& in) : in_(in) {}

  void Run() {
    CircuitBreakerOptions o;
    const std::uint8_t b = in_.Byte();
    o.name = "fuzz";
    if (b & 1) {
      o.window_type = SlidingWindowType::kTimeBased;
      o.window_duration = absl::Seconds(1 + in_.Byte() % 10);
      o.window_buckets = 1 + in_.Byte() % 10;
    } else {
      o.window_size = 1 + in_.Byte() % 8;
    }
    o.minimum_calls = 1 + in_.Byte() % 4;
    if (o.window_type == SlidingWindowType::kCountBased &&
        o.minimum_calls > o.window_size) {
      o.minimum_calls = o.window_size;
    }
    o.failure_rate_threshold = 10 + in_.Byte() % 91;
    o.consecutive_failures = in_.Byte() % 4;
    o.break_duration = absl::Milliseconds(100 + 100 * (in_.Byte() % 20));
    o.max_break_duration = o.break_duration * (1 + in_.Byte() % 8);
    o.break_multiplier = 1 + in_.Byte() % 3;
    o.break_jitter = (b & 2) ? 0.5 : 0.0;
    o.half_open_permits = 1 + in_.Byte() % 3;
    if (!Validate(o).ok()) Fail(Validate(o).ToString());
    options_ = o;
    auto made = CircuitBreaker::Create(o, clock_, /*seed=*/11);
    if (!made.ok()) Fail(made.status().ToString());
    breaker_ = *std::move(made);
    breaker_->AddListener([this](BreakerState from, BreakerState to) {
      if (!Legal(from, to)) {
        Fail(absl::StrCat("illegal transition ", BreakerStateName(from), " -> ",
                          BreakerStateName(to)));
      }
      if (from != last_) {
        Fail(absl::StrCat("transition from ", BreakerStateName(from),
                          " but the last one went to ",
                          BreakerStateName(last_)));
      }
      last_ = to;
      ++transitions_;
      // Permits issued before a change belong to the old state.
      ++generation_;
    });
    int steps = 0;
    while (!in_.empty() && steps++ < 500) {
      Step();
      Check();
    }
    for (const Held& h : held_) {
      if (!h.expired) ++dropped_;
    }
    held_.clear();  // dropped unrecorded: ignored (unless already expired)
    Check();
  }

 private:
  struct Held {
    CircuitBreaker::Permit permit;
    std::uint64_t generation = 0;  // `generation_` when it was issued
    // A half-open probe expires (the breaker counts it as ignored and
    // ignores its late outcome) `half_open_probe_timeout` after it was
    // issued, if the breaker is still in that half-open state.
    bool probe = false;
    absl::Time issued;
    bool expired = false;
  };

  // Marks the held probes whose timeout has passed in their own state.
  void ExpireProbes() {
    const absl::Time now = clock_->Now();
    for (Held& h : held_) {
      if (h.probe && !h.expired && h.generation == generation_ &&
          now >= h.issued + options_.half_open_probe_timeout) {
        h.expired = true;
        ++expired_;
      }
    }
  }

  void Step() {
    const std::uint8_t op = in_.Byte() % 8;
    switch (op) {
      case 0:
      case 1: {
        const BreakerState before = breaker_->state();
        absl::StatusOr<CircuitBreaker::Permit> p = breaker_->TryAcquire();
        if (!p.ok()) {
          ++rejected_;
          if (p.status().code() != absl::StatusCode::kUnavailable) {
            Fail("rejection is not UNAVAILABLE: " + p.status().ToString());
          }
          if (before == BreakerState::kClosed ||
              before == BreakerState::kDisabled) {
            Fail(absl::StrCat("a ", BreakerStateName(before),
                              " breaker rejected a call"));
          }
          return;
        }
        if (before == BreakerState::kForcedOpen) {
          Fail("a forced-open breaker permitted a call");
        }
        if (!p->valid()) Fail("TryAcquire returned an empty permit");
        Held h;
        h.permit = *std::move(p);
        h.generation = generation_;
        h.probe = breaker_->state() == BreakerState::kHalfOpen;
        h.issued = clock_->Now();
        held_.push_back(std::move(h));
        return;
      }
      case 2:
      case 3: {  // record one held permit
        if (held_.empty()) return;
        const std::size_t i = in_.Byte() % held_.size();
        const std::uint8_t o = in_.Byte() % 3;
        const Outcome outcome = o == 0   ? Outcome::kSuccess
                                : o == 1 ? Outcome::kFailure
                                         : Outcome::kIgnored;
        Held h = std::move(held_[i]);
        held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
        const BreakerCounts before = breaker_->counts();
        const std::uint64_t transitions_before = transitions_;
        breaker_->Record(std::move(h.permit), outcome,
                         absl::UnavailableError("fuzz: failure"));
        if (!h.expired) ++recorded_;
        const BreakerCounts after = breaker_->counts();
        if (outcome == Outcome::kIgnored &&
            transitions_ == transitions_before &&
            (after.window_calls != before.window_calls ||
             after.window_failures != before.window_failures ||
             after.consecutive_failures != before.consecutive_failures ||
             after.state != before.state)) {
          Fail(absl::StrCat(
              "an ignored outcome changed the window: calls ",
              before.window_calls, "->", after.window_calls, ", failures ",
              before.window_failures, "->", after.window_failures, ", run ",
              before.consecutive_failures, "->", after.consecutive_failures));
        }
        if (h.generation != generation_ && transitions_ == transitions_before &&
            (after.window_calls != before.window_calls ||
             after.window_failures != before.window_failures)) {
          Fail("an outcome from an earlier state changed the window");
        }
        return;
      }
      case 4: {  // drop one held permit unrecorded
        if (held_.empty()) return;
        const std::size_t i = in_.Byte() % held_.size();
        if (!held_[i].expired) ++dropped_;
        held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
        return;
      }
      case 5: {
        const absl::Duration d[] = {
            absl::ZeroDuration(), absl::Milliseconds(50),
            absl::Milliseconds(500), absl::Seconds(2), absl::Seconds(30)};
        clock_->AdvanceBy(d[in_.Byte() % 5]);
        ExpireProbes();
        return;
      }
      case 6: {
        const std::uint8_t s = in_.Byte() % 4;
        if (s < 2)
          breaker_->SetForcedOpen(s == 0);
        else
          breaker_->SetDisabled(s == 2);
        return;
      }
      case 7:
        (void)breaker_->open_until();
        return;
    }
  }

  void Check() {
    const BreakerCounts c = breaker_->counts();
    if (c.state != last_) {
      Fail(absl::StrCat("counts().state ", BreakerStateName(c.state),
                        " but the listener last saw ",
                        BreakerStateName(last_)));
    }
    if (c.successful + c.failed + c.ignored != recorded_ + dropped_ + expired_) {
      Fail(absl::StrCat("outcome totals ", c.successful, "+", c.failed, "+",
                        c.ignored, " but ", recorded_, " recorded, ",
                        dropped_, " dropped and ", expired_, " expired"));
    }
    if (c.not_permitted != rejected_) {
      Fail(absl::StrCat("not_permitted ", c.not_permitted, " but ", rejected_,
                        " rejections"));
    }
    if (c.transitions != transitions_) {
      Fail(absl::StrCat("transitions ", c.transitions, " but the listener saw ",
                        transitions_));
    }
    if (c.window_failures > c.window_calls) Fail("window failures > calls");
    if (options_.window_type == SlidingWindowType::kCountBased &&
        c.window_calls > static_cast<std::uint64_t>(options_.window_size)) {
      Fail(absl::StrCat("window holds ", c.window_calls, " > size ",
                        options_.window_size));
    }
    if (c.state != BreakerState::kClosed &&
        (c.window_calls != 0 || c.window_failures != 0)) {
      Fail(absl::StrCat("window not empty in state ",
                        BreakerStateName(c.state)));
    }
    const double rate =
        c.window_calls == 0 ? 0 : 100.0 * c.window_failures / c.window_calls;
    if (c.failure_rate < rate - 1e-9 || c.failure_rate > rate + 1e-9) {
      Fail(absl::StrCat("failure_rate ", c.failure_rate, " but ", rate));
    }
    // Half-open: never more probes out than permits.
    if (c.state == BreakerState::kHalfOpen) {
      int probes = 0;
      for (auto& h : held_) {
        // An expired probe's permit was given back: it no longer counts.
        if (h.generation == generation_ && h.permit.valid() &&
            h.permit.is_probe() && !h.expired)
          ++probes;
      }
      if (probes > options_.half_open_permits) {
        Fail(absl::StrCat(probes, " probes out, half_open_permits ",
                          options_.half_open_permits));
      }
    }
  }

  FuzzInput& in_;
  CircuitBreakerOptions options_;
  std::shared_ptr<fakes::FakeClock> clock_ =
      std::make_shared<fakes::FakeClock>();
  std::shared_ptr<CircuitBreaker> breaker_;
  std::vector<Held> held_;
  BreakerState last_ = BreakerState::kClosed;
  std::uint64_t transitions_ = 0;
  std::uint64_t generation_ = 0;  // bumped on every transition
  std::uint64_t recorded_ = 0;
  std::uint64_t dropped_ = 0;
  std::uint64_t expired_ = 0;  // probes the breaker timed out
  std::uint64_t rejected_ = 0;
};

}  // namespace
}  // namespace fuzz
}  // namespace tether

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  tether::fuzz::FuzzInput in(data, size);
  tether::fuzz::Harness h(in);
  h.Run();
  return 0;
}
