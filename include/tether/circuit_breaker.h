// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_CIRCUIT_BREAKER_H_
#define TETHER_CIRCUIT_BREAKER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tether/clock.h"

namespace tether {

// Where a breaker stands.
enum class BreakerState {
  kClosed,      // calls pass; outcomes are counted in the sliding window
  kOpen,        // calls are rejected until the break duration has passed
  kHalfOpen,    // a few probe calls pass; their outcomes decide
  kForcedOpen,  // `SetForcedOpen(true)`: every call is rejected
  kDisabled,    // `SetDisabled(true)`: every call passes, nothing is counted
};

// "closed", "open", "half-open", "forced-open", "disabled".
absl::string_view BreakerStateName(BreakerState s);

// What one permitted call says about the dependency's health.
enum class Outcome {
  kSuccess,  // the dependency answered
  kFailure,  // the dependency is unhealthy (counts towards tripping)
  kIgnored,  // says nothing about health (e.g. a drain during a rollout, a
             // call the client cancelled): the window is left untouched and
             // a half-open probe permit is given back
};

// "success", "failure", "ignored".
absl::string_view OutcomeName(Outcome o);

enum class SlidingWindowType {
  kCountBased,  // the last `window_size` outcomes
  kTimeBased,   // the outcomes of the last `window_duration`
};

// A snapshot of a breaker's counters.
struct BreakerCounts {
  BreakerState state = BreakerState::kClosed;
  // Totals since the breaker was created (monotonic, for metrics). Every
  // recorded outcome is counted here, including outcomes recorded while the
  // breaker is disabled or after it changed state (see `Record`).
  std::uint64_t successful = 0;
  std::uint64_t failed = 0;
  std::uint64_t ignored = 0;        // includes permits dropped unrecorded and
                                    // probes given back after
                                    // `half_open_probe_timeout`
  std::uint64_t not_permitted = 0;  // rejected `TryAcquire` calls
  std::uint64_t transitions = 0;    // state changes
  // The current closed-state sliding window (zero in other states).
  std::uint64_t window_calls = 0;     // successes + failures in the window
  std::uint64_t window_failures = 0;  // failures in the window
  // 100 * window_failures / window_calls, in [0, 100]; 0 for an empty window.
  // The breaker compares it with the threshold only once
  // `window_calls >= minimum_calls`.
  double failure_rate = 0;
  // Failures in a row in the closed state (reset by a success; ignored
  // outcomes neither count nor reset).
  std::uint64_t consecutive_failures = 0;
  // Trips since the breaker last closed; the break duration grows with it.
  std::uint64_t consecutive_trips = 0;
  // Why the breaker is in its state, in a few words: the rule that opened
  // it ("5 consecutive failures", "failure rate 50.0% >= 50% over 64
  // calls", "a half-open probe failed"), or what moved it since ("break
  // over", "dependency available", "3 probes succeeded", "forced open",
  // "disabled", "switches off"). Empty until its first state change.
  std::string reason;
};

// Receives a breaker's events, for metrics and logs. All methods have empty
// defaults; override what you need. Called with no breaker lock held.
// `OnStateChange` calls for one breaker are serialized and in order;
// `OnRecorded` and `OnNotPermitted` run on the caller's thread and may run
// concurrently with each other and with `OnStateChange`. Implementations must
// be thread-safe and must not block.
class BreakerObserver {
 public:
  virtual ~BreakerObserver() = default;

  virtual void OnStateChange(absl::string_view /*breaker*/,
                             BreakerState /*from*/, BreakerState /*to*/,
                             const BreakerCounts& /*counts*/) {}
  // An outcome was recorded (also for a permit dropped unrecorded: kIgnored).
  virtual void OnRecorded(absl::string_view /*breaker*/, Outcome /*outcome*/,
                          const BreakerCounts& /*counts*/) {}
  // `TryAcquire` rejected a call.
  virtual void OnNotPermitted(absl::string_view /*breaker*/,
                              const BreakerCounts& /*counts*/) {}
};

struct CircuitBreakerOptions {
  // Names the breaker in error messages and observer calls (e.g. the target).
  // Default "default"; must not be empty.
  std::string name = "default";

  // Default kCountBased.
  SlidingWindowType window_type = SlidingWindowType::kCountBased;
  // kCountBased only: how many of the latest outcomes the window holds.
  // Default 100; in [1, 1000000].
  int window_size = 100;
  // kTimeBased only: how far back the window reaches. Default 60 s;
  // in (0, 24 h]. The window is `window_buckets` buckets of
  // `window_duration / window_buckets` each, aligned on the clock: an outcome
  // is forgotten between `window_duration - bucket width` and
  // `window_duration` after it was recorded.
  absl::Duration window_duration = absl::Seconds(60);
  // kTimeBased only. Default 60; in [1, 10000], and the bucket width
  // (`window_duration / window_buckets`) must be at least 1 ms.
  int window_buckets = 60;

  // The closed breaker trips when, with at least `minimum_calls` outcomes in
  // the window, failures are at least this percentage of them.
  // Default 50; in (0, 100].
  double failure_rate_threshold = 50;
  // Default 10; >= 1, and for kCountBased <= window_size.
  int minimum_calls = 10;
  // The closed breaker also trips after this many failures in a row,
  // whatever the window says (ignored outcomes do not break the run).
  // 0 turns the rule off. Default 0; in [0, 1000000].
  int consecutive_failures = 0;

  // How long the breaker stays open after its first trip. Default 5 s; > 0.
  absl::Duration break_duration = absl::Seconds(5);
  // Each further trip without closing in between multiplies the break by
  // this. Default 2.0; in [1, 100].
  double break_multiplier = 2.0;
  // The un-jittered break never exceeds this. Default 60 s;
  // >= break_duration, finite.
  absl::Duration max_break_duration = absl::Seconds(60);
  // Each trip draws one factor u in [0, 1) and stays open
  // `break * (1 - break_jitter * u)`: jitter only shortens, so the cap holds.
  // Default 0.2; in [0, 1).
  double break_jitter = 0.2;

  // How many probe calls the half-open breaker lets through. It closes when
  // this many probes have succeeded and re-opens (with a longer break) on the
  // first probe that fails. An ignored probe gives its permit back.
  // Default 3; in [1, 100000].
  int half_open_permits = 3;
  // A half-open probe permit not recorded within this time is given back
  // (counted as ignored, like a dropped permit) so that another probe may
  // go: a probe held by a quiet stream never keeps the breaker half-open for
  // ever. This is the longest the half-open state waits for a probe; a
  // later `Record` of that permit changes nothing. Default 30 s; in
  // (0, 24 h].
  absl::Duration half_open_probe_timeout = absl::Seconds(30);

  // Optional; receives transitions and counts. Default none.
  std::shared_ptr<BreakerObserver> observer;
};

// OK, or INVALID_ARGUMENT naming the first field that is out of range, its
// value and the valid range.
absl::Status Validate(const CircuitBreakerOptions& options);

// Says whether a dependency (one target) is healthy enough to call.
//
// A closed breaker lets calls through and keeps a sliding window of their
// outcomes; when the failure rate (or a run of failures) crosses the
// configured threshold it opens and rejects calls for a break duration that
// grows with each trip (jittered, capped). After the break it is half-open:
// `half_open_permits` probes pass; if they all succeed it closes (and the
// break resets), if one fails it opens again for longer. Outcomes that say
// nothing about health (a server draining during a rollout) are recorded as
// `kIgnored` and change nothing.
//
// Each call asks for a `Permit` and hands it back with the outcome. A permit
// belongs to the state it was issued in: an outcome whose permit was issued
// before the breaker last changed state is counted in the totals but changes
// neither the window nor the half-open probes. A probe permit not recorded
// within `half_open_probe_timeout` is given back (counted as ignored then);
// its late outcome is not counted again and changes nothing.
//
// Time: open -> half-open happens on the breaker's clock timer when the
// break ends (or in `TryAcquire`, if that comes first), or at once on
// `OnDependencyAvailable`. Readers (`state`,
// `open_until`, `counts`) never change the breaker.
//
// Thread safety: every method may be called concurrently from any thread.
// One breaker per target is shared (via `std::shared_ptr`) by all streams on
// that target and by the application's own unary calls. Listeners and the
// observer are called with no breaker lock held, so they may call back into
// the breaker. Transitions are delivered to them one at a time, in order,
// possibly on another thread than the one that caused the transition (the
// clock's timer thread for open -> half-open).
//
// Ownership: the breaker keeps the `Clock` alive; its timers (the break and
// the probe timeouts) never outlive it (cancelled in the destructor, and
// they hold only a weak_ptr).
// Permits hold a weak_ptr, so they may outlive the breaker (then they do
// nothing).
//
//   auto breaker = tether::CircuitBreaker::Create(options).value();
//   absl::StatusOr<tether::CircuitBreaker::Permit> permit =
//       breaker->TryAcquire();
//   if (!permit.ok()) return permit.status();  // UNAVAILABLE, explained
//   grpc::Status s = stub->Call(&ctx, request, &response);
//   breaker->Record(*std::move(permit),
//                   s.ok() ? tether::Outcome::kSuccess
//                          : tether::Outcome::kFailure);
class CircuitBreaker final
    : public std::enable_shared_from_this<CircuitBreaker> {
 public:
  using Counts = BreakerCounts;
  using Listener = std::function<void(BreakerState from, BreakerState to)>;

  // Permission for one call. Move-only. Hand it back with `Record`;
  // destroying (or move-assigning over) a permit that was not recorded
  // records `kIgnored`. A default-constructed or moved-from permit is empty.
  class Permit {
   public:
    Permit() = default;
    Permit(Permit&& other) noexcept;
    Permit& operator=(Permit&& other) noexcept;
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;
    ~Permit();

    // True while the permit is held and not yet recorded.
    bool valid() const { return generation_ != 0; }
    // True for a half-open probe permit.
    bool is_probe() const { return probe_ != 0; }

   private:
    friend class CircuitBreaker;
    Permit(std::weak_ptr<CircuitBreaker> breaker, std::uint64_t generation,
           std::uint64_t probe)
        : breaker_(std::move(breaker)),
          generation_(generation),
          probe_(probe) {}
    void Release();

    std::weak_ptr<CircuitBreaker> breaker_;
    std::uint64_t generation_ = 0;  // 0: empty
    std::uint64_t probe_ = 0;       // the probe's id; 0: not a probe
  };

  // INVALID_ARGUMENT for invalid options. `clock` defaults to
  // `SystemClock()`. `seed` seeds the jitter source (std::mt19937_64, drawn
  // once per trip); 0 picks a random seed, so that breakers in different
  // processes do not re-open in lock step.
  static absl::StatusOr<std::shared_ptr<CircuitBreaker>> Create(
      CircuitBreakerOptions options, std::shared_ptr<Clock> clock = nullptr,
      std::uint64_t seed = 0);

  ~CircuitBreaker();
  CircuitBreaker(const CircuitBreaker&) = delete;
  CircuitBreaker& operator=(const CircuitBreaker&) = delete;

  // A permit when the breaker is closed or disabled, or half-open with a
  // probe permit free (an open breaker whose break has passed turns
  // half-open here). Otherwise UNAVAILABLE with a message naming the
  // breaker, its state, why it tripped and the last failure; counted in
  // `not_permitted`.
  absl::StatusOr<Permit> TryAcquire();

  // Records the outcome of the call `permit` allowed. `cause` is the
  // failure's status, kept for rejection messages (only for kFailure).
  // An empty permit or one from another breaker is a no-op.
  void Record(Permit permit, Outcome outcome,
              const absl::Status& cause = absl::OkStatus());

  // The current state. Pure: an open breaker whose break has just passed
  // reads kOpen until its timer (or a `TryAcquire`) turns it half-open.
  BreakerState state() const;

  // When a call could next be permitted, with no other event: for kOpen the
  // end of the break (possibly just past); for kHalfOpen with every probe
  // permit taken, when the oldest unrecorded probe times out
  // (`half_open_probe_timeout`); InfiniteFuture for kForcedOpen; otherwise
  // InfinitePast (TryAcquire would succeed now).
  absl::Time open_until() const;

  // Tells the breaker that the dependency answers again (a connection pool
  // saw a usable connection come back after a time with none). An open
  // breaker turns half-open at once, without waiting out its break: its
  // probes then decide, as after a break. Counted as a transition and
  // delivered to listeners like any other. Every other state (closed,
  // half-open, forced open, disabled) is left unchanged.
  void OnDependencyAvailable();

  // Forces the breaker open (rejecting everything) or releases it. Forced
  // open takes precedence over disabled. Releasing both switches leaves the
  // breaker closed with an empty window and the break reset.
  void SetForcedOpen(bool forced);
  // Disables the breaker (permitting everything, tripping never) or
  // re-enables it (closed, empty window, break reset).
  void SetDisabled(bool disabled);

  // `listener` is called on every state change, with no lock held, one call
  // at a time and in order, from any thread (including the clock's timer
  // thread, for the time-driven open -> half-open). While one thread is
  // delivering, transitions caused elsewhere are queued and delivered by it,
  // so a call that caused a transition may return before listeners ran.
  // Returns an id (never 0).
  std::uint64_t AddListener(Listener listener);
  // After this returns, the listener is not running and will not be called
  // again, unless this is called from inside a listener call (that call then
  // finishes normally). Do not call it while holding a lock a listener takes.
  void RemoveListener(std::uint64_t id);

  Counts counts() const;
  const CircuitBreakerOptions& options() const { return options_; }
  absl::string_view name() const { return options_.name; }

 private:
  // Everything that changes (state, window, probes, listeners, the mutex),
  // defined in circuit_breaker.cc.
  struct State;

  CircuitBreaker(CircuitBreakerOptions options, std::shared_ptr<Clock> clock,
                 std::uint64_t seed);

  const CircuitBreakerOptions options_;
  const std::unique_ptr<State> state_;
};

}  // namespace tether

#endif  // TETHER_CIRCUIT_BREAKER_H_
