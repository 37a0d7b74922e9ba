// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "policies/out_of_range.h"
#include "tether/circuit_breaker.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "observability/readable_duration.h"
#include "tether/internal/deferred.h"
#include "tether/internal/mutex.h"
#include "tether/internal/stream_random.h"
#include "time/system_clock.h"

namespace tether {

absl::string_view BreakerStateName(BreakerState s) {
  switch (s) {
    case BreakerState::kClosed:
      return "closed";
    case BreakerState::kOpen:
      return "open";
    case BreakerState::kHalfOpen:
      return "half-open";
    case BreakerState::kForcedOpen:
      return "forced-open";
    case BreakerState::kDisabled:
      return "disabled";
  }
  return "unknown";
}

absl::string_view OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kSuccess:
      return "success";
    case Outcome::kFailure:
      return "failure";
    case Outcome::kIgnored:
      return "ignored";
  }
  return "unknown";
}

namespace {

absl::Status OutOfRange(absl::string_view field, absl::string_view value,
                        absl::string_view range) {
  return internal::OutOfRange("CircuitBreakerOptions", field, value, range);
}

}  // namespace

absl::Status Validate(const CircuitBreakerOptions& o) {
  using absl::FormatDuration;
  if (o.name.empty()) {
    return absl::InvalidArgumentError(
        "CircuitBreakerOptions.name must not be empty");
  }
  switch (o.window_type) {
    case SlidingWindowType::kCountBased:
      if (o.window_size < 1 || o.window_size > 1000000) {
        return OutOfRange("window_size", absl::StrCat(o.window_size),
                          "in [1, 1000000] for a count-based window");
      }
      break;
    case SlidingWindowType::kTimeBased:
      if (o.window_duration <= absl::ZeroDuration() ||
          o.window_duration > absl::Hours(24)) {
        return OutOfRange("window_duration", FormatDuration(o.window_duration),
                          "in (0, 24h] for a time-based window");
      }
      if (o.window_buckets < 1 || o.window_buckets > 10000) {
        return OutOfRange("window_buckets", absl::StrCat(o.window_buckets),
                          "in [1, 10000] for a time-based window");
      }
      if (o.window_duration / o.window_buckets < absl::Milliseconds(1)) {
        return OutOfRange("window_duration / window_buckets",
                          FormatDuration(o.window_duration / o.window_buckets),
                          "at least 1ms (fewer buckets or a longer window)");
      }
      break;
    default:
      return absl::InvalidArgumentError(
          "CircuitBreakerOptions.window_type is not a SlidingWindowType");
  }
  if (!(o.failure_rate_threshold > 0 && o.failure_rate_threshold <= 100)) {
    return OutOfRange("failure_rate_threshold",
                      absl::StrCat(o.failure_rate_threshold),
                      "in (0, 100] (a percentage)");
  }
  if (o.minimum_calls < 1) {
    return OutOfRange("minimum_calls", absl::StrCat(o.minimum_calls), ">= 1");
  }
  if (o.window_type == SlidingWindowType::kCountBased &&
      o.minimum_calls > o.window_size) {
    return OutOfRange(
        "minimum_calls", absl::StrCat(o.minimum_calls),
        absl::StrCat("<= window_size (", o.window_size,
                     ") for a count-based window, or it could never trip"));
  }
  if (o.consecutive_failures < 0 || o.consecutive_failures > 1000000) {
    return OutOfRange("consecutive_failures",
                      absl::StrCat(o.consecutive_failures),
                      "in [0, 1000000] (0 turns the rule off)");
  }
  if (o.break_duration <= absl::ZeroDuration() ||
      o.break_duration == absl::InfiniteDuration()) {
    return OutOfRange("break_duration", FormatDuration(o.break_duration),
                      "> 0 and finite");
  }
  if (!(o.break_multiplier >= 1.0 && o.break_multiplier <= 100.0)) {
    return OutOfRange("break_multiplier", absl::StrCat(o.break_multiplier),
                      "in [1, 100]");
  }
  if (o.max_break_duration < o.break_duration ||
      o.max_break_duration == absl::InfiniteDuration()) {
    return OutOfRange(
        "max_break_duration", FormatDuration(o.max_break_duration),
        absl::StrCat(">= break_duration (", FormatDuration(o.break_duration),
                     ") and finite"));
  }
  if (!(o.break_jitter >= 0.0 && o.break_jitter < 1.0)) {
    return OutOfRange("break_jitter", absl::StrCat(o.break_jitter),
                      "in [0, 1)");
  }
  if (o.half_open_permits < 1 || o.half_open_permits > 100000) {
    return OutOfRange("half_open_permits", absl::StrCat(o.half_open_permits),
                      "in [1, 100000]");
  }
  if (o.half_open_probe_timeout <= absl::ZeroDuration() ||
      o.half_open_probe_timeout > absl::Hours(24)) {
    return OutOfRange("half_open_probe_timeout",
                      FormatDuration(o.half_open_probe_timeout), "in (0, 24h]");
  }
  return absl::OkStatus();
}

namespace {

// The closed state's sliding window: either the last N outcomes (a ring) or
// the outcomes of the last T (a ring of per-bucket counts, aligned on the
// clock). Both keep running totals, so every update is O(1) amortized.
// Not thread-safe: the breaker guards it.
class SlidingWindow {
 public:
  struct Totals {
    std::uint64_t calls = 0;
    std::uint64_t failures = 0;
  };

  explicit SlidingWindow(const CircuitBreakerOptions& o)
      : type_(o.window_type) {
    if (type_ == SlidingWindowType::kCountBased) {
      ring_.assign(static_cast<std::size_t>(o.window_size), 0);
    } else {
      width_ = o.window_duration / o.window_buckets;
      buckets_.assign(static_cast<std::size_t>(o.window_buckets), Totals{});
    }
  }

  void Add(absl::Time now, bool failure) {
    if (type_ == SlidingWindowType::kCountBased) {
      if (filled_ == ring_.size()) {
        total_.calls -= 1;
        total_.failures -= ring_[next_];
      } else {
        ++filled_;
      }
      ring_[next_] = failure ? 1 : 0;
      next_ = (next_ + 1) % ring_.size();
    } else {
      Advance(now);
      Totals& b = buckets_[Slot(last_index_)];
      b.calls += 1;
      b.failures += failure ? 1 : 0;
    }
    total_.calls += 1;
    total_.failures += failure ? 1 : 0;
  }

  // What the window holds at `now` (a time window forgets old buckets).
  // Pure: reading never changes the window.
  Totals At(absl::Time now) const {
    if (type_ != SlidingWindowType::kTimeBased || !started_) return total_;
    const std::int64_t index = Index(now);
    if (index <= last_index_) return total_;
    const auto n = static_cast<std::int64_t>(buckets_.size());
    if (index - last_index_ >= n) return Totals{};
    Totals t = total_;
    for (std::int64_t k = last_index_ + 1; k <= index; ++k) {
      const Totals& b = buckets_[Slot(k)];
      t.calls -= b.calls;
      t.failures -= b.failures;
    }
    return t;
  }

  void Reset() {
    std::fill(ring_.begin(), ring_.end(), 0);
    next_ = filled_ = 0;
    for (Totals& b : buckets_) b = Totals{};
    total_ = Totals{};
  }

 private:
  // Forgets the buckets that fell out of the window by `now`.
  void Advance(absl::Time now) {
    const std::int64_t index = Index(now);
    if (!started_) {
      started_ = true;
      last_index_ = index;
      return;
    }
    if (index <= last_index_) return;
    const auto n = static_cast<std::int64_t>(buckets_.size());
    if (index - last_index_ >= n) {
      for (Totals& b : buckets_) b = Totals{};
      total_ = Totals{};
    } else {
      for (std::int64_t k = last_index_ + 1; k <= index; ++k) {
        Totals& b = buckets_[Slot(k)];
        total_.calls -= b.calls;
        total_.failures -= b.failures;
        b = Totals{};
      }
    }
    last_index_ = index;
  }

  std::int64_t Index(absl::Time t) const {
    absl::Duration rem;
    std::int64_t q = absl::IDivDuration(t - absl::UnixEpoch(), width_, &rem);
    if (rem < absl::ZeroDuration()) --q;
    return q;
  }

  std::size_t Slot(std::int64_t index) const {
    const auto n = static_cast<std::int64_t>(buckets_.size());
    return static_cast<std::size_t>(((index % n) + n) % n);
  }

  const SlidingWindowType type_;
  // kCountBased
  std::vector<std::uint8_t> ring_;  // 1 = failure
  std::size_t next_ = 0;
  std::size_t filled_ = 0;
  // kTimeBased
  absl::Duration width_;
  std::vector<Totals> buckets_;
  bool started_ = false;
  std::int64_t last_index_ = 0;
  // Both
  Totals total_;
};

}  // namespace

// Everything about a breaker that changes, behind one mutex.
//
// Rule: nothing user-supplied (observer, listeners) runs under `mu`. Each
// public method decides under the lock and queues the calls to make in a
// `Deferred` declared before the lock, which runs them after it. State
// changes go through a serialized queue, `transitions`: one thread at a time
// (the one that finds `delivering` false) delivers them, in order, so
// `OnStateChange` and listeners see transitions one at a time. The clock is
// called under the lock: a `Clock` never calls back from `RunAfter` or
// `Cancel`.
struct CircuitBreaker::State {
  struct Transition {
    BreakerState from = BreakerState::kClosed;
    BreakerState to = BreakerState::kClosed;
    Counts counts;
  };
  // A half-open probe permit not yet recorded.
  struct Probe {
    absl::Time expires;
    Clock::TimerId timer = 0;
  };

  State(const CircuitBreakerOptions& o, std::shared_ptr<Clock> c,
        std::uint64_t seed)
      : options(o), clock(std::move(c)), window(o), rng(seed) {}

  using Deferred = internal::Deferred;

  // --- Called with mu held -------------------------------------------------
  // Moves to `to`; `reason` says why (see `BreakerCounts::reason`).
  void TransitionLocked(BreakerState to, std::string reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void TripLocked(absl::Time now, std::string reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void MaybeHalfOpenLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void ApplySwitchesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Applies an outcome of a permit from `generation` (probe id `probe`, or
  // 0). False when it is the late outcome of an expired probe, in whatever
  // state the breaker is now: then nothing at all is counted.
  bool RecordLocked(std::uint64_t generation, std::uint64_t probe,
                    Outcome outcome, const absl::Status& cause)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void CancelProbeTimersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  Counts CountsLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  std::string RejectionLocked(absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Queues the observer's OnRecorded for `outcome` in `later`.
  void NotifyRecordedLocked(Outcome outcome, Deferred& later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // If transitions are waiting and no thread delivers them, makes this
  // thread the deliverer: `later` will call `DeliverTransitions`.
  void ClaimDeliveryLocked(Deferred& later) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // --- Called with mu not held ---------------------------------------------
  // Delivers queued transitions until none is left; only the claiming
  // thread runs it.
  void DeliverTransitions();
  void OnBreakTimer(std::uint64_t generation);
  void OnProbeTimeout(std::uint64_t generation, std::uint64_t probe);
  void ReleaseUnrecorded(std::uint64_t generation, std::uint64_t probe);

  const CircuitBreakerOptions& options;  // the breaker's, immutable
  const std::shared_ptr<Clock> clock;
  std::weak_ptr<CircuitBreaker> self;  // set once by Create

  mutable internal::Mutex mu;  // mutable: const readers lock it
  BreakerState current ABSL_GUARDED_BY(mu) = BreakerState::kClosed;
  // Bumped on every state change; permits carry the value they were issued
  // under. Starts at 1 (0 marks an empty permit).
  std::uint64_t generation ABSL_GUARDED_BY(mu) = 1;
  bool forced_open ABSL_GUARDED_BY(mu) = false;
  bool disabled ABSL_GUARDED_BY(mu) = false;
  SlidingWindow window ABSL_GUARDED_BY(mu);
  std::uint64_t consecutive_failures ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t consecutive_trips ABSL_GUARDED_BY(mu) = 0;
  absl::Time open_until ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  Clock::TimerId break_timer ABSL_GUARDED_BY(mu) = 0;  // only when open
  // Half-open: probes issued and not yet recorded (or expired), by id.
  std::map<std::uint64_t, Probe> probes ABSL_GUARDED_BY(mu);
  // Probes that timed out (already counted as ignored) and whose permit has
  // not come back yet. Kept across state changes: a permit's generation
  // cannot tell "expired, then the state changed" from "issued, then the
  // state changed", and only the second is still to be counted. An id leaves
  // when its permit is recorded or dropped, so this holds at most one id per
  // outstanding permit.
  std::set<std::uint64_t> expired_probes ABSL_GUARDED_BY(mu);
  std::uint64_t next_probe_id ABSL_GUARDED_BY(mu) = 0;
  int probes_succeeded ABSL_GUARDED_BY(mu) = 0;
  std::mt19937_64 rng ABSL_GUARDED_BY(mu);
  std::string trip_reason ABSL_GUARDED_BY(mu);
  // Why the breaker is in `current` (`BreakerCounts::reason`).
  std::string state_reason ABSL_GUARDED_BY(mu);
  std::string last_failure ABSL_GUARDED_BY(mu);
  Counts totals ABSL_GUARDED_BY(mu);  // lifetime counters only

  // The serialized transition queue and its deliverer.
  std::vector<Transition> transitions ABSL_GUARDED_BY(mu);
  bool delivering ABSL_GUARDED_BY(mu) = false;
  std::thread::id deliverer ABSL_GUARDED_BY(mu);
  std::uint64_t in_call ABSL_GUARDED_BY(mu) = 0;  // listener being called
  internal::CondVar listener_done;                // in_call changed
  std::map<std::uint64_t, std::shared_ptr<Listener>> listeners
      ABSL_GUARDED_BY(mu);
  std::uint64_t next_listener_id ABSL_GUARDED_BY(mu) = 0;
};

// --- Permit -----------------------------------------------------------------

CircuitBreaker::Permit::Permit(Permit&& other) noexcept
    : breaker_(std::move(other.breaker_)),
      generation_(std::exchange(other.generation_, 0)),
      probe_(std::exchange(other.probe_, 0)) {
  other.breaker_.reset();
}

CircuitBreaker::Permit& CircuitBreaker::Permit::operator=(
    Permit&& other) noexcept {
  if (this != &other) {
    Release();
    breaker_ = std::move(other.breaker_);
    other.breaker_.reset();
    generation_ = std::exchange(other.generation_, 0);
    probe_ = std::exchange(other.probe_, 0);
  }
  return *this;
}

CircuitBreaker::Permit::~Permit() { Release(); }

void CircuitBreaker::Permit::Release() {
  const std::uint64_t generation = std::exchange(generation_, 0);
  const std::uint64_t probe = std::exchange(probe_, 0);
  std::shared_ptr<CircuitBreaker> breaker = breaker_.lock();
  breaker_.reset();
  if (generation != 0 && breaker) {
    breaker->state_->ReleaseUnrecorded(generation, probe);
  }
}

// --- CircuitBreaker ---------------------------------------------------------

absl::StatusOr<std::shared_ptr<CircuitBreaker>> CircuitBreaker::Create(
    CircuitBreakerOptions options, std::shared_ptr<Clock> clock,
    std::uint64_t seed) {
  absl::Status valid = Validate(options);
  if (!valid.ok()) return valid;
  if (clock == nullptr) {
    // SystemClock() is never destroyed: share it without owning it.
    clock = internal::SharedSystemClock();
  }
  std::shared_ptr<CircuitBreaker> breaker(new CircuitBreaker(
      std::move(options), std::move(clock), internal::SeedOrEntropy(seed)));
  breaker->state_->self = breaker;
  return breaker;
}

CircuitBreaker::CircuitBreaker(CircuitBreakerOptions options,
                               std::shared_ptr<Clock> clock, std::uint64_t seed)
    : options_(std::move(options)),
      state_(std::make_unique<State>(options_, std::move(clock), seed)) {}

CircuitBreaker::~CircuitBreaker() {
  // Timers hold only a weak_ptr; cancel them so none is left in the clock.
  State& s = *state_;
  internal::MutexLock lock(&s.mu);
  if (s.break_timer != 0) s.clock->Cancel(s.break_timer);
  s.break_timer = 0;
  s.CancelProbeTimersLocked();
}

absl::StatusOr<CircuitBreaker::Permit> CircuitBreaker::TryAcquire() {
  State& s = *state_;
  State::Deferred later;  // runs after the lock is released
  std::uint64_t generation = 0;
  std::uint64_t probe = 0;
  bool permitted = false;
  std::string rejection;
  {
    internal::MutexLock lock(&s.mu);
    const absl::Time now = s.clock->Now();
    s.MaybeHalfOpenLocked(now);  // the break timer may not have run yet
    switch (s.current) {
      case BreakerState::kClosed:
      case BreakerState::kDisabled:
        permitted = true;
        break;
      case BreakerState::kHalfOpen:
        if (static_cast<int>(s.probes.size()) + s.probes_succeeded <
            options_.half_open_permits) {
          permitted = true;
          probe = ++s.next_probe_id;
          State::Probe& p = s.probes[probe];
          p.expires = now + options_.half_open_probe_timeout;
          std::weak_ptr<CircuitBreaker> weak = s.self;
          const std::uint64_t gen = s.generation;
          p.timer = s.clock->RunAfter(options_.half_open_probe_timeout,
                                      [weak, gen, probe] {
                                        if (auto b = weak.lock()) {
                                          b->state_->OnProbeTimeout(gen, probe);
                                        }
                                      });
        }
        break;
      case BreakerState::kOpen:
      case BreakerState::kForcedOpen:
        break;
    }
    generation = s.generation;
    if (!permitted) {
      ++s.totals.not_permitted;
      rejection = s.RejectionLocked(now);
      if (options_.observer) {
        auto observer = options_.observer;
        later.Add([observer, name = options_.name, c = s.CountsLocked(now)] {
          observer->OnNotPermitted(name, c);
        });
      }
    }
    s.ClaimDeliveryLocked(later);
  }
  // `later` runs after the return value is built, last: a listener may drop
  // the last reference to this breaker.
  if (!permitted) return absl::UnavailableError(std::move(rejection));
  return Permit(s.self, generation, probe);
}

void CircuitBreaker::Record(Permit permit, Outcome outcome,
                            const absl::Status& cause) {
  if (permit.generation_ == 0) return;
  if (permit.breaker_.lock().get() != this) return;  // its dtor releases it
  const std::uint64_t generation = std::exchange(permit.generation_, 0);
  const std::uint64_t probe = std::exchange(permit.probe_, 0);
  permit.breaker_.reset();
  State& s = *state_;
  State::Deferred later;  // runs after the lock is released
  {
    internal::MutexLock lock(&s.mu);
    if (s.RecordLocked(generation, probe, outcome, cause)) {
      s.NotifyRecordedLocked(outcome, later);
    }
    s.ClaimDeliveryLocked(later);
  }
}

void CircuitBreaker::State::ReleaseUnrecorded(std::uint64_t gen,
                                              std::uint64_t probe) {
  Deferred later;  // runs after the lock is released
  internal::MutexLock lock(&mu);
  if (RecordLocked(gen, probe, Outcome::kIgnored, absl::OkStatus())) {
    NotifyRecordedLocked(Outcome::kIgnored, later);
  }
  ClaimDeliveryLocked(later);
}

void CircuitBreaker::State::NotifyRecordedLocked(Outcome outcome,
                                                 Deferred& later) {
  if (!options.observer) return;
  auto observer = options.observer;
  later.Add(
      [observer, name = options.name, outcome, c = CountsLocked(clock->Now())] {
        observer->OnRecorded(name, outcome, c);
      });
}

bool CircuitBreaker::State::RecordLocked(std::uint64_t gen, std::uint64_t probe,
                                         Outcome outcome,
                                         const absl::Status& cause) {
  const bool current_generation = gen == generation;
  if (probe != 0) {
    // Counted when it timed out, whatever happened since.
    if (expired_probes.erase(probe) != 0) return false;
    if (current_generation) {
      auto it = probes.find(probe);
      if (it == probes.end()) return false;  // cannot happen; never count twice
      // Cancel may fail (the timer is due and about to run): OnProbeTimeout
      // then finds the probe gone and does nothing.
      clock->Cancel(it->second.timer);
      probes.erase(it);
    }
  }
  switch (outcome) {
    case Outcome::kSuccess:
      ++totals.successful;
      break;
    case Outcome::kFailure:
      ++totals.failed;
      last_failure =
          cause.ok() ? "(failure recorded without a status)" : cause.ToString();
      break;
    case Outcome::kIgnored:
      ++totals.ignored;
      break;
  }
  // A permit from before the last state change says nothing about now.
  if (!current_generation) return true;
  const bool failure = outcome == Outcome::kFailure;
  const absl::Time now = clock->Now();
  switch (current) {
    case BreakerState::kClosed: {
      if (outcome == Outcome::kIgnored) return true;
      window.Add(now, failure);
      consecutive_failures = failure ? consecutive_failures + 1 : 0;
      if (failure && options.consecutive_failures > 0 &&
          consecutive_failures >=
              static_cast<std::uint64_t>(options.consecutive_failures)) {
        TripLocked(now,
                   absl::StrCat(consecutive_failures, " consecutive failures"));
        return true;
      }
      const SlidingWindow::Totals w = window.At(now);
      if (w.calls < static_cast<std::uint64_t>(options.minimum_calls)) {
        return true;
      }
      const double rate = 100.0 * static_cast<double>(w.failures) /
                          static_cast<double>(w.calls);
      if (rate >= options.failure_rate_threshold) {
        TripLocked(now, absl::StrFormat(
                            "failure rate %.1f%% >= %g%% over %d calls", rate,
                            options.failure_rate_threshold, w.calls));
      }
      return true;
    }
    case BreakerState::kHalfOpen:
      // Same generation as a half-open state: one of its probes, now
      // removed from `probes`. An ignored one leaves its permit free.
      if (outcome == Outcome::kIgnored) return true;
      if (failure) {
        TripLocked(now, "a half-open probe failed");
        return true;
      }
      ++probes_succeeded;
      if (probes_succeeded >= options.half_open_permits) {
        TransitionLocked(BreakerState::kClosed,
                         absl::StrCat(probes_succeeded, " probes succeeded"));
      }
      return true;
    case BreakerState::kOpen:
    case BreakerState::kForcedOpen:
    case BreakerState::kDisabled:
      return true;
  }
  return true;
}

void CircuitBreaker::State::OnProbeTimeout(std::uint64_t gen,
                                           std::uint64_t probe) {
  Deferred later;  // runs after the lock is released
  internal::MutexLock lock(&mu);
  if (gen != generation || current != BreakerState::kHalfOpen) return;
  auto it = probes.find(probe);
  if (it == probes.end()) return;
  probes.erase(it);  // the permit is free again, as if dropped
  // Counted here, once: its late Record or drop, in any state, counts nothing.
  expired_probes.insert(probe);
  ++totals.ignored;
  NotifyRecordedLocked(Outcome::kIgnored, later);
  ClaimDeliveryLocked(later);
}

void CircuitBreaker::State::TripLocked(absl::Time now, std::string reason) {
  ++consecutive_trips;
  // Un-jittered break: break_duration * multiplier^(trips - 1), capped.
  // Duration * inf saturates to InfiniteDuration, which the cap catches.
  const double factor = std::pow(options.break_multiplier,
                                 static_cast<double>(consecutive_trips - 1));
  absl::Duration base = options.break_duration * factor;
  if (base > options.max_break_duration) base = options.max_break_duration;
  // One draw per trip, in [0, 1) with 53 random bits.
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  absl::Duration pause = base * (1.0 - options.break_jitter * u);
  if (pause <= absl::ZeroDuration()) pause = absl::Nanoseconds(1);
  TransitionLocked(BreakerState::kOpen, reason);
  trip_reason = std::move(reason);
  open_until = now + pause;  // saturates; the clock caps its own waits
  std::weak_ptr<CircuitBreaker> weak = self;
  const std::uint64_t gen = generation;
  break_timer = clock->RunAfter(pause, [weak, gen] {
    if (auto b = weak.lock()) b->state_->OnBreakTimer(gen);
  });
}

void CircuitBreaker::State::OnBreakTimer(std::uint64_t gen) {
  Deferred later;  // runs after the lock is released
  internal::MutexLock lock(&mu);
  if (current != BreakerState::kOpen || generation != gen) return;
  break_timer = 0;
  const absl::Time now = clock->Now();
  if (now >= open_until) {
    TransitionLocked(BreakerState::kHalfOpen, "break over");
  } else {
    // Early wake-up (a clock that rounds): wait for the rest.
    std::weak_ptr<CircuitBreaker> weak = self;
    break_timer = clock->RunAfter(open_until - now, [weak, gen] {
      if (auto b = weak.lock()) b->state_->OnBreakTimer(gen);
    });
  }
  ClaimDeliveryLocked(later);
}

void CircuitBreaker::State::MaybeHalfOpenLocked(absl::Time now) {
  if (current == BreakerState::kOpen && now >= open_until) {
    TransitionLocked(BreakerState::kHalfOpen, "break over");
  }
}

void CircuitBreaker::State::CancelProbeTimersLocked() {
  for (const auto& entry : probes) clock->Cancel(entry.second.timer);
  probes.clear();
}

void CircuitBreaker::State::TransitionLocked(BreakerState to,
                                             std::string reason) {
  const BreakerState from = current;
  if (from == to) return;
  state_reason = std::move(reason);
  current = to;
  ++generation;
  ++totals.transitions;
  if (break_timer != 0) {  // only an open breaker has one
    clock->Cancel(break_timer);
    break_timer = 0;
  }
  CancelProbeTimersLocked();  // only a half-open breaker has probes
  window.Reset();
  consecutive_failures = 0;
  probes_succeeded = 0;
  open_until = absl::InfinitePast();
  if (to == BreakerState::kClosed) {
    consecutive_trips = 0;
    trip_reason.clear();
  }
  transitions.push_back(Transition{from, to, CountsLocked(clock->Now())});
}

void CircuitBreaker::State::ApplySwitchesLocked() {
  BreakerState want;
  const char* why;
  if (forced_open) {
    want = BreakerState::kForcedOpen;
    why = "forced open";
  } else if (disabled) {
    want = BreakerState::kDisabled;
    why = "disabled";
  } else if (current == BreakerState::kForcedOpen ||
             current == BreakerState::kDisabled) {
    want = BreakerState::kClosed;
    why = "switches off";
  } else {
    return;
  }
  TransitionLocked(want, why);
}

void CircuitBreaker::OnDependencyAvailable() {
  State& s = *state_;
  State::Deferred later;  // runs after the lock is released
  internal::MutexLock lock(&s.mu);
  if (s.current == BreakerState::kOpen) {
    s.TransitionLocked(BreakerState::kHalfOpen, "dependency available");
  }
  s.ClaimDeliveryLocked(later);
}

void CircuitBreaker::SetForcedOpen(bool forced) {
  State& s = *state_;
  State::Deferred later;  // runs after the lock is released
  internal::MutexLock lock(&s.mu);
  s.forced_open = forced;
  s.ApplySwitchesLocked();
  s.ClaimDeliveryLocked(later);
}

void CircuitBreaker::SetDisabled(bool disabled) {
  State& s = *state_;
  State::Deferred later;  // runs after the lock is released
  internal::MutexLock lock(&s.mu);
  s.disabled = disabled;
  s.ApplySwitchesLocked();
  s.ClaimDeliveryLocked(later);
}

BreakerState CircuitBreaker::state() const {
  internal::MutexLock lock(&state_->mu);
  return state_->current;
}

absl::Time CircuitBreaker::open_until() const {
  const State& s = *state_;
  internal::MutexLock lock(&s.mu);
  switch (s.current) {
    case BreakerState::kOpen:
      return s.open_until;
    case BreakerState::kForcedOpen:
      return absl::InfiniteFuture();
    case BreakerState::kHalfOpen: {
      if (static_cast<int>(s.probes.size()) + s.probes_succeeded <
          options_.half_open_permits) {
        return absl::InfinitePast();
      }
      absl::Time first = absl::InfiniteFuture();
      for (const auto& entry : s.probes) {
        first = std::min(first, entry.second.expires);
      }
      return first;
    }
    case BreakerState::kClosed:
    case BreakerState::kDisabled:
      break;
  }
  return absl::InfinitePast();
}

CircuitBreaker::Counts CircuitBreaker::counts() const {
  internal::MutexLock lock(&state_->mu);
  return state_->CountsLocked(state_->clock->Now());
}

CircuitBreaker::Counts CircuitBreaker::State::CountsLocked(
    absl::Time now) const {
  const SlidingWindow::Totals w = window.At(now);
  Counts c = totals;
  c.state = current;
  c.window_calls = w.calls;
  c.window_failures = w.failures;
  c.failure_rate = w.calls == 0 ? 0.0
                                : 100.0 * static_cast<double>(w.failures) /
                                      static_cast<double>(w.calls);
  c.consecutive_failures = consecutive_failures;
  c.consecutive_trips = consecutive_trips;
  c.reason = state_reason;
  return c;
}

std::string CircuitBreaker::State::RejectionLocked(absl::Time now) const {
  std::string why;
  switch (current) {
    case BreakerState::kOpen:
      why = absl::StrCat("is open for another ",
                         internal::ReadableDuration(open_until - now), " (",
                         trip_reason, ")");
      break;
    case BreakerState::kHalfOpen:
      why = absl::StrCat("is half-open and all ", options.half_open_permits,
                         " probe permits are taken (", trip_reason, ")");
      break;
    case BreakerState::kForcedOpen:
      why = "is forced open";
      break;
    default:
      why = absl::StrCat("is ", BreakerStateName(current));
      break;
  }
  return absl::StrCat("circuit breaker '", options.name, "' ", why,
                      "; last failure: ",
                      last_failure.empty() ? "none recorded" : last_failure);
}

std::uint64_t CircuitBreaker::AddListener(Listener listener) {
  State& s = *state_;
  internal::MutexLock lock(&s.mu);
  const std::uint64_t id = ++s.next_listener_id;
  s.listeners.emplace(id, std::make_shared<Listener>(std::move(listener)));
  return id;
}

void CircuitBreaker::RemoveListener(std::uint64_t id) {
  State& s = *state_;
  std::shared_ptr<Listener> drop;  // destroyed after the lock is released
  internal::MutexLock lock(&s.mu);
  auto it = s.listeners.find(id);
  if (it != s.listeners.end()) {
    drop = std::move(it->second);
    s.listeners.erase(it);
  }
  if (s.deliverer == std::this_thread::get_id()) return;  // from a listener
  while (s.delivering && s.in_call == id) s.listener_done.Wait(&s.mu);
}

void CircuitBreaker::State::ClaimDeliveryLocked(Deferred& later) {
  if (delivering || transitions.empty()) return;
  std::shared_ptr<CircuitBreaker> keep = self.lock();
  if (keep == nullptr) return;  // being destroyed: nobody left to tell
  delivering = true;
  deliverer = std::this_thread::get_id();
  // Holds the breaker: a listener may drop the last outside reference.
  later.Add([keep] { keep->state_->DeliverTransitions(); });
}

void CircuitBreaker::State::DeliverTransitions() {
  std::size_t next = 0;
  for (;;) {
    Transition t;
    std::vector<std::pair<std::uint64_t, std::shared_ptr<Listener>>> targets;
    {
      internal::MutexLock lock(&mu);
      if (next >= transitions.size()) {
        transitions.clear();
        delivering = false;
        deliverer = std::thread::id();
        return;
      }
      t = transitions[next++];
      targets.assign(listeners.begin(), listeners.end());
    }
    if (options.observer) {
      options.observer->OnStateChange(options.name, t.from, t.to, t.counts);
    }
    for (auto& [id, listener] : targets) {
      {
        internal::MutexLock lock(&mu);
        if (listeners.count(id) == 0) continue;  // removed since
        in_call = id;
      }
      (*listener)(t.from, t.to);
      internal::MutexLock lock(&mu);
      in_call = 0;
      listener_done.SignalAll();
    }
  }
}

}  // namespace tether
