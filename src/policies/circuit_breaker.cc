// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/circuit_breaker.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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
  return absl::InvalidArgumentError(absl::StrCat(
      "CircuitBreakerOptions.", field, " must be ", range, ", got ", value));
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
  return absl::OkStatus();
}

// The closed state's sliding window: either the last N outcomes (a ring) or
// the outcomes of the last T (a ring of per-bucket counts, aligned on the
// clock). Both keep running totals, so every operation is O(1) amortized.
struct CircuitBreaker::Window {
  struct Bucket {
    std::uint64_t calls = 0;
    std::uint64_t failures = 0;
  };

  explicit Window(const CircuitBreakerOptions& o) : type(o.window_type) {
    if (type == SlidingWindowType::kCountBased) {
      ring.assign(static_cast<std::size_t>(o.window_size), 0);
    } else {
      width = o.window_duration / o.window_buckets;
      buckets.assign(static_cast<std::size_t>(o.window_buckets), Bucket{});
    }
  }

  // Forgets the buckets that fell out of the window by `now`.
  void Advance(absl::Time now) {
    if (type != SlidingWindowType::kTimeBased) return;
    std::int64_t index = Index(now);
    if (!started) {
      started = true;
      last_index = index;
      return;
    }
    if (index <= last_index) return;
    const auto n = static_cast<std::int64_t>(buckets.size());
    if (index - last_index >= n) {
      for (Bucket& b : buckets) b = Bucket{};
      calls = failures = 0;
    } else {
      for (std::int64_t k = last_index + 1; k <= index; ++k) {
        Bucket& b = buckets[Slot(k)];
        calls -= b.calls;
        failures -= b.failures;
        b = Bucket{};
      }
    }
    last_index = index;
  }

  void Add(absl::Time now, bool failure) {
    if (type == SlidingWindowType::kCountBased) {
      if (filled == ring.size()) {
        calls -= 1;
        failures -= ring[next];
      } else {
        ++filled;
      }
      ring[next] = failure ? 1 : 0;
      next = (next + 1) % ring.size();
    } else {
      Advance(now);
      Bucket& b = buckets[Slot(last_index)];
      b.calls += 1;
      b.failures += failure ? 1 : 0;
    }
    calls += 1;
    failures += failure ? 1 : 0;
  }

  void Reset() {
    std::fill(ring.begin(), ring.end(), 0);
    next = filled = 0;
    for (Bucket& b : buckets) b = Bucket{};
    calls = failures = 0;
  }

  std::int64_t Index(absl::Time t) const {
    absl::Duration rem;
    std::int64_t q = absl::IDivDuration(t - absl::UnixEpoch(), width, &rem);
    if (rem < absl::ZeroDuration()) --q;
    return q;
  }

  std::size_t Slot(std::int64_t index) const {
    const auto n = static_cast<std::int64_t>(buckets.size());
    return static_cast<std::size_t>(((index % n) + n) % n);
  }

  const SlidingWindowType type;
  // kCountBased
  std::vector<std::uint8_t> ring;  // 1 = failure
  std::size_t next = 0;
  std::size_t filled = 0;
  // kTimeBased
  absl::Duration width;
  std::vector<Bucket> buckets;
  bool started = false;
  std::int64_t last_index = 0;
  // Both
  std::uint64_t calls = 0;
  std::uint64_t failures = 0;
};

// --- Permit -----------------------------------------------------------------

CircuitBreaker::Permit::Permit(Permit&& other) noexcept
    : breaker_(std::move(other.breaker_)),
      generation_(std::exchange(other.generation_, 0)),
      probe_(std::exchange(other.probe_, false)) {
  other.breaker_.reset();
}

CircuitBreaker::Permit& CircuitBreaker::Permit::operator=(
    Permit&& other) noexcept {
  if (this != &other) {
    Release();
    breaker_ = std::move(other.breaker_);
    other.breaker_.reset();
    generation_ = std::exchange(other.generation_, 0);
    probe_ = std::exchange(other.probe_, false);
  }
  return *this;
}

CircuitBreaker::Permit::~Permit() { Release(); }

void CircuitBreaker::Permit::Release() {
  std::uint64_t generation = std::exchange(generation_, 0);
  probe_ = false;
  std::shared_ptr<CircuitBreaker> breaker = breaker_.lock();
  breaker_.reset();
  if (generation != 0 && breaker) breaker->ReleaseUnrecorded(generation);
}

// --- CircuitBreaker ---------------------------------------------------------

absl::StatusOr<std::shared_ptr<CircuitBreaker>> CircuitBreaker::Create(
    CircuitBreakerOptions options, std::shared_ptr<Clock> clock,
    std::uint64_t seed) {
  absl::Status valid = Validate(options);
  if (!valid.ok()) return valid;
  if (clock == nullptr) {
    // SystemClock() is never destroyed: share it without owning it.
    clock = std::shared_ptr<Clock>(&SystemClock(), [](Clock*) {});
  }
  if (seed == 0) {
    absl::BitGen gen;
    seed = absl::Uniform<std::uint64_t>(gen);
  }
  return std::shared_ptr<CircuitBreaker>(
      new CircuitBreaker(std::move(options), std::move(clock), seed));
}

CircuitBreaker::CircuitBreaker(CircuitBreakerOptions options,
                               std::shared_ptr<Clock> clock, std::uint64_t seed)
    : options_(std::move(options)),
      clock_(std::move(clock)),
      window_(std::make_unique<Window>(options_)),
      rng_(seed) {}

CircuitBreaker::~CircuitBreaker() {
  std::lock_guard<std::mutex> lock(mu_);
  if (timer_ != 0) clock_->Cancel(timer_);
  timer_ = 0;
}

absl::StatusOr<CircuitBreaker::Permit> CircuitBreaker::TryAcquire() {
  bool permitted = false;
  bool probe = false;
  std::uint64_t generation = 0;
  std::string rejection;
  Counts counts;
  bool dispatch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    absl::Time now = clock_->Now();
    MaybeHalfOpenLocked(now);
    switch (state_) {
      case BreakerState::kClosed:
      case BreakerState::kDisabled:
        permitted = true;
        break;
      case BreakerState::kHalfOpen:
        if (probes_in_flight_ + probes_succeeded_ <
            options_.half_open_permits) {
          ++probes_in_flight_;
          permitted = true;
          probe = true;
        }
        break;
      case BreakerState::kOpen:
      case BreakerState::kForcedOpen:
        break;
    }
    generation = generation_;
    if (!permitted) {
      ++totals_.not_permitted;
      rejection = RejectionLocked(now);
      if (options_.observer) counts = CountsLocked();
    }
    dispatch = ClaimDispatchLocked();
  }
  absl::StatusOr<Permit> result;
  if (permitted) {
    result = Permit(weak_from_this(), generation, probe);
  } else {
    if (options_.observer) options_.observer->OnNotPermitted(name(), counts);
    result = absl::UnavailableError(std::move(rejection));
  }
  // Last: a listener may drop the last reference to this breaker.
  if (dispatch) Dispatch();
  return result;
}

void CircuitBreaker::Record(Permit permit, Outcome outcome,
                            const absl::Status& cause) {
  if (permit.generation_ == 0) return;
  if (permit.breaker_.lock().get() != this) return;  // its dtor releases it
  std::uint64_t generation = std::exchange(permit.generation_, 0);
  permit.breaker_.reset();
  Counts counts;
  bool dispatch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    RecordLocked(generation, outcome, cause);
    if (options_.observer) counts = CountsLocked();
    dispatch = ClaimDispatchLocked();
  }
  if (options_.observer) options_.observer->OnRecorded(name(), outcome, counts);
  if (dispatch) Dispatch();  // last: see TryAcquire
}

void CircuitBreaker::ReleaseUnrecorded(std::uint64_t generation) {
  Counts counts;
  bool dispatch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    RecordLocked(generation, Outcome::kIgnored, absl::OkStatus());
    if (options_.observer) counts = CountsLocked();
    dispatch = ClaimDispatchLocked();
  }
  if (options_.observer) {
    options_.observer->OnRecorded(name(), Outcome::kIgnored, counts);
  }
  if (dispatch) Dispatch();  // last: see TryAcquire
}

void CircuitBreaker::RecordLocked(std::uint64_t generation, Outcome outcome,
                                  const absl::Status& cause) {
  switch (outcome) {
    case Outcome::kSuccess:
      ++totals_.successful;
      break;
    case Outcome::kFailure:
      ++totals_.failed;
      last_failure_ =
          cause.ok() ? "(failure recorded without a status)" : cause.ToString();
      break;
    case Outcome::kIgnored:
      ++totals_.ignored;
      break;
  }
  // A permit from before the last state change says nothing about now.
  if (generation != generation_) return;
  const bool failure = outcome == Outcome::kFailure;
  absl::Time now = clock_->Now();
  switch (state_) {
    case BreakerState::kClosed: {
      if (outcome == Outcome::kIgnored) return;
      window_->Add(now, failure);
      consecutive_failures_ = failure ? consecutive_failures_ + 1 : 0;
      if (failure && options_.consecutive_failures > 0 &&
          consecutive_failures_ >=
              static_cast<std::uint64_t>(options_.consecutive_failures)) {
        TripLocked(
            now, absl::StrCat(consecutive_failures_, " consecutive failures"));
        return;
      }
      const std::uint64_t calls = window_->calls;
      if (calls < static_cast<std::uint64_t>(options_.minimum_calls)) return;
      const double rate = 100.0 * static_cast<double>(window_->failures) /
                          static_cast<double>(calls);
      if (rate >= options_.failure_rate_threshold) {
        TripLocked(
            now, absl::StrFormat("failure rate %.1f%% >= %g%% over %d "
                                 "calls",
                                 rate, options_.failure_rate_threshold, calls));
      }
      return;
    }
    case BreakerState::kHalfOpen:
      // Same generation as a half-open state: this is one of its probes.
      --probes_in_flight_;
      if (outcome == Outcome::kIgnored) return;  // the permit is free again
      if (failure) {
        TripLocked(now, "a half-open probe failed");
        return;
      }
      ++probes_succeeded_;
      if (probes_succeeded_ >= options_.half_open_permits) {
        TransitionLocked(BreakerState::kClosed);
      }
      return;
    case BreakerState::kOpen:
    case BreakerState::kForcedOpen:
    case BreakerState::kDisabled:
      return;
  }
}

void CircuitBreaker::TripLocked(absl::Time now, std::string reason) {
  ++consecutive_trips_;
  // Un-jittered break: break_duration * multiplier^(trips - 1), capped.
  // Duration * inf saturates to InfiniteDuration, which the cap catches.
  const double factor = std::pow(options_.break_multiplier,
                                 static_cast<double>(consecutive_trips_ - 1));
  absl::Duration base = options_.break_duration * factor;
  if (base > options_.max_break_duration) base = options_.max_break_duration;
  // One draw per trip, in [0, 1) with 53 random bits.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  absl::Duration pause = base * (1.0 - options_.break_jitter * u);
  if (pause <= absl::ZeroDuration()) pause = absl::Nanoseconds(1);
  trip_reason_ = std::move(reason);
  open_until_ = now + pause;
  TransitionLocked(BreakerState::kOpen);
  const std::uint64_t generation = generation_;
  std::weak_ptr<CircuitBreaker> weak = weak_from_this();
  timer_ = clock_->RunAfter(pause, [weak, generation] {
    if (auto self = weak.lock()) self->OnTimer(generation);
  });
}

void CircuitBreaker::OnTimer(std::uint64_t generation) {
  bool dispatch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != BreakerState::kOpen || generation_ != generation) return;
    timer_ = 0;
    absl::Time now = clock_->Now();
    if (now >= open_until_) {
      TransitionLocked(BreakerState::kHalfOpen);
    } else {
      // Early wake-up (a clock that rounds): wait for the rest.
      std::weak_ptr<CircuitBreaker> weak = weak_from_this();
      timer_ = clock_->RunAfter(open_until_ - now, [weak, generation] {
        if (auto self = weak.lock()) self->OnTimer(generation);
      });
    }
    dispatch = ClaimDispatchLocked();
  }
  if (dispatch) Dispatch();
}

void CircuitBreaker::MaybeHalfOpenLocked(absl::Time now) const {
  if (state_ == BreakerState::kOpen && now >= open_until_) {
    TransitionLocked(BreakerState::kHalfOpen);
  }
}

void CircuitBreaker::TransitionLocked(BreakerState to) const {
  const BreakerState from = state_;
  if (from == to) return;
  state_ = to;
  ++generation_;
  ++totals_.transitions;
  if (timer_ != 0) {  // only an open breaker has a timer
    clock_->Cancel(timer_);
    timer_ = 0;
  }
  window_->Reset();
  consecutive_failures_ = 0;
  probes_in_flight_ = 0;
  probes_succeeded_ = 0;
  if (to != BreakerState::kOpen) open_until_ = absl::InfinitePast();
  if (to == BreakerState::kClosed) {
    consecutive_trips_ = 0;
    trip_reason_.clear();
  }
  events_.push_back(Event{from, to, CountsLocked()});
}

void CircuitBreaker::ApplySwitchesLocked() {
  BreakerState want;
  if (forced_open_) {
    want = BreakerState::kForcedOpen;
  } else if (disabled_) {
    want = BreakerState::kDisabled;
  } else if (state_ == BreakerState::kForcedOpen ||
             state_ == BreakerState::kDisabled) {
    want = BreakerState::kClosed;
  } else {
    return;
  }
  TransitionLocked(want);
}

void CircuitBreaker::SetForcedOpen(bool forced) {
  bool dispatch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    forced_open_ = forced;
    ApplySwitchesLocked();
    dispatch = ClaimDispatchLocked();
  }
  if (dispatch) Dispatch();
}

void CircuitBreaker::SetDisabled(bool disabled) {
  bool dispatch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    disabled_ = disabled;
    ApplySwitchesLocked();
    dispatch = ClaimDispatchLocked();
  }
  if (dispatch) Dispatch();
}

BreakerState CircuitBreaker::state() const {
  BreakerState s;
  bool dispatch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    MaybeHalfOpenLocked(clock_->Now());
    s = state_;
    dispatch = ClaimDispatchLocked();
  }
  if (dispatch) Dispatch();
  return s;
}

absl::Time CircuitBreaker::open_until() const {
  absl::Time t;
  bool dispatch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    MaybeHalfOpenLocked(clock_->Now());
    switch (state_) {
      case BreakerState::kOpen:
        t = open_until_;
        break;
      case BreakerState::kForcedOpen:
        t = absl::InfiniteFuture();
        break;
      case BreakerState::kHalfOpen:
        t = probes_in_flight_ + probes_succeeded_ < options_.half_open_permits
                ? absl::InfinitePast()
                : absl::InfiniteFuture();
        break;
      default:
        t = absl::InfinitePast();
        break;
    }
    dispatch = ClaimDispatchLocked();
  }
  if (dispatch) Dispatch();
  return t;
}

CircuitBreaker::Counts CircuitBreaker::counts() const {
  Counts c;
  bool dispatch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    MaybeHalfOpenLocked(clock_->Now());
    c = CountsLocked();
    dispatch = ClaimDispatchLocked();
  }
  if (dispatch) Dispatch();
  return c;
}

CircuitBreaker::Counts CircuitBreaker::CountsLocked() const {
  window_->Advance(clock_->Now());
  Counts c = totals_;
  c.state = state_;
  c.window_calls = window_->calls;
  c.window_failures = window_->failures;
  c.failure_rate = window_->calls == 0
                       ? 0.0
                       : 100.0 * static_cast<double>(window_->failures) /
                             static_cast<double>(window_->calls);
  c.consecutive_failures = consecutive_failures_;
  c.consecutive_trips = consecutive_trips_;
  return c;
}

std::string CircuitBreaker::RejectionLocked(absl::Time now) const {
  std::string why;
  switch (state_) {
    case BreakerState::kOpen:
      why = absl::StrCat("is open for another ",
                         absl::FormatDuration(open_until_ - now), " (",
                         trip_reason_, ")");
      break;
    case BreakerState::kHalfOpen:
      why = absl::StrCat("is half-open and all ", options_.half_open_permits,
                         " probe permits are taken (", trip_reason_, ")");
      break;
    case BreakerState::kForcedOpen:
      why = "is forced open";
      break;
    default:
      why = absl::StrCat("is ", BreakerStateName(state_));
      break;
  }
  return absl::StrCat("circuit breaker '", options_.name, "' ", why,
                      "; last failure: ",
                      last_failure_.empty() ? "none recorded" : last_failure_);
}

std::uint64_t CircuitBreaker::AddListener(Listener listener) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::uint64_t id = ++next_listener_id_;
  listeners_.emplace(id, std::make_shared<Listener>(std::move(listener)));
  return id;
}

void CircuitBreaker::RemoveListener(std::uint64_t id) {
  std::unique_lock<std::mutex> lock(mu_);
  listeners_.erase(id);
  if (dispatching_ && dispatcher_ != std::this_thread::get_id()) {
    listener_done_.wait(lock, [this, id] { return in_call_ != id; });
  }
}

bool CircuitBreaker::ClaimDispatchLocked() const {
  if (dispatching_ || events_.empty()) return false;
  dispatching_ = true;
  dispatcher_ = std::this_thread::get_id();
  return true;
}

void CircuitBreaker::Dispatch() const {
  // A listener may drop the last outside reference to this breaker.
  std::shared_ptr<const CircuitBreaker> self = weak_from_this().lock();
  for (;;) {
    Event event;
    std::vector<std::pair<std::uint64_t, std::shared_ptr<Listener>>> listeners;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (events_.empty()) {
        dispatching_ = false;
        dispatcher_ = std::thread::id();
        return;
      }
      event = std::move(events_.front());
      events_.pop_front();
      listeners.assign(listeners_.begin(), listeners_.end());
    }
    if (options_.observer) {
      options_.observer->OnStateChange(name(), event.from, event.to,
                                       event.counts);
    }
    for (auto& entry : listeners) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (listeners_.count(entry.first) == 0) continue;  // removed since
        in_call_ = entry.first;
      }
      (*entry.second)(event.from, event.to);
      std::lock_guard<std::mutex> lock(mu_);
      in_call_ = 0;
      listener_done_.notify_all();
    }
  }
}

}  // namespace tether
