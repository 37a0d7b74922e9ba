// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/circuit_breaker.h"

#include <atomic>
#include <cmath>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tether/testing/fake_clock.h"

namespace tether {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;
using ::testing::SizeIs;
using ::tether::fakes::FakeClock;
using Transition = std::pair<BreakerState, BreakerState>;

constexpr BreakerState kClosed = BreakerState::kClosed;
constexpr BreakerState kOpen = BreakerState::kOpen;
constexpr BreakerState kHalfOpen = BreakerState::kHalfOpen;
constexpr BreakerState kForcedOpen = BreakerState::kForcedOpen;
constexpr BreakerState kDisabled = BreakerState::kDisabled;

// No jitter, so break durations are exact.
CircuitBreakerOptions BaseOptions() {
  CircuitBreakerOptions o;
  o.name = "backend:443";
  o.window_size = 10;
  o.minimum_calls = 4;
  o.failure_rate_threshold = 50;
  o.break_duration = absl::Seconds(1);
  o.break_multiplier = 2;
  o.max_break_duration = absl::Seconds(5);
  o.break_jitter = 0;
  o.half_open_permits = 2;
  return o;
}

// One failure trips it.
CircuitBreakerOptions TripOnFirstFailure() {
  CircuitBreakerOptions o = BaseOptions();
  o.window_size = 1;
  o.minimum_calls = 1;
  return o;
}

// Records what listeners see, thread-safely.
class TransitionLog {
 public:
  CircuitBreaker::Listener Listener() {
    return [this](BreakerState from, BreakerState to) {
      std::lock_guard<std::mutex> lock(mu_);
      log_.emplace_back(from, to);
    };
  }
  std::vector<Transition> Get() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }

 private:
  std::mutex mu_;
  std::vector<Transition> log_;
};

class CircuitBreakerTest : public ::testing::Test {
 protected:
  std::shared_ptr<CircuitBreaker> Make(const CircuitBreakerOptions& o,
                                       std::uint64_t seed = 7) {
    auto b = CircuitBreaker::Create(o, clock_, seed);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }

  // Acquires a permit (which must be granted) and records `outcome`.
  static void Call(CircuitBreaker& b, Outcome outcome,
                   const absl::Status& cause = absl::OkStatus()) {
    auto permit = b.TryAcquire();
    ASSERT_TRUE(permit.ok()) << permit.status();
    b.Record(*std::move(permit), outcome, cause);
  }
  static void CallN(CircuitBreaker& b, int n, Outcome outcome) {
    for (int i = 0; i < n; ++i) Call(b, outcome);
  }

  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
};

// --- Options --------------------------------------------------------------

TEST(CircuitBreakerOptionsTest, DefaultsAreValid) {
  EXPECT_TRUE(Validate(CircuitBreakerOptions{}).ok());
  CircuitBreakerOptions time_based;
  time_based.window_type = SlidingWindowType::kTimeBased;
  EXPECT_TRUE(Validate(time_based).ok());
}

struct InvalidCase {
  std::string field;  // expected in the message
  std::function<void(CircuitBreakerOptions&)> mutate;
};

TEST(CircuitBreakerOptionsTest, InvalidOptionsAreRejectedByName) {
  const std::vector<InvalidCase> cases = {
      {"name", [](auto& o) { o.name = ""; }},
      {"window_size", [](auto& o) { o.window_size = 0; }},
      {"window_size", [](auto& o) { o.window_size = 1000001; }},
      {"window_duration",
       [](auto& o) {
         o.window_type = SlidingWindowType::kTimeBased;
         o.window_duration = absl::ZeroDuration();
       }},
      {"window_duration",
       [](auto& o) {
         o.window_type = SlidingWindowType::kTimeBased;
         o.window_duration = absl::Hours(25);
       }},
      {"window_buckets",
       [](auto& o) {
         o.window_type = SlidingWindowType::kTimeBased;
         o.window_buckets = 0;
       }},
      {"window_duration / window_buckets",
       [](auto& o) {
         o.window_type = SlidingWindowType::kTimeBased;
         o.window_duration = absl::Milliseconds(10);
         o.window_buckets = 100;
       }},
      {"failure_rate_threshold", [](auto& o) { o.failure_rate_threshold = 0; }},
      {"failure_rate_threshold",
       [](auto& o) { o.failure_rate_threshold = 100.5; }},
      {"failure_rate_threshold",
       [](auto& o) { o.failure_rate_threshold = std::nan(""); }},
      {"minimum_calls", [](auto& o) { o.minimum_calls = 0; }},
      {"minimum_calls",
       [](auto& o) {
         o.window_size = 5;
         o.minimum_calls = 6;
       }},
      {"consecutive_failures", [](auto& o) { o.consecutive_failures = -1; }},
      {"break_duration",
       [](auto& o) { o.break_duration = absl::ZeroDuration(); }},
      {"break_duration",
       [](auto& o) { o.break_duration = absl::InfiniteDuration(); }},
      {"break_multiplier", [](auto& o) { o.break_multiplier = 0.5; }},
      {"max_break_duration",
       [](auto& o) { o.max_break_duration = absl::Seconds(1); }},
      {"break_jitter", [](auto& o) { o.break_jitter = 1.0; }},
      {"break_jitter", [](auto& o) { o.break_jitter = -0.1; }},
      {"half_open_permits", [](auto& o) { o.half_open_permits = 0; }},
      {"half_open_probe_timeout",
       [](auto& o) { o.half_open_probe_timeout = absl::ZeroDuration(); }},
      {"half_open_probe_timeout",
       [](auto& o) { o.half_open_probe_timeout = -absl::Seconds(1); }},
      {"half_open_probe_timeout",
       [](auto& o) {
         o.half_open_probe_timeout = absl::Hours(24) + absl::Nanoseconds(1);
       }},
      {"half_open_probe_timeout",
       [](auto& o) { o.half_open_probe_timeout = absl::InfiniteDuration(); }},
  };
  for (const InvalidCase& c : cases) {
    CircuitBreakerOptions o;
    c.mutate(o);
    absl::Status s = Validate(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("CircuitBreakerOptions." + c.field + " must "))
        << s;
    auto created = CircuitBreaker::Create(o);
    EXPECT_EQ(created.status(), s);
  }
}

TEST(CircuitBreakerOptionsTest, MessageGivesValueAndRange) {
  CircuitBreakerOptions o;
  o.half_open_permits = 0;
  EXPECT_EQ(Validate(o).message(),
            "CircuitBreakerOptions.half_open_permits must be in [1, 100000], "
            "got 0");
}

TEST(CircuitBreakerOptionsTest, ProbeTimeoutExtremesAreValid) {
  CircuitBreakerOptions o;
  EXPECT_EQ(o.half_open_probe_timeout, absl::Seconds(30));  // the default
  o.half_open_probe_timeout = absl::Nanoseconds(1);
  EXPECT_TRUE(Validate(o).ok());
  o.half_open_probe_timeout = absl::Hours(24);
  EXPECT_TRUE(Validate(o).ok());
  o.half_open_probe_timeout = absl::Hours(25);
  EXPECT_EQ(Validate(o).message(),
            "CircuitBreakerOptions.half_open_probe_timeout must be in "
            "(0, 24h], got 25h");
}

TEST(CircuitBreakerOptionsTest, TimeFieldsNotCheckedForCountWindow) {
  CircuitBreakerOptions o;
  o.window_duration = absl::ZeroDuration();  // unused by kCountBased
  EXPECT_TRUE(Validate(o).ok());
  o.window_type = SlidingWindowType::kTimeBased;
  o.window_size = 0;  // unused by kTimeBased
  o.window_duration = absl::Seconds(10);
  o.minimum_calls = 1000;  // no window_size bound for kTimeBased
  EXPECT_TRUE(Validate(o).ok());
}

// --- Closed -> open -------------------------------------------------------

TEST_F(CircuitBreakerTest, StartsClosedAndPermits) {
  auto b = Make(BaseOptions());
  EXPECT_EQ(b->state(), kClosed);
  EXPECT_EQ(b->open_until(), absl::InfinitePast());
  auto permit = b->TryAcquire();
  ASSERT_TRUE(permit.ok());
  EXPECT_TRUE(permit->valid());
  EXPECT_FALSE(permit->is_probe());
}

TEST_F(CircuitBreakerTest, RateDoesNotTripBelowMinimumCalls) {
  CircuitBreakerOptions o = BaseOptions();
  o.minimum_calls = 5;
  auto b = Make(o);
  CallN(*b, 4, Outcome::kFailure);  // 100 % of 4 calls
  EXPECT_EQ(b->state(), kClosed);
  EXPECT_EQ(b->counts().failure_rate, 100);
  Call(*b, Outcome::kFailure);  // the 5th call
  EXPECT_EQ(b->state(), kOpen);
}

TEST_F(CircuitBreakerTest, TripsWhenRateReachesThreshold) {
  auto b = Make(BaseOptions());  // min 4 calls, 50 %
  CallN(*b, 3, Outcome::kSuccess);
  Call(*b, Outcome::kFailure);  // 25 %
  EXPECT_EQ(b->state(), kClosed);
  Call(*b, Outcome::kFailure);  // 40 %
  EXPECT_EQ(b->state(), kClosed);
  EXPECT_DOUBLE_EQ(b->counts().failure_rate, 40);
  Call(*b, Outcome::kFailure);  // 3 of 6 = 50 %: trips
  EXPECT_EQ(b->state(), kOpen);
  BreakerCounts c = b->counts();
  EXPECT_EQ(c.successful, 3u);
  EXPECT_EQ(c.failed, 3u);
  EXPECT_EQ(c.transitions, 1u);
  EXPECT_EQ(c.consecutive_trips, 1u);
  EXPECT_EQ(c.window_calls, 0u);  // the window belongs to the closed state
}

TEST_F(CircuitBreakerTest, ASuccessCanReachMinimumCallsAndTrip) {
  auto b = Make(BaseOptions());
  CallN(*b, 3, Outcome::kFailure);
  EXPECT_EQ(b->state(), kClosed);
  Call(*b, Outcome::kSuccess);  // 4 calls, 75 % failures
  EXPECT_EQ(b->state(), kOpen);
}

TEST_F(CircuitBreakerTest, TripsOnConsecutiveFailures) {
  CircuitBreakerOptions o = BaseOptions();
  o.window_size = 100;
  o.minimum_calls = 100;  // the rate rule cannot fire here
  o.consecutive_failures = 3;
  auto b = Make(o);
  CallN(*b, 2, Outcome::kFailure);
  Call(*b, Outcome::kSuccess);  // breaks the run
  CallN(*b, 2, Outcome::kFailure);
  EXPECT_EQ(b->state(), kClosed);
  EXPECT_EQ(b->counts().consecutive_failures, 2u);
  Call(*b, Outcome::kFailure);
  EXPECT_EQ(b->state(), kOpen);
  auto rejected = b->TryAcquire();
  EXPECT_THAT(rejected.status().message(), HasSubstr("3 consecutive failures"));
}

TEST_F(CircuitBreakerTest, ConsecutiveRuleOffByDefault) {
  CircuitBreakerOptions o = BaseOptions();
  o.window_size = 100;
  o.minimum_calls = 100;
  auto b = Make(o);
  CallN(*b, 50, Outcome::kFailure);
  EXPECT_EQ(b->state(), kClosed);
}

// --- Windows --------------------------------------------------------------

TEST_F(CircuitBreakerTest, CountWindowKeepsOnlyTheLastN) {
  CircuitBreakerOptions o = BaseOptions();
  o.window_size = 5;
  o.minimum_calls = 5;
  o.failure_rate_threshold = 60;
  auto b = Make(o);
  CallN(*b, 3, Outcome::kSuccess);
  CallN(*b, 2, Outcome::kFailure);  // S S S F F: 40 %
  EXPECT_EQ(b->counts().window_calls, 5u);
  CallN(*b, 2, Outcome::kSuccess);  // S F F S S: 40 %
  EXPECT_EQ(b->counts().window_calls, 5u);
  EXPECT_EQ(b->counts().window_failures, 2u);
  Call(*b, Outcome::kFailure);  // F F S S F: 60 %
  EXPECT_EQ(b->state(), kOpen);
}

TEST_F(CircuitBreakerTest, TimeWindowForgetsOldOutcomes) {
  CircuitBreakerOptions o = BaseOptions();
  o.window_type = SlidingWindowType::kTimeBased;
  o.window_duration = absl::Seconds(10);
  o.window_buckets = 10;  // 1 s buckets; FakeClock starts on a whole second
  o.minimum_calls = 4;
  auto b = Make(o);
  CallN(*b, 2, Outcome::kFailure);  // t = 0
  clock_->AdvanceBy(absl::Seconds(5));
  Call(*b, Outcome::kFailure);  // t = 5 s
  EXPECT_EQ(b->counts().window_calls, 3u);
  clock_->AdvanceBy(absl::Seconds(5) - absl::Nanoseconds(1));
  EXPECT_EQ(b->counts().window_calls, 3u);  // t < 10 s: all still there
  clock_->AdvanceBy(absl::Nanoseconds(1));  // t = 10 s: the t = 0 bucket goes
  BreakerCounts c = b->counts();
  EXPECT_EQ(c.window_calls, 1u);
  EXPECT_EQ(c.window_failures, 1u);
  // Had the first two failures been kept, this would be 4 calls and trip.
  Call(*b, Outcome::kFailure);
  Call(*b, Outcome::kSuccess);
  EXPECT_EQ(b->state(), kClosed);
  EXPECT_EQ(b->counts().window_calls, 3u);
  Call(*b, Outcome::kFailure);  // 3 of 4 within the last 10 s
  EXPECT_EQ(b->state(), kOpen);
}

TEST_F(CircuitBreakerTest, TimeWindowEmptiesAfterALongPause) {
  CircuitBreakerOptions o = BaseOptions();
  o.window_type = SlidingWindowType::kTimeBased;
  o.window_duration = absl::Seconds(3);
  o.window_buckets = 3;
  o.minimum_calls = 10;
  auto b = Make(o);
  CallN(*b, 9, Outcome::kFailure);
  clock_->AdvanceBy(absl::Hours(5));
  EXPECT_EQ(b->counts().window_calls, 0u);
  CallN(*b, 9, Outcome::kFailure);
  EXPECT_EQ(b->state(), kClosed);
  EXPECT_EQ(b->counts().window_failures, 9u);
}

TEST_F(CircuitBreakerTest, TimeWindowSlidesOverManyCycles) {
  CircuitBreakerOptions o = BaseOptions();
  o.window_type = SlidingWindowType::kTimeBased;
  o.window_duration = absl::Seconds(3);
  o.window_buckets = 3;
  o.minimum_calls = 1000;  // never trips here
  auto b = Make(o);
  for (int second = 0; second < 12; ++second) {
    CallN(*b, 1 + second % 2, Outcome::kFailure);  // 1, 2, 1, 2, ...
    // The last three seconds hold 1 + 2 + 1 or 2 + 1 + 2 calls.
    std::uint64_t expected = second == 0   ? 1
                             : second == 1 ? 3
                                           : (second % 2 == 0 ? 4 : 5);
    EXPECT_EQ(b->counts().window_calls, expected) << "second " << second;
    clock_->AdvanceBy(absl::Seconds(1));
  }
}

// --- Ignored outcomes -----------------------------------------------------

TEST_F(CircuitBreakerTest, IgnoredNeverChangesWindowOrRate) {
  CircuitBreakerOptions o = BaseOptions();
  o.minimum_calls = 1;
  o.window_size = 4;
  o.consecutive_failures = 2;
  auto b = Make(o);
  Call(*b, Outcome::kSuccess);
  BreakerCounts before = b->counts();
  CallN(*b, 50, Outcome::kIgnored);
  BreakerCounts after = b->counts();
  EXPECT_EQ(after.state, kClosed);
  EXPECT_EQ(after.window_calls, before.window_calls);
  EXPECT_EQ(after.window_failures, before.window_failures);
  EXPECT_EQ(after.failure_rate, before.failure_rate);
  EXPECT_EQ(after.ignored, 50u);
  EXPECT_EQ(after.transitions, 0u);
  // Ignored outcomes do not push the success out of the 4-slot window.
  Call(*b, Outcome::kFailure);  // S F: 50 % -> trips at threshold 50
  EXPECT_EQ(b->state(), kOpen);
}

TEST_F(CircuitBreakerTest, IgnoredDoesNotBreakAFailureRun) {
  CircuitBreakerOptions o = BaseOptions();
  o.window_size = 100;
  o.minimum_calls = 100;
  o.consecutive_failures = 3;
  auto b = Make(o);
  Call(*b, Outcome::kFailure);
  Call(*b, Outcome::kIgnored);
  Call(*b, Outcome::kFailure);
  Call(*b, Outcome::kIgnored);
  EXPECT_EQ(b->counts().consecutive_failures, 2u);
  Call(*b, Outcome::kFailure);
  EXPECT_EQ(b->state(), kOpen);
}

TEST_F(CircuitBreakerTest, DroppedPermitCountsAsIgnored) {
  CircuitBreakerOptions o = TripOnFirstFailure();
  auto b = Make(o);
  { auto permit = b->TryAcquire(); }
  EXPECT_EQ(b->counts().ignored, 1u);
  auto p1 = b->TryAcquire();
  auto p2 = b->TryAcquire();
  ASSERT_TRUE(p1.ok() && p2.ok());
  *p1 = *std::move(p2);  // drops p1's permit
  EXPECT_EQ(b->counts().ignored, 2u);
  EXPECT_FALSE(p2->valid());
  EXPECT_TRUE(p1->valid());
  b->Record(*std::move(p1), Outcome::kSuccess);
  EXPECT_EQ(b->counts().ignored, 2u);  // recorded, not dropped
  EXPECT_EQ(b->counts().successful, 1u);
  EXPECT_EQ(b->state(), kClosed);
}

TEST_F(CircuitBreakerTest, EmptyOrForeignPermitIsANoOp) {
  auto a = Make(TripOnFirstFailure());
  auto b = Make(TripOnFirstFailure());
  a->Record(CircuitBreaker::Permit(), Outcome::kFailure);
  EXPECT_EQ(a->counts().failed, 0u);
  auto from_b = b->TryAcquire();
  ASSERT_TRUE(from_b.ok());
  a->Record(*std::move(from_b), Outcome::kFailure);
  EXPECT_EQ(a->state(), kClosed);
  EXPECT_EQ(a->counts().failed, 0u);
  EXPECT_EQ(b->state(), kClosed);
  EXPECT_EQ(b->counts().ignored, 1u);  // released to its own breaker
}

TEST_F(CircuitBreakerTest, ConcurrentDrainOutcomesLeaveItClosed) {
  CircuitBreakerOptions o = BaseOptions();
  o.minimum_calls = 1;
  o.failure_rate_threshold = 1;  // a single counted failure would trip
  auto b = Make(o);
  TransitionLog log;
  b->AddListener(log.Listener());
  constexpr int kStreams = 64;
  std::vector<CircuitBreaker::Permit> permits;
  for (int i = 0; i < kStreams; ++i) {
    auto p = b->TryAcquire();
    ASSERT_TRUE(p.ok());
    permits.push_back(*std::move(p));
  }
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      b->Record(std::move(permits[i]), Outcome::kIgnored,
                absl::UnavailableError("server is shutting down"));
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  BreakerCounts c = b->counts();
  EXPECT_EQ(c.state, kClosed);
  EXPECT_EQ(c.transitions, 0u);
  EXPECT_EQ(c.ignored, 64u);
  EXPECT_EQ(c.failed, 0u);
  EXPECT_EQ(c.window_calls, 0u);
  EXPECT_THAT(log.Get(), SizeIs(0));
}

// --- Open -> half-open ----------------------------------------------------

TEST_F(CircuitBreakerTest, OpenRejectsWithAnExplanation) {
  auto b = Make(TripOnFirstFailure());
  Call(*b, Outcome::kFailure, absl::InternalError("backend exploded"));
  auto rejected = b->TryAcquire();
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(rejected.status().message(),
            "circuit breaker 'backend:443' is open for another 1s (failure "
            "rate 100.0% >= 50% over 1 calls); last failure: INTERNAL: "
            "backend exploded");
}

TEST_F(CircuitBreakerTest, CountsNotPermitted) {
  auto b = Make(TripOnFirstFailure());
  Call(*b, Outcome::kFailure);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(b->TryAcquire().ok());
  EXPECT_EQ(b->counts().not_permitted, 3u);
  clock_->AdvanceBy(absl::Seconds(1));
  auto p1 = b->TryAcquire();
  auto p2 = b->TryAcquire();
  EXPECT_TRUE(p1.ok() && p2.ok());
  auto p3 = b->TryAcquire();  // both probe permits taken
  ASSERT_FALSE(p3.ok());
  EXPECT_THAT(p3.status().message(),
              HasSubstr("'backend:443' is half-open and all 2 probe permits "
                        "are taken"));
  EXPECT_EQ(b->counts().not_permitted, 4u);
}

TEST_F(CircuitBreakerTest, TimerMovesOpenToHalfOpenAndTellsListeners) {
  auto b = Make(TripOnFirstFailure());
  TransitionLog log;
  b->AddListener(log.Listener());
  const absl::Time tripped = clock_->Now();
  Call(*b, Outcome::kFailure);
  EXPECT_EQ(b->open_until(), tripped + absl::Seconds(1));
  EXPECT_EQ(clock_->NextDue(), tripped + absl::Seconds(1));
  clock_->AdvanceBy(absl::Seconds(1) - absl::Nanoseconds(1));
  EXPECT_THAT(log.Get(), ElementsAre(Pair(kClosed, kOpen)));
  clock_->AdvanceBy(absl::Nanoseconds(1));  // the timer fires: no call made
  EXPECT_THAT(log.Get(),
              ElementsAre(Pair(kClosed, kOpen), Pair(kOpen, kHalfOpen)));
  EXPECT_EQ(b->state(), kHalfOpen);
  EXPECT_EQ(b->open_until(), absl::InfinitePast());
}

TEST_F(CircuitBreakerTest, DependencyAvailableTurnsOpenHalfOpenAtOnce) {
  auto b = Make(TripOnFirstFailure());
  TransitionLog log;
  b->AddListener(log.Listener());
  Call(*b, Outcome::kFailure);
  ASSERT_EQ(b->state(), kOpen);
  EXPECT_EQ(clock_->PendingTimers(), 1u);  // the break timer
  const std::uint64_t before = b->counts().transitions;
  b->OnDependencyAvailable();  // long before the break ends
  EXPECT_EQ(b->state(), kHalfOpen);
  EXPECT_EQ(b->counts().transitions, before + 1);
  EXPECT_EQ(b->open_until(), absl::InfinitePast());
  EXPECT_EQ(clock_->PendingTimers(), 0u);  // the break timer is cancelled
  EXPECT_THAT(log.Get(),
              ElementsAre(Pair(kClosed, kOpen), Pair(kOpen, kHalfOpen)));
  // The probes decide, as after a break: all succeed, it closes.
  auto p1 = b->TryAcquire();
  auto p2 = b->TryAcquire();
  ASSERT_TRUE(p1.ok() && p2.ok());
  EXPECT_TRUE(p1->is_probe());
  b->Record(*std::move(p1), Outcome::kSuccess);
  b->Record(*std::move(p2), Outcome::kSuccess);
  EXPECT_EQ(b->state(), kClosed);
}

TEST_F(CircuitBreakerTest, DependencyAvailableLeavesOtherStatesAlone) {
  auto b = Make(TripOnFirstFailure());
  TransitionLog log;
  b->AddListener(log.Listener());
  b->OnDependencyAvailable();  // closed
  EXPECT_EQ(b->state(), kClosed);
  EXPECT_EQ(b->counts().transitions, 0u);

  Call(*b, Outcome::kFailure);  // open
  b->OnDependencyAvailable();   // half-open
  auto probe = b->TryAcquire();
  ASSERT_TRUE(probe.ok());
  const std::uint64_t half_open_transitions = b->counts().transitions;
  b->OnDependencyAvailable();  // half-open: unchanged, probe still counts
  EXPECT_EQ(b->state(), kHalfOpen);
  EXPECT_EQ(b->counts().transitions, half_open_transitions);
  EXPECT_TRUE(probe->valid());

  b->SetForcedOpen(true);
  b->OnDependencyAvailable();
  EXPECT_EQ(b->state(), kForcedOpen);
  b->SetForcedOpen(false);
  b->SetDisabled(true);
  b->OnDependencyAvailable();
  EXPECT_EQ(b->state(), kDisabled);
  EXPECT_THAT(
      log.Get(),
      ElementsAre(Pair(kClosed, kOpen), Pair(kOpen, kHalfOpen),
                  Pair(kHalfOpen, kForcedOpen), Pair(kForcedOpen, kClosed),
                  Pair(kClosed, kDisabled)));
}

TEST_F(CircuitBreakerTest, ListenerMayCallBackFromDependencyAvailable) {
  auto b = Make(TripOnFirstFailure());
  std::atomic<int> calls{0};
  b->AddListener([&](BreakerState, BreakerState to) {
    if (to == kHalfOpen) {
      ++calls;
      b->OnDependencyAvailable();  // would deadlock under the breaker lock
      EXPECT_TRUE(b->TryAcquire().ok());
    }
  });
  Call(*b, Outcome::kFailure);
  b->OnDependencyAvailable();
  EXPECT_EQ(calls.load(), 1);
}

// A clock whose timers never fire: only the lazy path can move the breaker.
class NoTimerClock final : public Clock {
 public:
  absl::Time Now() override { return fake.Now(); }
  TimerId RunAfter(absl::Duration, std::function<void()>) override {
    return ++scheduled;
  }
  bool Cancel(TimerId) override {
    ++cancelled;
    return true;
  }
  FakeClock fake;
  int scheduled = 0;
  int cancelled = 0;
};

TEST_F(CircuitBreakerTest, OpenTurnsHalfOpenLazilyOnTryAcquire) {
  auto clock = std::make_shared<NoTimerClock>();
  auto b = *CircuitBreaker::Create(TripOnFirstFailure(), clock, 1);
  TransitionLog log;
  b->AddListener(log.Listener());
  Call(*b, Outcome::kFailure);
  EXPECT_EQ(clock->scheduled, 1);
  clock->fake.AdvanceBy(absl::Seconds(2));
  auto probe = b->TryAcquire();
  ASSERT_TRUE(probe.ok());
  EXPECT_TRUE(probe->is_probe());
  EXPECT_EQ(clock->cancelled, 1);  // the stale timer is cancelled
  EXPECT_THAT(log.Get(),
              ElementsAre(Pair(kClosed, kOpen), Pair(kOpen, kHalfOpen)));
}

TEST_F(CircuitBreakerTest, ReadersNeverChangeTheState) {
  auto clock = std::make_shared<NoTimerClock>();
  auto b = *CircuitBreaker::Create(TripOnFirstFailure(), clock, 1);
  TransitionLog log;
  b->AddListener(log.Listener());
  Call(*b, Outcome::kFailure);
  const absl::Time tripped = clock->Now();
  clock->fake.AdvanceBy(absl::Seconds(1));
  // The break has passed but the timer never ran: readers report what is,
  // and a reader's call is not where the state changes.
  EXPECT_EQ(b->state(), kOpen);
  EXPECT_EQ(b->counts().state, kOpen);
  EXPECT_EQ(b->counts().transitions, 1u);
  EXPECT_EQ(b->open_until(), tripped + absl::Seconds(1));  // not in future
  EXPECT_THAT(log.Get(), ElementsAre(Pair(kClosed, kOpen)));
  auto probe = b->TryAcquire();  // the writer moves it
  ASSERT_TRUE(probe.ok());
  EXPECT_EQ(b->state(), kHalfOpen);
}

// --- Half-open ------------------------------------------------------------

TEST_F(CircuitBreakerTest, HalfOpenClosesWhenAllProbesSucceed) {
  auto b = Make(TripOnFirstFailure());  // 2 probe permits
  TransitionLog log;
  b->AddListener(log.Listener());
  Call(*b, Outcome::kFailure);
  clock_->AdvanceBy(absl::Seconds(1));
  auto p1 = b->TryAcquire();
  auto p2 = b->TryAcquire();
  ASSERT_TRUE(p1.ok() && p2.ok());
  EXPECT_TRUE(p1->is_probe());
  // No permit free: the next one frees when the oldest probe times out.
  EXPECT_EQ(b->open_until(),
            clock_->Now() + CircuitBreakerOptions().half_open_probe_timeout);
  b->Record(*std::move(p1), Outcome::kSuccess);
  EXPECT_EQ(b->state(), kHalfOpen);  // one of two is not enough
  b->Record(*std::move(p2), Outcome::kSuccess);
  EXPECT_EQ(b->state(), kClosed);
  BreakerCounts c = b->counts();
  EXPECT_EQ(c.window_calls, 0u);  // a fresh window
  EXPECT_EQ(c.consecutive_trips, 0u);
  EXPECT_THAT(log.Get(),
              ElementsAre(Pair(kClosed, kOpen), Pair(kOpen, kHalfOpen),
                          Pair(kHalfOpen, kClosed)));
  auto p = b->TryAcquire();
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->is_probe());
}

TEST_F(CircuitBreakerTest, IgnoredProbeGivesItsPermitBack) {
  CircuitBreakerOptions o = TripOnFirstFailure();
  o.half_open_permits = 1;
  auto b = Make(o);
  Call(*b, Outcome::kFailure);
  clock_->AdvanceBy(absl::Seconds(1));
  auto probe = b->TryAcquire();
  ASSERT_TRUE(probe.ok());
  EXPECT_FALSE(b->TryAcquire().ok());  // the only permit is out
  b->Record(*std::move(probe), Outcome::kIgnored,
            absl::UnavailableError("GOAWAY"));
  EXPECT_EQ(b->state(), kHalfOpen);  // not stuck, not decided
  auto next = b->TryAcquire();       // resilience4j #544: this must succeed
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->is_probe());
  b->Record(*std::move(next), Outcome::kSuccess);
  EXPECT_EQ(b->state(), kClosed);
}

TEST_F(CircuitBreakerTest, DroppedProbeGivesItsPermitBack) {
  CircuitBreakerOptions o = TripOnFirstFailure();
  o.half_open_permits = 1;
  auto b = Make(o);
  Call(*b, Outcome::kFailure);
  clock_->AdvanceBy(absl::Seconds(1));
  {
    auto probe = b->TryAcquire();
    ASSERT_TRUE(probe.ok());
  }
  EXPECT_TRUE(b->TryAcquire().ok());
}

// --- Half-open probe timeout (never stuck half-open) ----------------------

// Trips `b` (one failure trips it) and waits out the 1 s break.
void TripAndHalfOpen(CircuitBreaker& b, FakeClock& clock) {
  auto p = b.TryAcquire();
  ASSERT_TRUE(p.ok());
  b.Record(*std::move(p), Outcome::kFailure);
  clock.AdvanceBy(absl::Seconds(1));
  ASSERT_EQ(b.state(), BreakerState::kHalfOpen);
}

TEST_F(CircuitBreakerTest, UnrecordedProbesAreGivenBackAfterTheTimeout) {
  CircuitBreakerOptions o = TripOnFirstFailure();  // 2 probe permits
  o.half_open_probe_timeout = absl::Seconds(10);
  auto b = Make(o);
  TripAndHalfOpen(*b, *clock_);
  const absl::Time issued = clock_->Now();
  auto p1 = b->TryAcquire();
  auto p2 = b->TryAcquire();  // both held by quiet streams, never recorded
  ASSERT_TRUE(p1.ok() && p2.ok());
  EXPECT_FALSE(b->TryAcquire().ok());
  EXPECT_EQ(b->open_until(), issued + absl::Seconds(10));
  const std::uint64_t ignored = b->counts().ignored;

  clock_->AdvanceBy(absl::Seconds(10) - absl::Nanoseconds(1));
  EXPECT_FALSE(b->TryAcquire().ok());  // not a moment early
  clock_->AdvanceBy(absl::Nanoseconds(1));
  EXPECT_EQ(b->counts().ignored, ignored + 2);  // given back, as if dropped
  EXPECT_EQ(b->state(), kHalfOpen);
  auto p3 = b->TryAcquire();
  ASSERT_TRUE(p3.ok());
  EXPECT_TRUE(p3->is_probe());
  b->Record(*std::move(p3), Outcome::kSuccess);
  auto p4 = b->TryAcquire();
  ASSERT_TRUE(p4.ok());
  b->Record(*std::move(p4), Outcome::kSuccess);
  EXPECT_EQ(b->state(), kClosed);  // the new probes decided
}

TEST_F(CircuitBreakerTest, LateRecordOfAnExpiredProbeChangesNothing) {
  CircuitBreakerOptions o = TripOnFirstFailure();
  o.half_open_permits = 1;
  o.half_open_probe_timeout = absl::Seconds(5);
  auto b = Make(o);
  TransitionLog log;
  b->AddListener(log.Listener());
  TripAndHalfOpen(*b, *clock_);
  auto late_success = b->TryAcquire();
  ASSERT_TRUE(late_success.ok());
  clock_->AdvanceBy(absl::Seconds(5));
  auto late_failure = b->TryAcquire();
  ASSERT_TRUE(late_failure.ok());
  clock_->AdvanceBy(absl::Seconds(5));
  auto live = b->TryAcquire();
  ASSERT_TRUE(live.ok());
  const BreakerCounts before = b->counts();

  // With one permit a success would close it and a failure re-open it: the
  // expired probes' outcomes must do neither, nor be counted again.
  b->Record(*std::move(late_success), Outcome::kSuccess);
  b->Record(*std::move(late_failure), Outcome::kFailure,
            absl::UnavailableError("too late"));
  const BreakerCounts after = b->counts();
  EXPECT_EQ(after.state, kHalfOpen);
  EXPECT_EQ(after.successful, before.successful);
  EXPECT_EQ(after.failed, before.failed);
  EXPECT_EQ(after.ignored, before.ignored);
  EXPECT_FALSE(b->TryAcquire().ok());  // `live` still holds the only permit
  EXPECT_THAT(b->TryAcquire().status().message(), Not(HasSubstr("too late")));

  b->Record(*std::move(live), Outcome::kSuccess);
  EXPECT_EQ(b->state(), kClosed);
  EXPECT_THAT(log.Get(),
              ElementsAre(Pair(kClosed, kOpen), Pair(kOpen, kHalfOpen),
                          Pair(kHalfOpen, kClosed)));
}

TEST_F(CircuitBreakerTest, DroppingAnExpiredProbeCountsNothingMore) {
  CircuitBreakerOptions o = TripOnFirstFailure();
  o.half_open_probe_timeout = absl::Seconds(1);
  auto b = Make(o);
  TripAndHalfOpen(*b, *clock_);
  absl::optional<absl::StatusOr<CircuitBreaker::Permit>> held = b->TryAcquire();
  ASSERT_TRUE(held->ok());
  clock_->AdvanceBy(absl::Seconds(1));
  const std::uint64_t ignored = b->counts().ignored;
  held.reset();  // its destructor gives back a permit already given back
  EXPECT_EQ(b->counts().ignored, ignored);
}

// The interleaving behind a rare ConcurrentCallersAndTimer failure: a probe
// times out (counted as ignored), the breaker changes state, and only then
// does the probe's permit come back. Its generation is now stale, which once
// let its outcome be counted a second time. Every way of changing the state
// and of handing the permit back must count it exactly once.
TEST_F(CircuitBreakerTest, ExpiredProbeIsNotCountedAgainAfterAStateChange) {
  struct StateChange {
    const char* name;
    BreakerState to;
    std::uint64_t calls;  // permits `cause` uses
    std::function<void(CircuitBreaker&)> cause;
  };
  const std::vector<StateChange> changes = {
      {"probe fails", kOpen, 1,
       [](CircuitBreaker& b) { Call(b, Outcome::kFailure); }},
      {"probes succeed", kClosed, 2,
       [](CircuitBreaker& b) { CallN(b, 2, Outcome::kSuccess); }},
      {"forced open", kForcedOpen, 0,
       [](CircuitBreaker& b) { b.SetForcedOpen(true); }},
      {"disabled", kDisabled, 0,
       [](CircuitBreaker& b) { b.SetDisabled(true); }},
  };
  struct HandBack {
    const char* name;
    std::function<void(CircuitBreaker&, CircuitBreaker::Permit)> hand_back;
  };
  const std::vector<HandBack> hand_backs = {
      {"success",
       [](CircuitBreaker& b, CircuitBreaker::Permit p) {
         b.Record(std::move(p), Outcome::kSuccess);
       }},
      {"failure",
       [](CircuitBreaker& b, CircuitBreaker::Permit p) {
         b.Record(std::move(p), Outcome::kFailure,
                  absl::UnavailableError("too late"));
       }},
      {"ignored",
       [](CircuitBreaker& b, CircuitBreaker::Permit p) {
         b.Record(std::move(p), Outcome::kIgnored);
       }},
      {"dropped",
       [](CircuitBreaker&, CircuitBreaker::Permit) {}},  // destroyed here
  };
  for (const StateChange& change : changes) {
    for (const HandBack& hand_back : hand_backs) {
      SCOPED_TRACE(absl::StrCat(change.name,
                                ", then the expired probe: ", hand_back.name));
      CircuitBreakerOptions o = TripOnFirstFailure();  // 2 probe permits
      o.half_open_probe_timeout = absl::Seconds(5);
      auto b = Make(o);
      TripAndHalfOpen(*b, *clock_);  // 1 permit so far
      auto late = b->TryAcquire();
      ASSERT_TRUE(late.ok());
      ASSERT_TRUE(late->is_probe());
      clock_->AdvanceBy(absl::Seconds(5));  // expires: counted as ignored
      EXPECT_EQ(b->counts().ignored, 1u);
      change.cause(*b);
      ASSERT_EQ(b->state(), change.to);
      // The trip, the expired probe and the state change's own calls, each
      // counted once.
      const std::uint64_t permits = 2 + change.calls;
      const BreakerCounts before = b->counts();
      EXPECT_EQ(before.successful + before.failed + before.ignored, permits);

      hand_back.hand_back(*b, *std::move(late));
      const BreakerCounts after = b->counts();
      EXPECT_EQ(after.successful, before.successful);
      EXPECT_EQ(after.failed, before.failed);
      EXPECT_EQ(after.ignored, before.ignored);
      EXPECT_EQ(after.successful + after.failed + after.ignored, permits);
      EXPECT_EQ(after.state, change.to);
      EXPECT_EQ(after.transitions, before.transitions);
      if (change.to == kOpen) {
        EXPECT_THAT(b->TryAcquire().status().message(),
                    Not(HasSubstr("too late")));
      }
    }
  }
}

// A `Clock` may fail to cancel a timer that is due and about to run (the
// fake clock does so between popping a timer and running it). A probe's
// timeout that fires after its permit was recorded, or after the state
// changed, must count nothing and free no permit.
TEST_F(CircuitBreakerTest, ProbeTimeoutThatCouldNotBeCancelledCountsNothing) {
  class NoCancelClock final : public Clock {
   public:
    absl::Time Now() override { return fake.Now(); }
    TimerId RunAfter(absl::Duration d, std::function<void()> fn) override {
      return fake.RunAfter(d, std::move(fn));
    }
    bool Cancel(TimerId) override { return false; }
    FakeClock fake;
  };
  auto clock = std::make_shared<NoCancelClock>();
  CircuitBreakerOptions o = TripOnFirstFailure();  // 2 probe permits
  o.half_open_probe_timeout = absl::Seconds(5);
  auto b = *CircuitBreaker::Create(o, clock, 1);
  TripAndHalfOpen(*b, clock->fake);

  // Recorded, then its timeout fires anyway.
  auto recorded = b->TryAcquire();
  ASSERT_TRUE(recorded.ok());
  b->Record(*std::move(recorded), Outcome::kSuccess);
  clock->fake.AdvanceBy(absl::Seconds(1));
  auto held = b->TryAcquire();  // takes the other permit
  ASSERT_TRUE(held.ok());
  const BreakerCounts before = b->counts();
  clock->fake.AdvanceBy(absl::Seconds(4));  // `recorded`'s timeout fires
  EXPECT_EQ(b->counts().ignored, before.ignored);
  EXPECT_EQ(b->state(), kHalfOpen);
  EXPECT_FALSE(b->TryAcquire().ok());  // and it freed no permit

  // The state changes, then the timeout of the probe that changed it fires.
  b->Record(*std::move(held), Outcome::kFailure);  // re-opens for 2 s
  ASSERT_EQ(b->state(), kOpen);
  const BreakerCounts reopened = b->counts();
  clock->fake.AdvanceBy(absl::Seconds(1));  // `held`'s timeout fires
  const BreakerCounts after = b->counts();
  EXPECT_EQ(after.ignored, reopened.ignored);
  EXPECT_EQ(after.successful + after.failed + after.ignored, 3u);
  EXPECT_EQ(after.state, kOpen);
  EXPECT_EQ(after.transitions, reopened.transitions);
}

TEST_F(CircuitBreakerTest, ProbeTimeoutExtremes) {
  {
    CircuitBreakerOptions o = TripOnFirstFailure();
    o.half_open_permits = 1;
    o.half_open_probe_timeout = absl::Nanoseconds(1);
    auto b = Make(o);
    TripAndHalfOpen(*b, *clock_);
    auto p = b->TryAcquire();
    ASSERT_TRUE(p.ok());
    EXPECT_FALSE(b->TryAcquire().ok());
    clock_->AdvanceBy(absl::Nanoseconds(1));
    EXPECT_TRUE(b->TryAcquire().ok());
  }
  {
    CircuitBreakerOptions o = TripOnFirstFailure();
    o.half_open_permits = 1;
    o.half_open_probe_timeout = absl::Hours(24);
    auto b = Make(o);
    TripAndHalfOpen(*b, *clock_);
    auto p = b->TryAcquire();
    ASSERT_TRUE(p.ok());
    clock_->AdvanceBy(absl::Hours(24) - absl::Nanoseconds(1));
    EXPECT_FALSE(b->TryAcquire().ok());
    clock_->AdvanceBy(absl::Nanoseconds(1));
    EXPECT_TRUE(b->TryAcquire().ok());
  }
}

TEST_F(CircuitBreakerTest, RecordedProbeCancelsItsTimeout) {
  CircuitBreakerOptions o = TripOnFirstFailure();
  o.half_open_permits = 2;
  auto b = Make(o);
  TripAndHalfOpen(*b, *clock_);
  const std::size_t before = clock_->PendingTimers();
  auto p = b->TryAcquire();
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(clock_->PendingTimers(), before + 1);
  b->Record(*std::move(p), Outcome::kIgnored);
  EXPECT_EQ(clock_->PendingTimers(), before);
}

// --- Re-entrancy -----------------------------------------------------------

// Runs `script` on its own thread and fails if it has not finished within a
// generous deadline (a deadlock), instead of hanging the test binary.
void RunBounded(std::function<void()> script) {
  auto done = std::make_shared<absl::Notification>();
  std::thread t([script = std::move(script), done] {
    script();
    done->Notify();
  });
  if (done->WaitForNotificationWithTimeout(absl::Seconds(30))) {
    t.join();
  } else {
    ADD_FAILURE() << "deadlock: a callback calling back into the breaker "
                     "never returned";
    t.detach();
  }
}

// Calls every reader and writer of the breaker, once per outermost callback
// (nested callbacks on the same thread are skipped, or a rejected
// TryAcquire inside OnNotPermitted would recurse for ever).
void CallBackInto(std::shared_ptr<CircuitBreaker> b) {
  thread_local int depth = 0;
  if (b == nullptr || depth > 0) return;
  ++depth;
  (void)b->counts();
  (void)b->state();
  (void)b->open_until();
  auto p = b->TryAcquire();
  if (p.ok()) b->Record(*std::move(p), Outcome::kIgnored);
  --depth;
}

class ReentrantObserver final : public BreakerObserver {
 public:
  void OnStateChange(absl::string_view, BreakerState, BreakerState,
                     const BreakerCounts&) override {
    ++state_changes;
    CallBackInto(breaker.lock());
  }
  void OnRecorded(absl::string_view, Outcome, const BreakerCounts&) override {
    ++recorded;
    CallBackInto(breaker.lock());
  }
  void OnNotPermitted(absl::string_view, const BreakerCounts&) override {
    ++not_permitted;
    CallBackInto(breaker.lock());
  }

  std::weak_ptr<CircuitBreaker> breaker;
  std::atomic<int> state_changes{0};
  std::atomic<int> recorded{0};
  std::atomic<int> not_permitted{0};
};

TEST_F(CircuitBreakerTest, EveryCallbackMayCallBackAndDropTheOwner) {
  CircuitBreakerOptions o = TripOnFirstFailure();  // 2 probe permits
  o.half_open_probe_timeout = absl::Seconds(5);
  auto observer = std::make_shared<ReentrantObserver>();
  o.observer = observer;
  std::shared_ptr<CircuitBreaker> owner = Make(o);
  observer->breaker = owner;
  CircuitBreaker* const raw = owner.get();
  std::weak_ptr<CircuitBreaker> weak = owner;
  std::vector<Transition> seen;  // only the delivering thread writes it
  raw->AddListener([&](BreakerState from, BreakerState to) {
    seen.emplace_back(from, to);
    CallBackInto(weak.lock());
    // Remove and re-add a listener from inside a listener call.
    raw->RemoveListener(raw->AddListener([](BreakerState, BreakerState) {}));
    if (to == kDisabled) owner.reset();  // the last outside reference
  });

  RunBounded([&] {
    Call(*raw, Outcome::kFailure);  // closed -> open (caller's thread)
    EXPECT_FALSE(raw->TryAcquire().ok());
    clock_->AdvanceBy(absl::Seconds(1));  // open -> half-open (timer)
    auto quiet = raw->TryAcquire();       // a probe nobody records
    ASSERT_TRUE(quiet.ok());
    clock_->AdvanceBy(absl::Seconds(5));  // given back by its timeout
    Call(*raw, Outcome::kSuccess);
    Call(*raw, Outcome::kSuccess);  // half-open -> closed
    raw->SetForcedOpen(true);
    raw->SetForcedOpen(false);
    raw->SetDisabled(true);  // the listener drops the breaker here
  });

  EXPECT_TRUE(weak.expired());
  EXPECT_THAT(
      seen, ElementsAre(Pair(kClosed, kOpen), Pair(kOpen, kHalfOpen),
                        Pair(kHalfOpen, kClosed), Pair(kClosed, kForcedOpen),
                        Pair(kForcedOpen, kClosed), Pair(kClosed, kDisabled)));
  EXPECT_EQ(observer->state_changes.load(), 6);
  EXPECT_GE(observer->not_permitted.load(), 1);
  EXPECT_GE(observer->recorded.load(), 4);
  clock_->AdvanceBy(absl::Hours(1));  // no timer of the breaker is left
  EXPECT_EQ(clock_->PendingTimers(), 0u);
}

TEST_F(CircuitBreakerTest, ObserverMayDropTheOwnerFromATimerCallback) {
  CircuitBreakerOptions o = TripOnFirstFailure();
  o.half_open_probe_timeout = absl::Seconds(5);
  struct Dropper final : BreakerObserver {
    void OnRecorded(absl::string_view, Outcome outcome,
                    const BreakerCounts&) override {
      if (outcome == Outcome::kIgnored && owner != nullptr) {
        CallBackInto(owner);
        owner.reset();  // from the probe-timeout timer, on the clock
      }
    }
    std::shared_ptr<CircuitBreaker> owner;
  };
  auto observer = std::make_shared<Dropper>();
  o.observer = observer;
  auto b = Make(o);
  std::weak_ptr<CircuitBreaker> weak = b;
  RunBounded([&] {
    TripAndHalfOpen(*b, *clock_);
    auto quiet = b->TryAcquire();
    ASSERT_TRUE(quiet.ok());
    observer->owner = std::move(b);  // the observer holds the only reference
    clock_->AdvanceBy(absl::Seconds(5));
    // `quiet` is destroyed after its breaker: it must do nothing.
  });
  EXPECT_TRUE(weak.expired());
}

TEST_F(CircuitBreakerTest, ProbeFailureReopensForLonger) {
  auto b = Make(TripOnFirstFailure());
  TransitionLog log;
  b->AddListener(log.Listener());
  Call(*b, Outcome::kFailure);
  clock_->AdvanceBy(absl::Seconds(1));
  auto p1 = b->TryAcquire();
  auto p2 = b->TryAcquire();
  b->Record(*std::move(p1), Outcome::kSuccess);
  b->Record(*std::move(p2), Outcome::kFailure,
            absl::DeadlineExceededError("slow"));
  EXPECT_EQ(b->state(), kOpen);
  EXPECT_EQ(b->open_until(), clock_->Now() + absl::Seconds(2));
  EXPECT_EQ(b->counts().consecutive_trips, 2u);
  auto rejected = b->TryAcquire();
  EXPECT_THAT(rejected.status().message(),
              HasSubstr("open for another 2s (a half-open probe failed); "
                        "last failure: DEADLINE_EXCEEDED: slow"));
  EXPECT_THAT(log.Get(),
              ElementsAre(Pair(kClosed, kOpen), Pair(kOpen, kHalfOpen),
                          Pair(kHalfOpen, kOpen)));
}

TEST_F(CircuitBreakerTest, BreakGrowsToTheCapAndResetsAfterClosing) {
  auto b = Make(TripOnFirstFailure());  // 1 s, x2, max 5 s
  Call(*b, Outcome::kFailure);
  std::vector<absl::Duration> breaks;
  for (int i = 0; i < 5; ++i) {
    breaks.push_back(b->open_until() - clock_->Now());
    clock_->AdvanceTo(b->open_until());
    ASSERT_EQ(b->state(), kHalfOpen);
    Call(*b, Outcome::kFailure);
  }
  EXPECT_THAT(breaks,
              ElementsAre(absl::Seconds(1), absl::Seconds(2), absl::Seconds(4),
                          absl::Seconds(5), absl::Seconds(5)));
  clock_->AdvanceTo(b->open_until());
  CallN(*b, 2, Outcome::kSuccess);
  ASSERT_EQ(b->state(), kClosed);
  Call(*b, Outcome::kFailure);
  EXPECT_EQ(b->open_until() - clock_->Now(), absl::Seconds(1));
}

TEST_F(CircuitBreakerTest, JitterIsDrawnOncePerTripAndOnlyShortens) {
  CircuitBreakerOptions o = TripOnFirstFailure();
  o.break_duration = absl::Seconds(10);
  o.max_break_duration = absl::Seconds(10);
  o.break_jitter = 0.5;
  std::vector<absl::Duration> seen;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    auto b = Make(o, seed);
    Call(*b, Outcome::kFailure);
    absl::Duration pause = b->open_until() - clock_->Now();
    EXPECT_GE(pause, absl::Seconds(5));
    EXPECT_LE(pause, absl::Seconds(10));
    // Asking again does not draw again.
    EXPECT_EQ(b->open_until() - clock_->Now(), pause);
    seen.push_back(pause);
  }
  EXPECT_NE(seen.front(), seen.back());  // jitter happens
  // The same seed gives the same draw.
  auto again = Make(o, 1);
  Call(*again, Outcome::kFailure);
  EXPECT_EQ(again->open_until() - clock_->Now(), seen.front());
}

TEST_F(CircuitBreakerTest, StalePermitDoesNotCountAsProbe) {
  auto b = Make(TripOnFirstFailure());
  auto old = b->TryAcquire();  // issued while closed
  ASSERT_TRUE(old.ok());
  Call(*b, Outcome::kFailure);
  clock_->AdvanceBy(absl::Seconds(1));
  ASSERT_EQ(b->state(), kHalfOpen);
  b->Record(*std::move(old), Outcome::kFailure);  // from the closed era
  EXPECT_EQ(b->state(), kHalfOpen);
  EXPECT_EQ(b->counts().failed, 2u);  // still counted in the totals
  auto p1 = b->TryAcquire();
  auto p2 = b->TryAcquire();
  EXPECT_TRUE(p1.ok() && p2.ok());  // both probe permits still free
}

// --- Switches -------------------------------------------------------------

TEST_F(CircuitBreakerTest, ForcedOpenRejectsEverything) {
  auto b = Make(TripOnFirstFailure());
  TransitionLog log;
  b->AddListener(log.Listener());
  b->SetForcedOpen(true);
  EXPECT_EQ(b->state(), kForcedOpen);
  EXPECT_EQ(b->open_until(), absl::InfiniteFuture());
  clock_->AdvanceBy(absl::Hours(1));
  auto rejected = b->TryAcquire();
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(rejected.status().message(),
            "circuit breaker 'backend:443' is forced open; last failure: none "
            "recorded");
  EXPECT_EQ(b->counts().not_permitted, 1u);
  b->SetForcedOpen(false);
  EXPECT_EQ(b->state(), kClosed);
  EXPECT_TRUE(b->TryAcquire().ok());
  EXPECT_THAT(log.Get(), ElementsAre(Pair(kClosed, kForcedOpen),
                                     Pair(kForcedOpen, kClosed)));
}

TEST_F(CircuitBreakerTest, ForcingAnOpenBreakerCancelsItsTimer) {
  auto b = Make(TripOnFirstFailure());
  Call(*b, Outcome::kFailure);
  EXPECT_EQ(clock_->PendingTimers(), 1u);
  b->SetForcedOpen(true);
  EXPECT_EQ(clock_->PendingTimers(), 0u);
  clock_->AdvanceBy(absl::Minutes(1));
  EXPECT_EQ(b->state(), kForcedOpen);
  b->SetForcedOpen(false);
  EXPECT_EQ(b->counts().consecutive_trips, 0u);
  Call(*b, Outcome::kFailure);
  EXPECT_EQ(b->open_until() - clock_->Now(), absl::Seconds(1));
}

TEST_F(CircuitBreakerTest, DisabledPermitsEverythingAndNeverTrips) {
  auto b = Make(TripOnFirstFailure());
  b->SetDisabled(true);
  EXPECT_EQ(b->state(), kDisabled);
  CallN(*b, 100, Outcome::kFailure);
  BreakerCounts c = b->counts();
  EXPECT_EQ(c.state, kDisabled);
  EXPECT_EQ(c.failed, 100u);
  EXPECT_EQ(c.window_calls, 0u);
  EXPECT_EQ(c.transitions, 1u);
  b->SetDisabled(false);
  EXPECT_EQ(b->state(), kClosed);
  Call(*b, Outcome::kFailure);
  EXPECT_EQ(b->state(), kOpen);
}

TEST_F(CircuitBreakerTest, ForcedOpenWinsOverDisabled) {
  auto b = Make(TripOnFirstFailure());
  TransitionLog log;
  b->AddListener(log.Listener());
  b->SetDisabled(true);
  b->SetForcedOpen(true);
  EXPECT_EQ(b->state(), kForcedOpen);
  b->SetForcedOpen(false);
  EXPECT_EQ(b->state(), kDisabled);
  b->SetDisabled(false);
  EXPECT_EQ(b->state(), kClosed);
  EXPECT_THAT(
      log.Get(),
      ElementsAre(Pair(kClosed, kDisabled), Pair(kDisabled, kForcedOpen),
                  Pair(kForcedOpen, kDisabled), Pair(kDisabled, kClosed)));
}

// --- Listeners, observer, lifetime ----------------------------------------

TEST_F(CircuitBreakerTest, RemovedListenerIsNotCalled) {
  auto b = Make(TripOnFirstFailure());
  TransitionLog kept, removed;
  b->AddListener(kept.Listener());
  std::uint64_t id = b->AddListener(removed.Listener());
  EXPECT_NE(id, 0u);
  b->SetForcedOpen(true);
  b->RemoveListener(id);
  b->SetForcedOpen(false);
  EXPECT_THAT(kept.Get(), SizeIs(2));
  EXPECT_THAT(removed.Get(), SizeIs(1));
}

TEST_F(CircuitBreakerTest, ListenerMayCallBackIntoTheBreaker) {
  auto b = Make(TripOnFirstFailure());
  std::vector<BreakerState> states;
  std::vector<bool> acquired;
  b->AddListener([&](BreakerState, BreakerState to) {
    states.push_back(b->state());
    auto p = b->TryAcquire();
    acquired.push_back(p.ok());
    if (to == kHalfOpen) b->SetForcedOpen(true);  // a nested transition
  });
  Call(*b, Outcome::kFailure);
  clock_->AdvanceBy(absl::Seconds(1));
  // The nested transition is delivered after the current one, in order.
  EXPECT_THAT(states, ElementsAre(kOpen, kHalfOpen, kForcedOpen));
  EXPECT_THAT(acquired, ElementsAre(false, true, false));
}

TEST_F(CircuitBreakerTest, RemoveListenerWaitsForARunningCall) {
  auto b = Make(TripOnFirstFailure());
  std::atomic<bool> entered{false}, release{false}, finished{false};
  std::uint64_t id = b->AddListener([&](BreakerState, BreakerState) {
    entered = true;
    while (!release.load()) std::this_thread::yield();
    finished = true;
  });
  std::thread transition([&] { b->SetForcedOpen(true); });
  while (!entered.load()) std::this_thread::yield();
  std::atomic<bool> removed{false};
  bool finished_when_removed = false;
  std::thread remover([&] {
    b->RemoveListener(id);
    finished_when_removed = finished.load();
    removed = true;
  });
  for (int i = 0; i < 1000 && !removed.load(); ++i) std::this_thread::yield();
  EXPECT_FALSE(removed.load());  // still blocked: the listener is running
  release = true;
  remover.join();
  transition.join();
  EXPECT_TRUE(finished_when_removed);
}

TEST_F(CircuitBreakerTest, ListenerMayDropTheLastReference) {
  auto b = Make(TripOnFirstFailure());
  CircuitBreaker* raw = b.get();
  int calls = 0;
  b->AddListener([&](BreakerState, BreakerState) {
    ++calls;
    b.reset();  // the breaker must survive until the call returns
  });
  raw->SetForcedOpen(true);  // ASan checks nothing is touched afterwards
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(b, nullptr);
}

TEST_F(CircuitBreakerTest, ListenerMayDropTheLastReferenceOnRecord) {
  auto observer = std::make_shared<BreakerObserver>();
  CircuitBreakerOptions o = TripOnFirstFailure();
  o.observer = observer;
  auto b = Make(o);
  CircuitBreaker* raw = b.get();
  b->AddListener([&](BreakerState, BreakerState) { b.reset(); });
  auto permit = raw->TryAcquire();
  ASSERT_TRUE(permit.ok());
  raw->Record(*std::move(permit), Outcome::kFailure);
  EXPECT_EQ(b, nullptr);
}

class RecordingObserver : public BreakerObserver {
 public:
  void OnStateChange(absl::string_view breaker, BreakerState from,
                     BreakerState to, const BreakerCounts& counts) override {
    std::lock_guard<std::mutex> lock(mu);
    names.emplace_back(breaker);
    changes.emplace_back(from, to);
    last_change_counts = counts;
  }
  void OnRecorded(absl::string_view, Outcome o, const BreakerCounts&) override {
    std::lock_guard<std::mutex> lock(mu);
    outcomes.push_back(o);
  }
  void OnNotPermitted(absl::string_view, const BreakerCounts& c) override {
    std::lock_guard<std::mutex> lock(mu);
    not_permitted.push_back(c.not_permitted);
  }
  std::mutex mu;
  std::vector<std::string> names;
  std::vector<Transition> changes;
  BreakerCounts last_change_counts;
  std::vector<Outcome> outcomes;
  std::vector<std::uint64_t> not_permitted;
};

TEST_F(CircuitBreakerTest, ObserverSeesTransitionsAndCounts) {
  auto observer = std::make_shared<RecordingObserver>();
  CircuitBreakerOptions o = TripOnFirstFailure();
  o.observer = observer;
  auto b = Make(o);
  Call(*b, Outcome::kSuccess);
  Call(*b, Outcome::kIgnored);
  Call(*b, Outcome::kFailure);
  EXPECT_FALSE(b->TryAcquire().ok());
  EXPECT_FALSE(b->TryAcquire().ok());
  clock_->AdvanceBy(absl::Seconds(1));
  EXPECT_THAT(
      observer->outcomes,
      ElementsAre(Outcome::kSuccess, Outcome::kIgnored, Outcome::kFailure));
  EXPECT_THAT(observer->not_permitted, ElementsAre(1u, 2u));
  EXPECT_THAT(observer->changes,
              ElementsAre(Pair(kClosed, kOpen), Pair(kOpen, kHalfOpen)));
  EXPECT_THAT(observer->names, ElementsAre("backend:443", "backend:443"));
  EXPECT_EQ(observer->last_change_counts.state, kHalfOpen);
  EXPECT_EQ(observer->last_change_counts.transitions, 2u);
  EXPECT_EQ(observer->last_change_counts.failed, 1u);
}

TEST_F(CircuitBreakerTest, DestroyingTheBreakerCancelsItsTimer) {
  auto b = Make(TripOnFirstFailure());
  bool called = false;
  b->AddListener([&](BreakerState, BreakerState) { called = true; });
  Call(*b, Outcome::kFailure);
  called = false;
  EXPECT_EQ(clock_->PendingTimers(), 1u);
  b.reset();
  EXPECT_EQ(clock_->PendingTimers(), 0u);
  clock_->AdvanceBy(absl::Minutes(1));
  EXPECT_FALSE(called);
}

TEST_F(CircuitBreakerTest, PermitMayOutliveTheBreaker) {
  auto b = Make(TripOnFirstFailure());
  auto permit = b->TryAcquire();
  ASSERT_TRUE(permit.ok());
  b.reset();
  EXPECT_TRUE(permit->valid());
  // Destroying it now must be harmless (ASan checks this).
}

TEST_F(CircuitBreakerTest, TimerThatCannotBeCancelledFindsNoBreaker) {
  // A clock whose Cancel fails: the callback runs after the breaker is gone
  // and must not touch it.
  class NoCancelClock final : public Clock {
   public:
    absl::Time Now() override { return fake.Now(); }
    TimerId RunAfter(absl::Duration d, std::function<void()> fn) override {
      return fake.RunAfter(d, std::move(fn));
    }
    bool Cancel(TimerId) override { return false; }
    FakeClock fake;
  };
  auto clock = std::make_shared<NoCancelClock>();
  auto b = *CircuitBreaker::Create(TripOnFirstFailure(), clock, 1);
  Call(*b, Outcome::kFailure);
  b.reset();
  EXPECT_EQ(clock->fake.PendingTimers(), 1u);
  clock->fake.AdvanceBy(absl::Seconds(1));  // runs; ASan would catch misuse
  EXPECT_EQ(clock->fake.PendingTimers(), 0u);
}

// Many callers on many threads while time moves: totals must add up and the
// state machine must stay consistent (run under TSan to check the locking).
TEST_F(CircuitBreakerTest, ConcurrentCallersAndTimer) {
  CircuitBreakerOptions o = BaseOptions();
  o.break_duration = absl::Milliseconds(10);
  o.max_break_duration = absl::Milliseconds(40);
  auto b = Make(o);
  std::atomic<std::uint64_t> transitions_seen{0};
  b->AddListener([&](BreakerState, BreakerState) { ++transitions_seen; });
  constexpr int kThreads = 8;
  constexpr int kCalls = 500;
  std::atomic<std::uint64_t> permitted{0}, rejected{0};
  std::atomic<bool> done{false};
  std::thread ticker([&] {
    while (!done.load()) clock_->AdvanceBy(absl::Milliseconds(1));
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        auto p = b->TryAcquire();
        if (!p.ok()) {
          ++rejected;
          continue;
        }
        ++permitted;
        const int k = (t + i) % 3;
        b->Record(*std::move(p), k == 0   ? Outcome::kFailure
                                 : k == 1 ? Outcome::kSuccess
                                          : Outcome::kIgnored);
      }
    });
  }
  for (auto& t : threads) t.join();
  done = true;
  ticker.join();
  BreakerCounts c = b->counts();
  EXPECT_EQ(c.successful + c.failed + c.ignored, permitted.load());
  EXPECT_EQ(c.not_permitted, rejected.load());
  EXPECT_EQ(permitted + rejected, std::uint64_t{kThreads * kCalls});
  EXPECT_EQ(transitions_seen.load(), c.transitions);
}

}  // namespace
}  // namespace tether
