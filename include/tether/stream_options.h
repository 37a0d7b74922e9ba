// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_STREAM_OPTIONS_H_
#define TETHER_STREAM_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tether/backoff.h"
#include "tether/classification.h"
#include "tether/clock.h"
#include "tether/observer.h"

namespace tether {

class CircuitBreaker;
class ResyncPool;
class RetryBudget;

// What a stream does when sequence numbers skip (seq > last delivered + 1).
enum class GapPolicy {
  kDeliverAndReport,  // deliver, count it, tell the observer (default)
  kFail,              // end the stream with DATA_LOSS; the message is not
                      // delivered
};

// Options of one `ReconnectingStream`. Every field has a default; invalid
// values make `ReconnectingStream::Start`/`Open` fail with INVALID_ARGUMENT
// before anything starts. Nothing is clamped silently.
//
// Streams started with equal options share one copy of what they read
// (about 330 bytes a stream): the same values, and the same objects by
// address (observer, clock, breaker, budgets, pool, backoff). A
// `classifier` that is a lambda or a functor cannot be compared, so each
// stream with one keeps its own copy; a plain function (as the default) is
// shared.
struct ReconnectingStreamOptions {
  // How long to wait between attempts that make no progress. A prototype:
  // each stream clones it at its first failed attempt. Default (null):
  // `ExponentialBackoff` with its default options (100 ms, x2, max 10 s,
  // full jitter).
  std::shared_ptr<const BackoffPolicy> backoff;

  // After an attempt that delivered at least one new message ended (its
  // server cut it, its connection was lost), the next attempt starts after
  // a delay in [0, this): no backoff, just a spread of the reopens of the
  // streams that ended together. A `ConnectionPool` sizes the spread to
  // them: a stream alone on its connection reopens at once, and the herd
  // one connection lost takes evenly placed points of a part of the window
  // that grows with its size (64 streams: the first half; 128 or more: all
  // of it). A source that gives no point: a random one. Default 5 ms; >= 0
  // (0: every reopen at once).
  absl::Duration reopen_after_progress_jitter = absl::Milliseconds(5);

  // Reopen budget: the stream ends (with the last attempt's status) after
  // this many attempts in a row fail (end without a new message and without
  // having been healthy). Also the most resyncs in a row without a new item
  // (each after the first counts as a failed attempt; only an attempt
  // healthy for a whole `max_time_without_progress` before it asks starts
  // that count over; none does when that bound is infinite). An attempt
  // that a sign of recovery started before its backoff was over (see
  // `recovery_jitter`) and that fails before it is healthy is not counted:
  // the stream waits for the rest of its backoff (behind an L7 proxy with
  // every backend down, such signs come often and are wrong). Default 20;
  // >= 1.
  int max_attempts_without_progress = 20;

  // Reopen budget: the stream ends once its attempts have been failing for
  // this long: from the start of the first attempt that failed (or the end
  // of one that was healthy) until a new message or a healthy attempt (see
  // `attempt_settle_time`). Quiet time on a healthy attempt never counts.
  // Default 2 min; > 0, or `absl::InfiniteDuration()` for no time bound (the
  // attempt bound still holds). Both budgets reset on a new message or a
  // healthy attempt.
  absl::Duration max_time_without_progress = absl::Minutes(2);

  // Default kDeliverAndReport.
  GapPolicy gap_policy = GapPolicy::kDeliverAndReport;

  // Maps an attempt's end to drain / transient / permanent / ok. Default
  // (empty): `DefaultClassify`. A plain function lets streams share their
  // options (see above).
  Classifier classifier;

  // When the connection under a running attempt starts draining (GOAWAY,
  // health NOT_SERVING), open the next attempt on another connection at once
  // and cancel the old one when the new one delivers (make before break).
  // Default true. When false, the stream moves only when its attempt ends.
  bool migrate_on_drain = true;

  // During a migration, the old attempt is cancelled when the new one
  // delivers its first message, or this long after the new one started,
  // whichever comes first (a quiet stream may deliver nothing for a long
  // time). Default 2 s; > 0.
  absl::Duration migration_handoff_timeout = absl::Seconds(2);

  // During a migration of a stream with sequence positions, the old attempt
  // stops at the position the new one resumed from: the first message it
  // receives past that position is held, not delivered, and it reads no
  // further. When the new attempt delivers, the held message is dropped (the
  // new one sends it again); if the stream falls back to the old attempt
  // (the new one failed, stalled, never connected, or its connection
  // drained), the held message is delivered and the old attempt reads on.
  // So a move never leaves the stream behind its server by what arrived
  // during the overlap, and nothing is received twice. The cost: messages
  // that arrive during the overlap wait for the new attempt's first message
  // (at most `migration_handoff_timeout`). Default true. When false, the old
  // attempt delivers until the new one's first message; the new one then
  // replays what it delivered meanwhile (dropped as duplicates). On a bidi
  // stream a held acknowledgement that is dropped never reached the app, so
  // its write stays and the new attempt replays it.
  bool migration_hold_fallback = true;

  // The spread window of moves off an attempt that still delivers: when its
  // connection drains (GOAWAY, health NOT_SERVING) or its server sends a
  // drain notice, the stream starts its replacement at a point drawn once,
  // uniformly, in [0, this) after the signal, and the old attempt delivers
  // meanwhile. The streams leaving one server then reach the others as a
  // ramp (N / window opens a second) instead of all within a few ms. Moves
  // with nothing left to serve are never spread: a stalled attempt, and an
  // attempt that ended (a server that cancels before its GOAWAY, a lost
  // connection) reopen as without it. If the server ends the old attempt
  // while its move still waits (its drain deadline came first), the move
  // starts at once. So that every move lands before the server's drain
  // deadline, pick at most about half of that deadline (gRPC C++
  // `Shutdown(deadline)`, Kubernetes' `terminationGracePeriodSeconds`).
  // Set it once for a process in `ClientOptions::streams`. Default 0: move
  // at once (one client with a few streams moves fastest so);
  // in [0, kMaxMigrationJitter] (1 min).
  absl::Duration migration_jitter = absl::ZeroDuration();
  static constexpr absl::Duration kMaxMigrationJitter = absl::Minutes(1);

  // An attempt that has stayed open this long without an error, on a
  // connection that is connected (READY), is healthy even if it received
  // nothing yet (a quiet stream): its failing period ends (the reopen budget
  // starts over) and its breaker permit counts as a success, so quiet
  // streams never hold half-open probes. An attempt is also healthy at its
  // first message. Default 1 s; > 0 and <= 1 h.
  absl::Duration attempt_settle_time = absl::Seconds(1);

  // Stall detection, for streams whose server sends something (a heartbeat,
  // a progress notice) at least this often: an attempt that receives nothing
  // for this long is treated as lost (a peer that hangs, a proxy that stops
  // forwarding, a server that accepts and never speaks). The stream opens
  // its next attempt on another connection make before break (the silent
  // one keeps delivering until the new one's first message), reports the
  // silent connection to the source (the pool marks it suspect), tells the
  // observer (`OnStalled`), and counts a failed attempt against the reopen
  // budget, so a server whose every attempt stalls ends the stream within
  // the budget. Pick about 3x the server's heartbeat interval. Default 0:
  // off (silence is a quiet stream, as in gRPC itself; only keepalive, about
  // 6 min by default, notices a dead peer). 0, or in [1 ms, 24 h].
  absl::Duration stall_timeout = absl::ZeroDuration();

  // An attempt whose connection is not connected (READY) this long after
  // the attempt started is given up and counts as a failed attempt (a
  // connect that hangs: a black-holed address, a port that accepts and
  // never speaks HTTP/2). While attempts keep failing, an attempt that is
  // still connecting is also given up when the reopen budget's time bound
  // runs out, so the bound holds for hung connects too. Default 10 s;
  // > 0 and <= 1 h.
  absl::Duration attempt_open_timeout = absl::Seconds(10);

  // A stream waiting out its backoff reopens at once, after a random delay
  // in [0, this), when its connection source sees a usable connection come
  // back (the dependency recovered), instead of waiting for its timer.
  // Default 50 ms; >= 0 and <= 10 s.
  absl::Duration recovery_jitter = absl::Milliseconds(50);

  // Messages read ahead of the application before reading pauses (flow
  // control). Default 32; >= 1.
  std::size_t max_buffered_messages = 32;

  // Bidi streams only: writes the app may queue that the server has not
  // acknowledged yet (or, without `acknowledges`, that gRPC has not written
  // yet). A `Write` beyond it returns RESOURCE_EXHAUSTED. Default 64;
  // >= 1 and <= 1 << 20.
  std::size_t max_outbox = 64;

  // Receives every event. Default: none.
  std::shared_ptr<StreamObserver> observer;

  // Guards attempts; share one per target among its streams. Before each
  // attempt the stream asks it for a permit; while it refuses, the stream
  // waits (no connection is touched) until the break ends or the reopen
  // budget's time bound passes, then ends with UNAVAILABLE naming the
  // breaker. Outcomes: success on an attempt's first message; failure for a
  // transient end or a failure to connect before any message; ignored for
  // drains, permanent errors and the client's own cancels. Default: none.
  std::shared_ptr<CircuitBreaker> breaker;

  // Bounds failure-caused reopens across every stream and caller that share
  // it (see `RetryBudget`): a reopen after a transient end without progress
  // takes a retry from it and waits when there is none. Drains, moves,
  // stalls, resyncs and reopens after progress take nothing. Default: none.
  std::shared_ptr<RetryBudget> retry_budget;

  // A stream whose *first* attempt is refused by an open breaker ends at once
  // with that UNAVAILABLE instead of waiting. Default false (wait).
  bool fail_fast_on_open_breaker = false;

  // The threads that run the spec's `resync` (see `ResyncPool`): share one
  // among the streams whose resyncs are bounded together. Default (null):
  // `ResyncPool::Default()`, shared by every stream of the process (at most
  // 8 resyncs at once).
  std::shared_ptr<ResyncPool> resync_pool;

  // The spread of resyncs: a stream that must resync waits a point drawn
  // uniformly in [0, this) before its `resync` runs (on top of the backoff
  // of a resync that follows another without a new item). When a server
  // compacts and every stream of every client must list again at once, the
  // listings reach it as a ramp (N / window a second) instead of all at
  // once; the resync pool still bounds how many run at once in a process.
  // The resync's own time bound (`max_time_without_progress`) counts from
  // the end of the wait. Set it once for a process in
  // `ClientOptions::streams`. Default 0: resync at once; in
  // [0, kMaxResyncJitter] (10 min).
  absl::Duration resync_jitter = absl::ZeroDuration();
  static constexpr absl::Duration kMaxResyncJitter = absl::Minutes(10);

  // Time and timers. Default: `SystemClock()`. Tests pass a FakeClock.
  std::shared_ptr<Clock> clock;

  // Seed of the stream's random source (jitter). Default 0: seeded from
  // entropy. Tests pass a fixed seed for repeatable delays.
  std::uint64_t random_seed = 0;

  // Out of line (stream_options.cc): a user translation unit does not
  // compile the copies and destructor of every field.
  ReconnectingStreamOptions();
  ~ReconnectingStreamOptions();
  ReconnectingStreamOptions(const ReconnectingStreamOptions&);
  ReconnectingStreamOptions(ReconnectingStreamOptions&&) noexcept;
  ReconnectingStreamOptions& operator=(const ReconnectingStreamOptions&);
  ReconnectingStreamOptions& operator=(ReconnectingStreamOptions&&) noexcept;
};

// Counters of one stream, from `ReconnectingStream::stats()`.
struct StreamStats {
  std::uint64_t attempts = 0;            // attempts started
  std::uint64_t migrations = 0;          // attempts started by a drain
                                         // (or a drain notice)
  std::uint64_t drain_notices = 0;       // drain notices received
  std::uint64_t messages_delivered = 0;  // handed to the application
  std::uint64_t duplicates_dropped = 0;  // seq <= last delivered, or a
                                         // repeated bidi acknowledgement
  std::uint64_t gaps = 0;                // seq > last delivered + 1
  std::uint64_t stalls = 0;              // attempts lost to stall_timeout
  std::uint64_t resyncs = 0;             // resyncs the app's `resync` completed
  bool has_last_seq = false;
  std::uint64_t last_delivered_seq = 0;  // valid when has_last_seq
};

// OK, or INVALID_ARGUMENT naming the first invalid field.
absl::Status Validate(const ReconnectingStreamOptions& options);

}  // namespace tether

#endif  // TETHER_STREAM_OPTIONS_H_
