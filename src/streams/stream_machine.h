// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Internal: the machine behind every stream (`StreamCore`), compiled once in
// the library. Its concerns live in files of their own, each defining the
// members of its section below: starting an attempt (attempt_start.cc), an
// attempt's health, stall and open deadline (attempt_health.cc), moving off
// a draining or silent attempt and the hold (stream_move.cc), admitting a
// message (stream_admission.cc, with `PositionGate` and `CursorReplay`), an
// attempt's end (attempt_end.cc, with the pure `DecideEnd`), resync
// (stream_resync.cc); stream_machine.cc composes them (the public calls,
// timers, the end).
#ifndef TETHER_SRC_STREAMS_STREAM_MACHINE_H_
#define TETHER_SRC_STREAMS_STREAM_MACHINE_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "streams/cursor_replay.h"
#include "streams/end_decision.h"
#include "streams/notice_pace.h"
#include "streams/stream_settings.h"
#include "tether/backoff.h"
#include "tether/classification.h"
#include "tether/clock.h"
#include "tether/internal/breaker_gate.h"
#include "tether/internal/budgeted_retry.h"
#include "tether/internal/deferred.h"
#include "tether/internal/delivery_queue.h"
#include "tether/internal/mutex.h"
#include "tether/internal/position_gate.h"
#include "tether/internal/reopen_budget.h"
#include "tether/internal/stream_core.h"
#include "tether/internal/stream_random.h"
#include "tether/internal/visibility.h"
#include "tether/observer.h"
#include "tether/position.h"
#include "tether/resync_pool.h"
#include "tether/stream_options.h"
#include "tether/transport.h"
#include "time/timer_slot.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

// The machine's record of one attempt (declared in stream_core.h, opaque
// there). Guarded by its machine's lock. It owns its timers: the settle or
// stall watch and the open deadline (`TimerSlot`s), cancelled at its end.
struct AttemptRecord {
  AttemptInfo info;
  std::shared_ptr<Attempt> handle;
  absl::Time started;
  BreakerGate::Ticket ticket;  // empty (not `valid`) without a breaker
  PositionGate::Cursor cursor;
  // Opaque cursors: where it catches up from (`CursorReplay`).
  CursorReplay::Catchup catchup;
  // Settle (without `stall_timeout`) or stall (with it): one of the two.
  TimerSlot watch_timer;
  TimerSlot open_timer;
  absl::Time last_activity;  // start, then each message
  bool live = true;          // OnDone not seen yet
  bool cancel_requested = false;
  bool got_message = false;
  bool progressed = false;  // delivered a new message
  bool healthy = false;     // a message, or open and connected to settle
  bool paused = false;      // reading stopped: the app's queue is full
  bool draining = false;    // its connection announced a drain
  bool stalled = false;     // nothing arrived for `stall_timeout`
  bool noticed = false;     // the server sent its drain notice on it
  // A move's old attempt stopped at the replacement's resume position: its
  // next message waits in the core's `held_` and it reads no further until
  // the stream falls back to it.
  bool held = false;
  // Started before its backoff was over, on a hint that a usable connection
  // is back (`OnConnectionAvailable`): the time the backoff had set.
  // InfinitePast: started on schedule.
  absl::Time hinted_due = absl::InfinitePast();
  // Whether the stream is moving off this attempt (make before break).
  bool leaving() const { return draining || stalled || noticed; }
  // Its end not seen yet, and the stream has not cancelled it.
  bool running() const { return live && !cancel_requested; }
};

// The attempts of one stream.
//
// A stream runs one attempt at a time, except during a migration: when the
// connection under the current attempt drains, a replacement starts on
// another connection and the old attempt stays as a fallback until the
// replacement delivers (or the hand-off timeout passes); then the old one is
// cancelled. Cancelled attempts ("retiring") are forgotten except for their
// count: their `OnDone` still releases their pick.
//
// Ways out: at any time the stream is done, or has a live attempt, or has a
// start in flight (breaker permit and pick, outside the lock), or waits on a
// timer. Every state change below keeps that.
//
// Locking: `mu_` guards the attempt state. Nothing is called with it held
// except the clock (`RunAfter`/`Cancel`, which never call back inline) and
// the delivery queue's producer side. Attempts, the factory, the source, the
// breaker, the classifier, `sequence_of`, `resume_after`, the observer and
// the app's callbacks all run with no stream lock held (`Deferred`).
//
// Timers: each is a `TimerSlot` (an attempt's settle or stall watch and its
// open deadline; the stream's reopen, hand-off, migration, resync and resync
// deadline), armed through `ArmLocked`: its handler (`On...TimerLocked`)
// runs under the lock only for the arming still in place, so a handler
// never meets a timer that was re-armed or cancelled meanwhile.
class StreamMachine final : public StreamCore,
                            public ConnectionSource::DrainListener,
                            private DeliveryQueueOwner,
                            public std::enable_shared_from_this<StreamMachine> {
  struct PassKey {
    explicit PassKey() = default;
  };

 public:
  using Hooks = StreamHooks;

  static absl::StatusOr<std::shared_ptr<StreamCore>> Create(
      std::shared_ptr<ConnectionSource> source,
      std::unique_ptr<StreamParts> parts, Hooks hooks,
      ReconnectingStreamOptions options, DoneFn on_done);

  // For `Create` only (std::make_shared needs a public constructor).
  template <class... Args>
  StreamMachine(PassKey /*key*/, Args&&... args)
      : StreamMachine(std::forward<Args>(args)...) {}

  void StartFirst() override;

  bool Read(void* out) override { return queue_.Read(out); }

  absl::Status Finish() override { return queue_.Finish(); }

  void Cancel() override;

  // Cancels, stops every later callback, and waits for the ones running on
  // other threads.
  void Detach() override;

  // Runs `call` through the delivery queue's gate (never after `Detach`).
  void Callout(const std::function<void()>& call) override;

  StreamStats stats() override;

  void OnConnectionDraining(std::uint64_t connection_id,
                            absl::string_view why) override;

 private:
  enum class Phase : std::uint8_t {
    kRunning,    // an attempt is live, or a start is in flight
    kWaiting,    // the reopen timer runs (backoff or a refusing breaker)
    kResyncing,  // the app's `resync` runs; no attempt is live or starting
    kFinishing,  // the end is decided; waiting for live attempts to end
  };

  using AttemptRec = AttemptRecord;

  // What a locked section decided: observer calls (`user`, run through the
  // delivery queue's gate, first) and everything else (`internal`).
  struct Work {
    std::vector<std::function<void()>> user;
    Deferred internal;
  };

  friend class ::tether::internal::AttemptSink;

  // The message a move's old attempt holds, with its position and what it
  // acknowledges (`held_`).
  struct Held {
    Position pos;
    AckMatch ack;
    std::shared_ptr<void> message;  // a Response
  };

  StreamMachine(std::shared_ptr<ConnectionSource> source,
                std::unique_ptr<StreamParts> parts, Hooks hooks,
                const ReconnectingStreamOptions& options,
                std::shared_ptr<const StreamSettings> settings,
                std::uint64_t seed, DoneFn on_done);

  std::weak_ptr<ConnectionSource::DrainListener> WeakListener();

  template <class F>
  void Notify(Work& w, F&& f) {
    if (!settings_->observer) return;
    w.user.push_back([obs = settings_->observer,
                      f = std::forward<F>(f)]() mutable { f(*obs); });
  }

  // Runs what a locked section decided: observer calls first (so an
  // attempt's start is reported before anything it delivers), then the
  // rest, then delivery.
  void Flush(Work& w) ABSL_LOCKS_EXCLUDED(mu_);

  // Records a breaker outcome once the lock is released (the breaker calls
  // its observer and listeners inline).
  void RecordLater(BreakerGate::Ticket& ticket, Outcome outcome,
                   absl::Status cause, Work& w);

  // --- Starting attempts ---------------------------------------------------

  // Asks for a permit and a connection outside the lock; at most one start
  // is in flight.
  void BeginStartLocked(AttemptReason reason, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void StartAttempt(AttemptReason reason) ABSL_LOCKS_EXCLUDED(mu_);

  // The start found the stream ending: give back what it took.
  void AbandonStartLocked(const ConnectionPick& pick,
                          BreakerGate::Ticket& ticket, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void CommitStartLocked(AttemptReason reason, ConnectionPick pick,
                         BreakerGate::Ticket ticket,
                         std::shared_ptr<void> request, bool resumed,
                         std::uint64_t after, CursorReplay::Catchup catchup,
                         Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void OnStartFailedLocked(AttemptReason reason, const absl::Status& status,
                           bool refused, absl::Duration breaker_wait, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void OnAttemptHandle(const std::shared_ptr<AttemptRec>& rec,
                       std::shared_ptr<Attempt> handle);

  void CancelAttemptLocked(const std::shared_ptr<AttemptRec>& rec, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- Health, stalls and open deadlines -----------------------------------

  // A live attempt becomes healthy at its first message, or (without
  // `stall_timeout`) once it has been open `settle_time` on a connected
  // connection: a quiet stream is not a failing one. With `stall_timeout`,
  // silence is failure instead: the stall timer watches it. Every attempt
  // also has an open deadline: connected within `attempt_open_timeout`, and
  // never failing past the reopen budget's time bound while it connects.
  void ArmAttemptTimersLocked(const std::shared_ptr<AttemptRec>& rec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void CancelAttemptTimersLocked(AttemptRec& rec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Nothing arrived for `stall_timeout`: the attempt is lost (a peer that
  // hangs, a black hole). It stays as the fallback while a replacement
  // starts elsewhere, its connection is reported, and it counts as a failed
  // attempt.
  void OnStallTimerLocked(const std::shared_ptr<AttemptRec>& rec, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The current attempt (still live, leaving) failed: spend the budget, then
  // move make-before-break after the backoff delay.
  void FailedWhileLiveLocked(absl::Time failing_since, const absl::Status& why,
                             Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Whether `rec` still waits for a sign that it works (the settle and open
  // timers' question).
  bool UnprovenLocked(const AttemptRec& rec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Asks the source (no lock held) whether `rec`'s connection is connected,
  // then runs `then` under the lock with the answer, if `rec` still waits.
  using ConnectedFn = void (StreamMachine::*)(
      const std::shared_ptr<AttemptRec>&, bool connected, Work&);
  void AskConnectedLater(const std::shared_ptr<AttemptRec>& rec,
                         ConnectedFn then, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void OnConnectedAnswer(const std::shared_ptr<AttemptRec>& rec, bool connected,
                         ConnectedFn then) ABSL_LOCKS_EXCLUDED(mu_);

  // The open deadline passed: an attempt that is not connected yet is given
  // up (connect black holes, hung handshakes), and so is one still
  // connecting when the budget's time bound runs out.
  void OnOpenTimerLocked(const std::shared_ptr<AttemptRec>& rec, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void OnOpenCheckedLocked(const std::shared_ptr<AttemptRec>& rec,
                           bool connected, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A waiting stream hears that a usable connection is back: reopen now
  // (spread over `recovery_jitter`) instead of at the backoff timer.
  void OnConnectionAvailable() override;

  void OnSettleTimerLocked(const std::shared_ptr<AttemptRec>& rec, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void OnSettleCheckedLocked(const std::shared_ptr<AttemptRec>& rec,
                             bool connected, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The attempt works: the dependency answered (breaker success). A quiet
  // attempt that settled also ends the failing period; a first message does
  // only if it is new (a server that replays one old message and hangs is
  // still failing), see AcceptLocked.
  void MarkHealthyLocked(const std::shared_ptr<AttemptRec>& rec,
                         bool ends_failing, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- Migration -----------------------------------------------------------

  // Moves off a draining connection, make before break. `now`: the spread
  // (if any) has been waited out. Without `now`, a move off an attempt that
  // still delivers (its connection drains, or its server sent a notice)
  // waits for a point of [0, `migration_jitter`): `share` of the window when
  // the source gave one (`ConnectionSource::SpreadShare`), else drawn at
  // random; a stalled attempt serves nothing and moves at once.
  void MaybeMigrateLocked(bool now, Work& w,
                          absl::optional<double> share = absl::nullopt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Arms the migration timer for a move that is not spread (a retry, a
  // backoff, the notice pace).
  void ArmMigrationTimerLocked(absl::Duration delay)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void OnMigrationTimerLocked(Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Arms the migration timer for the spread's point, `point` from now. When
  // it fires more than `kLateSpreadPoint` after it was due (a timer thread
  // that fell behind fires its backlog at once, and those moves would reach
  // the servers as the spike the spread is for), a point that was not
  // `redrawn` yet is put off, once, by as long as it was late: the backlog
  // then starts at the pace its points were drawn, after the stretch it
  // missed.
  void ArmSpreadPointLocked(absl::Duration point, bool redrawn)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnSpreadPointLocked(absl::Time due, bool redrawn, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static constexpr absl::Duration kLateSpreadPoint = absl::Milliseconds(5);

  // Whether a move waits in the spread window (see `EndFacts::spread_wait`).
  bool SpreadingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The replacement did not deliver within `migration_handoff_timeout`:
  // it takes over anyway.
  void OnHandoffTimerLocked(Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The replacement took over: cancel the fallback.
  void RetireOldLocked(Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The replacement is gone (or going): the fallback is the current attempt
  // again and reads on, starting with what it held.
  void FallBackLocked(Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Whether a message of the attempt a move leaves (`rec`) is held instead
  // of delivered: it is new (past everything delivered), and the
  // replacement resumed from a position the stream had delivered (the
  // stream's position only grows) and has not delivered yet, so it will
  // send the message again. That is the fallback while its replacement
  // opens, or the current attempt while the replacement's start (which took
  // its resume position) is in flight. One message at most.
  bool ShouldHoldLocked(const AttemptRec& rec,
                        const absl::optional<Position>& pos)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The held message is not needed: the attempt that held it is cancelled
  // or ended, and the stream's position never passed it.
  void DropHoldLocked(AttemptRec& rec, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The held message (app type) is destroyed after the lock.
  static void DisposeLater(std::unique_ptr<Held> held, Work& w);

  // The stream fell back to `current_`: deliver what it held and let it
  // read on.
  void ReleaseHoldLocked(Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- Messages ------------------------------------------------------------

  bool OnMessage(const std::shared_ptr<AttemptRec>& rec, void* response);

  // The server's drain notice on `rec`: the stream moves off it as off a
  // draining connection, at the notice pace. The connection is not reported
  // (behind an L7 proxy it is healthy: the next call goes through it
  // again). The notice moves no position and reaches the app only if the
  // spec asks. Returns whether the attempt may read on.
  bool OnNoticeLocked(const std::shared_ptr<AttemptRec>& rec, void* response,
                      Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Moves off the current attempt, which heard a notice: at once while
  // the pace allows (`NoticePace`), else when it does. A replacement that
  // heard the notice too (its call landed on the leaving server again) is
  // dropped for the fallback first, as on a drain.
  void MoveOnNoticeLocked(Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Applies the position rules and queues the message. Returns whether the
  // attempt may read on. Sets `*trim_at` (and leaves `response` alone) when
  // a batch must be trimmed first.
  bool AcceptLocked(const std::shared_ptr<AttemptRec>& rec,
                    const absl::optional<Position>& pos,
                    const absl::optional<std::string>& cursor,
                    absl::optional<std::uint64_t> trimmed_at, void* response,
                    const AckMatch& ack, absl::optional<std::uint64_t>* trim_at,
                    Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A bidi response that passed the position rules is about to be queued:
  // the outbox takes out the write it acknowledges. False when it repeats an
  // acknowledgement the app already had: it is dropped as a duplicate.
  bool AdmitAckLocked(const AckMatch& ack, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Queues a message for the app; false (and the attempt pauses) when the
  // queue is full.
  bool PushLocked(const std::shared_ptr<AttemptRec>& rec, void* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Records a delivered cursor, keeping what the attempts catching up (and
  // a start in flight) may replay.
  void RecordCursorLocked(const std::string& cursor)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void OnQueueSpace() override;

  void OnCallbackError(absl::Status status) override;

  // --- Attempt ends --------------------------------------------------------

  void OnAttemptDone(const std::shared_ptr<AttemptRec>& rec,
                     const absl::Status& status, const Metadata& trailers);

  // Carries out what `DecideEnd` decided about `rec`'s end: it ended with
  // `status`, and the server's `pushback` from its trailers; a reopen after
  // progress waits for `reopen_share` of its window when the source gave
  // one (`ConnectionSource::ReopenShare`), else for a random point.
  void ApplyEndLocked(const std::shared_ptr<AttemptRec>& rec,
                      const EndDecision& d, const absl::Status& status,
                      const RetryPushback& pushback,
                      absl::optional<double> reopen_share, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // When an attempt began to fail: at its start unless it proved healthy
  // (then at its last sign of life).
  absl::Time FailingSince(const AttemptRec& rec);

  // Tells the source what an unannounced end (or a stall) says about the
  // attempt's connection.
  void ReportEndLater(const AttemptRec& rec, const absl::Status& status,
                      Work& w);

  // Waits `delay` before the next attempt (`last`: why). `start_if_due`
  // (a reopen after progress): a delay of 0 starts the attempt in this
  // flush instead of from a timer, after the reports `w` already holds.
  // Failures always go through the timer, so that a policy that keeps
  // answering 0 cannot nest starts on the stack.
  void ArmReopenTimerLocked(absl::Duration delay, const absl::Status& last,
                            Work& w, bool start_if_due = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A start that a hint moved before its backoff's `due` failed before it
  // was proven (its pick, or the attempt before a message or settling): the
  // hint was wrong, not the dependency worse. While `due` is ahead, the
  // stream waits for it again and the failure counts against nothing
  // (neither `max_attempts_without_progress` nor the backoff's growth);
  // false when `due` has passed (an ordinary failure then). The source
  // paces its hints, and `max_time_without_progress` still bounds the
  // failing period: `due` never lies past it.
  bool BackToScheduleLocked(absl::Time due, const absl::Status& why, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void OnReopenTimerLocked(Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- Resync --------------------------------------------------------------

  // The server says the stream cannot resume from its position: cancel every
  // attempt (by us: no failure), call the app's `resync` on a thread of the
  // stream's resync pool (blocking allowed; other streams' resyncs run on
  // other threads), then resume after the position it gives. A
  // resync right after another one with nothing delivered in between is a
  // failed attempt for the reopen budget (no endless resync loop).
  // `asking`: the attempt whose message or end asks for the resync.
  void BeginResyncLocked(const AttemptRec& asking, const absl::Status& why,
                         Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Hands the app's `resync` to a worker of the resync pool, which it holds
  // until it answers.
  void PostResyncLocked(Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void OnResyncTimedOutLocked(Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // On a worker of the resync pool, no lock held. `release` frees the
  // worker: once `done` was called or dropped (at once when the resync is
  // stale).
  void CallResync(std::uint64_t epoch, std::function<void()> release);

  void OnResyncDone(std::uint64_t epoch, absl::StatusOr<std::uint64_t> r);

  // --- Ending --------------------------------------------------------------

  void GiveUpLocked(const absl::Status& gave_up, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void CancelLocked(Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void EndLocked(const absl::Status& status, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The end, and how it came (the observer's `OnStreamEnded`).
  void EndLocked(const absl::Status& status, StreamEnd how, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The end reaches the app once no attempt is live and no start is in
  // flight (their picks and permits are given back first).
  void MaybeFinalizeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Arms one of the stream's timers: `on_fire` runs under the lock, for
  // the arming in place only (`TimerSlot`), then the work it decided runs.
  using TimerFn = void (StreamMachine::*)(Work&);
  void ArmLocked(TimerSlot& slot, absl::Duration delay, TimerFn on_fire)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The same with the arguments a firing carries: `fire(*this, w)`, where
  // `fire` calls a member through a pointer (the thread-safety analysis
  // does not see the lock held inside a lambda).
  template <class Fire>
  void ArmSlotLocked(TimerSlot& slot, absl::Duration delay, Fire fire)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::weak_ptr<StreamMachine> weak = this->shared_from_this();
    TimerSlot* const at = &slot;  // a member: lives as long as the stream
    slot.Arm(*settings_->clock, delay, [weak, at, fire](TimerSlot::Shot shot) {
      if (auto self = weak.lock()) {
        self->OnTimer([&](Work& w) {
          if (at->Claim(shot)) fire(*self, w);
        });
      }
    });
  }

  // The same for one of an attempt's timers (`rec->*slot`).
  using AttemptTimerFn =
      void (StreamMachine::*)(const std::shared_ptr<AttemptRec>&, Work&);
  void ArmLocked(const std::shared_ptr<AttemptRec>& rec,
                 TimerSlot AttemptRec::*slot, absl::Duration delay,
                 AttemptTimerFn on_fire) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A timer fired: `locked` runs under the lock, then what it decided.
  template <class F>
  void OnTimer(F&& locked) ABSL_LOCKS_EXCLUDED(mu_) {
    Work w;
    {
      MutexLock lock(&mu_);
      locked(w);
    }
    Flush(w);
  }

  // Immutable after construction.
  const std::shared_ptr<ConnectionSource> source_;
  // The typed parts: the request, the attempt factory, the messages read
  // ahead. Lives as long as the core (attempts hold the core).
  const std::unique_ptr<StreamParts> parts_;
  const Hooks hooks_;
  const Hooks::Rare& rare() const { return hooks_.rare_or_none(); }
  // The options it reads, shared with the streams made from equal ones.
  const std::shared_ptr<const StreamSettings> settings_;
  DeliveryQueue queue_;

  Mutex mu_;
  PositionGate gate_ ABSL_GUARDED_BY(mu_);
  // Opaque cursors: the last delivered one and the ones a catching-up
  // attempt may replay. Allocated only with `cursor_of` (bytes per open
  // stream). The pointee is guarded by `mu_` (clang 14 takes PT_GUARDED_BY
  // on raw pointers only).
  const std::unique_ptr<CursorReplay> cursors_;
  // Resync. Its epoch tells a start or a `done` that a resync came since.
  std::uint64_t resync_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  // Made at the stream's first resync (bytes per open stream: most never
  // resync); lives as long as the stream (its timers point into it). The
  // pointee is guarded by `mu_`.
  struct Resyncs {
    // Since the last new item; each after the first counts against the
    // reopen budget, and at max_attempts_without_progress the stream ends.
    int without_progress = 0;
    absl::Status why;  // of the resync running
    TimerSlot timer;   // the resync's wait (backoff, spread)
    // Ends a resync whose `done` never comes (max_time_without_progress).
    TimerSlot deadline;
  };
  std::unique_ptr<Resyncs> resyncs_ ABSL_GUARDED_BY(mu_);
  // A new item: resyncs count from zero again.
  void ResetResyncCountLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (resyncs_) resyncs_->without_progress = 0;
  }
  ReopenBudget budget_ ABSL_GUARDED_BY(mu_);
  BudgetedRetry retry_ ABSL_GUARDED_BY(mu_);
  // Paces the moves on drain notices; made at the first (bytes per open
  // stream: most never hear one).
  std::unique_ptr<NoticePace> notice_pace_ ABSL_GUARDED_BY(mu_);
  StreamRandom gen_ ABSL_GUARDED_BY(mu_);  // 8 bytes (mt19937_64: 2.5 KB)
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kRunning;
  int live_attempts_ ABSL_GUARDED_BY(mu_) = 0;  // incl. retiring ones
  bool starting_ ABSL_GUARDED_BY(mu_) = false;
  // The start in flight is a move that resumes (see ShouldHoldLocked).
  bool start_is_move_ ABSL_GUARDED_BY(mu_) = false;
  // The migration timer waits out the spread (`migration_jitter`), not a
  // retry, a backoff or the notice pace.
  bool spreading_ ABSL_GUARDED_BY(mu_) = false;
  bool finalized_ ABSL_GUARDED_BY(mu_) = false;  // the end reached the app
  std::unique_ptr<Held> held_ ABSL_GUARDED_BY(mu_);
  // The connections that announced a drain while a start was in flight;
  // made at the first such drain.
  std::unique_ptr<std::vector<std::uint64_t>> drained_during_start_
      ABSL_GUARDED_BY(mu_);
  std::shared_ptr<AttemptRec> current_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<AttemptRec> old_ ABSL_GUARDED_BY(mu_);  // the fallback
  TimerSlot reopen_timer_ ABSL_GUARDED_BY(mu_);
  absl::Time reopen_due_ ABSL_GUARDED_BY(mu_);
  // The backoff's own reopen time when a hint moved the reopen earlier
  // (InfinitePast: none); taken by the start the hint makes.
  absl::Time hinted_due_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  TimerSlot handoff_timer_ ABSL_GUARDED_BY(mu_);
  TimerSlot migration_timer_ ABSL_GUARDED_BY(mu_);
  absl::Duration migration_retry_delay_ ABSL_GUARDED_BY(mu_);
  absl::Status final_ ABSL_GUARDED_BY(mu_);
  StreamStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_STREAMS_STREAM_MACHINE_H_
