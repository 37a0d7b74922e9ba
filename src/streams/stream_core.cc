// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The attempts/migration machine of every stream, compiled once: it works on
// the stream's messages through `StreamParts` and `StreamHooks` (void
// pointers to the typed side), so user code instantiates none of it.
#include "tether/internal/stream_core.h"

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
#include "streams/end_decision.h"
#include "streams/notice_pace.h"
#include "tether/backoff.h"
#include "tether/classification.h"
#include "tether/clock.h"
#include "tether/internal/breaker_gate.h"
#include "tether/internal/deferred.h"
#include "tether/internal/delivery_queue.h"
#include "tether/internal/mutex.h"
#include "tether/internal/position_gate.h"
#include "tether/internal/reopen_budget.h"
#include "tether/internal/stream_random.h"
#include "tether/observer.h"
#include "tether/position.h"
#include "tether/resync_pool.h"
#include "tether/stream_options.h"
#include "tether/transport.h"

namespace tether {
namespace internal {

StreamHooks::Rare::Rare() = default;
StreamHooks::Rare::~Rare() = default;
StreamHooks::StreamHooks() = default;
StreamHooks::~StreamHooks() = default;
StreamHooks::StreamHooks(StreamHooks&&) noexcept = default;
StreamHooks& StreamHooks::operator=(StreamHooks&&) noexcept = default;

const StreamHooks::Rare& StreamHooks::rare_or_none() const {
  static const Rare* const kNone = new Rare();
  return rare != nullptr ? *rare : *kNone;
}

// The core's record of one attempt (declared in stream_core.h, opaque
// there). Guarded by its core's lock.
struct AttemptRecord {
  AttemptInfo info;
  std::shared_ptr<Attempt> handle;
  absl::Time started;
  absl::optional<BreakerGate::Ticket> ticket;
  PositionGate::Cursor cursor;
  // Opaque cursors: while catching up after a resume, messages whose
  // cursor the stream delivered after index `cursor_from` are replays.
  bool catching_up = false;
  std::uint64_t cursor_from = 0;
  Clock::TimerId settle_timer = 0;
  Clock::TimerId stall_timer = 0;
  Clock::TimerId open_timer = 0;
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
  RetryPushback pushback;   // the server's, from the end's trailers
  absl::Status end_status;  // the status it ended with
  // Whether the stream is moving off this attempt (make before break).
  bool leaving() const { return draining || stalled || noticed; }
};

namespace {

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
class StreamCoreImpl final
    : public StreamCore,
      public ConnectionSource::DrainListener,
      private DeliveryQueueOwner,
      public std::enable_shared_from_this<StreamCoreImpl> {
  struct PassKey {
    explicit PassKey() = default;
  };

 public:
  using Hooks = StreamHooks;

  static absl::StatusOr<std::shared_ptr<StreamCore>> Create(
      std::shared_ptr<ConnectionSource> source,
      std::unique_ptr<StreamParts> parts, Hooks hooks,
      ReconnectingStreamOptions options, DoneFn on_done) {
    absl::StatusOr<StreamSetup> setup = PrepareStream(options);
    if (!setup.ok()) return setup.status();
    // One allocation for the core and its control block.
    return std::shared_ptr<StreamCore>(std::make_shared<StreamCoreImpl>(
        PassKey(), std::move(source), std::move(parts), std::move(hooks),
        std::move(options), *std::move(setup), std::move(on_done)));
  }

  // For `Create` only (std::make_shared needs a public constructor).
  template <class... Args>
  StreamCoreImpl(PassKey /*key*/, Args&&... args)
      : StreamCoreImpl(std::forward<Args>(args)...) {}

  void StartFirst() override {
    auto self = this->shared_from_this();
    Work w;
    {
      MutexLock lock(&mu_);
      BeginStartLocked(AttemptReason::kFirst, w);
    }
    Flush(w);
  }

  bool Read(void* out) override { return queue_.Read(out); }

  absl::Status Finish() override { return queue_.Finish(); }

  void Cancel() override {
    auto self = this->shared_from_this();
    Work w;
    {
      MutexLock lock(&mu_);
      CancelLocked(w);
    }
    Flush(w);
  }

  // Cancels, stops every later callback, and waits for the ones running on
  // other threads.
  void Detach() override {
    auto self = this->shared_from_this();
    queue_.Detach();  // first: the cancel below must not reach the app
    Cancel();
  }

  // Runs `call` through the delivery queue's gate (never after `Detach`).
  void Callout(const std::function<void()>& call) override {
    queue_.Callout(call);
  }

  StreamStats stats() override {
    StreamStats s;
    {
      MutexLock lock(&mu_);
      s = stats_;
    }
    s.messages_delivered = queue_.delivered();
    return s;
  }

  void OnConnectionDraining(std::uint64_t connection_id,
                            absl::string_view why) override {
    Work w;
    {
      MutexLock lock(&mu_);
      // After the end, nothing reaches the app (not even this notice).
      if (phase_ == Phase::kFinishing) return;
      bool ours = false;
      for (AttemptRec* rec : {current_.get(), old_.get()}) {
        if (rec && rec->live && rec->info.connection_id == connection_id) {
          rec->draining = true;
          ours = true;
        }
      }
      if (starting_) {
        drained_during_start_.push_back(connection_id);
        ours = true;
      }
      if (!ours) return;
      std::string reason(why);
      Notify(w, [connection_id, reason](StreamObserver& o) {
        o.OnConnectionDraining(connection_id, reason);
      });
      MaybeMigrateLocked(/*now=*/false, w);
    }
    Flush(w);
  }

 private:
  enum class Phase {
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

  // The message a move's old attempt holds, with its position (`held_`).
  struct Held {
    Position pos;
    std::shared_ptr<void> message;  // a Response
  };

  StreamCoreImpl(std::shared_ptr<ConnectionSource> source,
                 std::unique_ptr<StreamParts> parts, Hooks hooks,
                 ReconnectingStreamOptions options, StreamSetup setup,
                 DoneFn on_done)
      : source_(std::move(source)),
        parts_(std::move(parts)),
        hooks_(std::move(hooks)),
        rare_(hooks_.rare_or_none()),
        observer_(std::move(options.observer)),
        clock_(std::move(options.clock)),
        classifier_(std::move(options.classifier)),
        migrate_on_drain_(options.migrate_on_drain),
        fail_fast_on_open_breaker_(options.fail_fast_on_open_breaker),
        hold_fallback_(options.migration_hold_fallback),
        handoff_timeout_(options.migration_handoff_timeout),
        migration_jitter_(options.migration_jitter),
        settle_time_(options.attempt_settle_time),
        stall_timeout_(options.stall_timeout),
        open_timeout_(options.attempt_open_timeout),
        max_time_(options.max_time_without_progress),
        recovery_jitter_(options.recovery_jitter),
        resync_pool_(std::move(options.resync_pool)),
        breaker_(std::move(options.breaker), clock_),
        queue_(options.max_buffered_messages, parts_->store(),
               std::move(on_done), this, observer_.get()),
        gate_(hooks_.initial_position, hooks_.spacing, options.gap_policy,
              static_cast<bool>(rare_.trim_delivered)),
        cursors_(rare_.cursor_of ? std::make_unique<CursorLog>() : nullptr),
        budget_(std::move(setup.backoff),
                ReopenBudget::Limits{options.max_attempts_without_progress,
                                     options.max_time_without_progress,
                                     options.reopen_after_progress_jitter}),
        gen_(setup.seed) {
    if (hooks_.initial_position) {
      stats_.has_last_seq = true;
      stats_.last_delivered_seq = *hooks_.initial_position;
    }
    if (cursors_) cursors_->last = rare_.initial_cursor;
  }

  std::weak_ptr<ConnectionSource::DrainListener> WeakListener() {
    return std::weak_ptr<ConnectionSource::DrainListener>(
        std::static_pointer_cast<ConnectionSource::DrainListener>(
            this->shared_from_this()));
  }

  template <class F>
  void Notify(Work& w, F&& f) {
    if (!observer_) return;
    w.user.push_back(
        [obs = observer_, f = std::forward<F>(f)]() mutable { f(*obs); });
  }

  // Runs what a locked section decided: observer calls first (so an
  // attempt's start is reported before anything it delivers), then the
  // rest, then delivery.
  void Flush(Work& w) ABSL_LOCKS_EXCLUDED(mu_) {
    // One gate check per call: an observer call may destroy the stream,
    // and nothing runs after that.
    for (const std::function<void()>& call : w.user) queue_.Callout(call);
    w.user.clear();
    w.internal.Run();
    queue_.Drain();
  }

  // Records a breaker outcome once the lock is released (the breaker calls
  // its observer and listeners inline).
  void RecordLater(absl::optional<BreakerGate::Ticket>& ticket, Outcome outcome,
                   absl::Status cause, Work& w) {
    if (!ticket) return;
    auto held = std::make_shared<BreakerGate::Ticket>(*std::move(ticket));
    ticket.reset();
    auto self = this->shared_from_this();
    w.internal.Add([self, held, outcome, cause = std::move(cause)] {
      self->breaker_.Record(std::move(*held), outcome, cause);
    });
  }

  // --- Starting attempts ---------------------------------------------------

  // Asks for a permit and a connection outside the lock; at most one start
  // is in flight.
  void BeginStartLocked(AttemptReason reason, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (starting_ || phase_ == Phase::kFinishing ||
        phase_ == Phase::kResyncing) {
      return;
    }
    starting_ = true;
    phase_ = Phase::kRunning;
    drained_during_start_.clear();
    auto self = this->shared_from_this();
    w.internal.Add([self, reason] { self->StartAttempt(reason); });
  }

  void StartAttempt(AttemptReason reason) ABSL_LOCKS_EXCLUDED(mu_) {
    Work w;
    absl::optional<BreakerGate::Ticket> ticket;
    if (breaker_.enabled()) {
      absl::StatusOr<BreakerGate::Ticket> permit = breaker_.Acquire();
      if (!permit.ok()) {
        const absl::Duration wait = breaker_.RetryDelay();
        {
          MutexLock lock(&mu_);
          OnStartFailedLocked(reason, permit.status(), /*refused=*/true, wait,
                              w);
        }
        Flush(w);
        return;
      }
      ticket = *std::move(permit);
    }
    absl::StatusOr<ConnectionPick> pick = source_->Pick(WeakListener());
    if (!pick.ok()) {
      if (ticket) {
        breaker_.Record(std::move(*ticket),
                        BreakerGate::ClassifyFailedPick(pick.status()),
                        pick.status());
      }
      {
        MutexLock lock(&mu_);
        OnStartFailedLocked(reason, pick.status(), /*refused=*/false,
                            absl::ZeroDuration(), w);
      }
      Flush(w);
      return;
    }
    // Whether this attempt's request gets the resume state (when there is
    // one, or always); decided by the hooks and the reason only.
    const bool resumes = hooks_.resume_always ||
                         (reason != AttemptReason::kFirst && hooks_.resume);
    ResumeState state;
    std::uint64_t epoch = 0;
    std::uint64_t cursor_from = 0;
    bool abandoned = false;
    {
      MutexLock lock(&mu_);
      if (phase_ == Phase::kFinishing || phase_ == Phase::kResyncing) {
        AbandonStartLocked(*pick, ticket, w);
        abandoned = true;
      } else {
        if (hooks_.position_of && gate_.has_last()) {
          state.has_position = true;
          state.last = gate_.last();
          // A move resumes from here: the attempt it replaces holds what
          // arrives past it from now on (see ShouldHoldLocked).
          if (resumes && current_ && current_->live &&
              !current_->cancel_requested) {
            start_is_move_ = true;
          }
        }
        if (cursors_ && cursors_->last) {
          state.has_cursor = true;
          state.cursor = *cursors_->last;
        }
        epoch = resync_epoch_;
        if (cursors_) {
          cursor_from = cursors_->count;
          cursors_->pending_from = cursor_from;
        }
      }
    }
    if (abandoned) {  // flushed outside the lock: it may call the app
      Flush(w);
      return;
    }
    const bool has_state = state.has_position || state.has_cursor;
    const bool resume = hooks_.resume_always || (resumes && has_state);
    // The request is built outside the lock: `resume` is app code. Without
    // a resume, every attempt sends the stream's own request.
    std::shared_ptr<void> request;
    absl::Status threw;
    if (resume) {
      request = std::shared_ptr<void>(parts_->NewRequestCopy(),
                                      parts_->request_deleter());
      try {
        parts_->Resume(request.get(), state);
      } catch (...) {
        threw = CallbackThrew(hooks_.resume_name, std::current_exception());
      }
    }
    {
      MutexLock lock(&mu_);
      if (phase_ == Phase::kFinishing || !threw.ok() ||
          epoch != resync_epoch_) {
        if (!threw.ok()) EndLocked(threw, w);
        AbandonStartLocked(*pick, ticket, w);
        // A resync that ended while this start ran found it in flight and
        // left the next start to it.
        if (epoch != resync_epoch_ && phase_ == Phase::kRunning && !current_) {
          BeginStartLocked(AttemptReason::kResync, w);
        }
      } else {
        CommitStartLocked(reason, *std::move(pick), std::move(ticket),
                          std::move(request), resume && has_state, state.last,
                          cursor_from, w);
      }
    }
    Flush(w);
  }

  // The start found the stream ending: give back what it took.
  void AbandonStartLocked(const ConnectionPick& pick,
                          absl::optional<BreakerGate::Ticket>& ticket, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    starting_ = false;
    start_is_move_ = false;
    ReleaseHoldLocked(w);
    RecordLater(ticket, BreakerGate::kIgnored, absl::OkStatus(), w);
    auto self = this->shared_from_this();
    const std::uint64_t id = pick.connection_id;
    w.internal.Add(
        [self, id] { self->source_->Release(id, self->WeakListener()); });
    MaybeFinalizeLocked();
  }

  void CommitStartLocked(AttemptReason reason, ConnectionPick pick,
                         absl::optional<BreakerGate::Ticket> ticket,
                         std::shared_ptr<void> request, bool resumed,
                         std::uint64_t after, std::uint64_t cursor_from,
                         Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    starting_ = false;
    start_is_move_ = false;
    migration_retry_delay_ = absl::ZeroDuration();
    auto rec = std::make_shared<AttemptRec>();
    rec->ticket = std::move(ticket);
    rec->started = clock_->Now();
    rec->info.attempt = ++stats_.attempts;
    rec->info.connection_id = pick.connection_id;
    rec->info.resumed = resumed;
    rec->info.resume_after_seq = resumed ? after : 0;
    if (rare_.cursor_of) {
      rec->catching_up = true;
      rec->cursor_from = cursor_from;
    }
    for (std::uint64_t id : drained_during_start_) {
      if (id == pick.connection_id) rec->draining = true;
    }
    drained_during_start_.clear();
    const bool replaces_live =
        current_ && current_->live && !current_->cancel_requested;
    if (replaces_live) {
      // Make before break: the current attempt stays as the fallback.
      old_ = current_;
      rec->info.reason = old_->noticed ? AttemptReason::kDrainNotice
                                       : AttemptReason::kMigration;
      ++stats_.migrations;
      ArmHandoffTimerLocked(rec);
    } else {
      // A first attempt that comes after failed starts is a reopen; the
      // start after a resync keeps its reason.
      if (reason == AttemptReason::kResync) {
        rec->info.reason = AttemptReason::kResync;
      } else if (reason == AttemptReason::kFirst && stats_.attempts == 1) {
        rec->info.reason = AttemptReason::kFirst;
      } else {
        rec->info.reason = AttemptReason::kReopen;
      }
    }
    current_ = rec;
    ++live_attempts_;
    phase_ = Phase::kRunning;
    rec->last_activity = rec->started;
    ArmAttemptTimersLocked(rec);
    AttemptInfo info = rec->info;
    Notify(w, [info](StreamObserver& o) { o.OnAttemptStarted(info); });
    auto self = this->shared_from_this();
    w.internal.Add([self, rec, info, pick = std::move(pick),
                    request = std::move(request)]() {
      std::shared_ptr<Attempt> handle = self->parts_->StartAttempt(
          pick, info, request ? request.get() : self->parts_->request(),
          AttemptSink(self, rec));
      self->OnAttemptHandle(rec, std::move(handle));
    });
    // The replacement landed on a connection that drained meanwhile.
    if (rec->draining) MaybeMigrateLocked(/*now=*/false, w);
  }

  void OnStartFailedLocked(AttemptReason reason, const absl::Status& status,
                           bool refused, absl::Duration breaker_wait, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    starting_ = false;
    start_is_move_ = false;
    ReleaseHoldLocked(w);
    if (phase_ == Phase::kFinishing) {
      MaybeFinalizeLocked();
      return;
    }
    if (phase_ == Phase::kResyncing) return;  // the resync starts the next
    if (current_ && current_->live && !current_->cancel_requested) {
      if (current_->stalled) {
        // The stream is failing (its attempt went silent): a move that
        // cannot start is one more failed attempt, within the budget.
        FailedWhileLiveLocked(
            budget_.failing() ? budget_.failing_since() : clock_->Now(), status,
            w);
        return;
      }
      // A migration could not start: stay on the draining attempt and try
      // again later (it keeps delivering meanwhile).
      migration_retry_delay_ = std::min(
          absl::Seconds(5),
          std::max(absl::Milliseconds(100), 2 * migration_retry_delay_));
      ArmMigrationTimerLocked(
          refused ? std::max(breaker_wait, migration_retry_delay_)
                  : migration_retry_delay_);
      return;
    }
    if (refused) {
      if (reason == AttemptReason::kFirst && fail_fast_on_open_breaker_) {
        EndLocked(status, w);
        return;
      }
      absl::StatusOr<absl::Duration> wait =
          budget_.OnRefused(clock_->Now(), breaker_wait, status);
      if (!wait.ok()) {
        GiveUpLocked(wait.status(), w);
        return;
      }
      ArmReopenTimerLocked(*wait, status, w);
      return;
    }
    const absl::Time now = clock_->Now();
    absl::StatusOr<absl::Duration> delay =
        budget_.OnFailure(now, now, status, absl::BitGenRef(gen_));
    if (!delay.ok()) {
      GiveUpLocked(delay.status(), w);
      return;
    }
    ArmReopenTimerLocked(*delay, status, w);
  }

  void OnAttemptHandle(const std::shared_ptr<AttemptRec>& rec,
                       std::shared_ptr<Attempt> handle) {
    bool cancel = false;
    bool resume = false;
    {
      MutexLock lock(&mu_);
      if (!rec->live || !handle) return;
      rec->handle = handle;
      if (rec->cancel_requested) {
        cancel = true;
      } else if (rec->paused && queue_.HasRoom()) {
        rec->paused = false;
        resume = true;
      }
    }
    if (cancel) handle->Cancel();
    if (resume) handle->Resume();
  }

  void CancelAttemptLocked(const std::shared_ptr<AttemptRec>& rec, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!rec || !rec->live || rec->cancel_requested) return;
    rec->cancel_requested = true;
    DropHoldLocked(*rec, w);
    CancelAttemptTimersLocked(*rec);
    if (rec->handle) {
      w.internal.Add([h = rec->handle] { h->Cancel(); });
    }  // else OnAttemptHandle cancels it
  }

  // --- Health, stalls and open deadlines -----------------------------------

  // A live attempt becomes healthy at its first message, or (without
  // `stall_timeout`) once it has been open `settle_time_` on a connected
  // connection: a quiet stream is not a failing one. With `stall_timeout`,
  // silence is failure instead: the stall timer watches it. Every attempt
  // also has an open deadline: connected within `attempt_open_timeout`, and
  // never failing past the reopen budget's time bound while it connects.
  void ArmAttemptTimersLocked(const std::shared_ptr<AttemptRec>& rec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (stall_timeout_ > absl::ZeroDuration()) {
      ArmStallTimerLocked(rec, stall_timeout_);
    } else {
      ArmSettleTimerLocked(rec);
    }
    absl::Time deadline = rec->started + open_timeout_;
    if (max_time_ != absl::InfiniteDuration()) {
      const absl::Time since =
          budget_.failing() ? std::min(budget_.failing_since(), rec->started)
                            : rec->started;
      deadline = std::min(deadline, since + max_time_);
    }
    std::weak_ptr<StreamCoreImpl> weak = this->shared_from_this();
    std::weak_ptr<AttemptRec> weak_rec = rec;
    rec->open_timer = clock_->RunAfter(
        std::max(deadline - clock_->Now(), absl::ZeroDuration()),
        [weak, weak_rec] {
          auto self = weak.lock();
          auto r = weak_rec.lock();
          if (self && r) self->OnOpenTimer(r);
        });
  }

  void CancelAttemptTimersLocked(AttemptRec& rec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    CancelTimerLocked(rec.settle_timer);
    CancelTimerLocked(rec.stall_timer);
    CancelTimerLocked(rec.open_timer);
  }

  void ArmStallTimerLocked(const std::shared_ptr<AttemptRec>& rec,
                           absl::Duration delay)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::weak_ptr<StreamCoreImpl> weak = this->shared_from_this();
    std::weak_ptr<AttemptRec> weak_rec = rec;
    rec->stall_timer = clock_->RunAfter(delay, [weak, weak_rec] {
      auto self = weak.lock();
      auto r = weak_rec.lock();
      if (self && r) self->OnStallTimer(r);
    });
  }

  // Nothing arrived for `stall_timeout`: the attempt is lost (a peer that
  // hangs, a black hole). It stays as the fallback while a replacement
  // starts elsewhere, its connection is reported, and it counts as a failed
  // attempt.
  void OnStallTimer(const std::shared_ptr<AttemptRec>& rec) {
    Work w;
    {
      MutexLock lock(&mu_);
      rec->stall_timer = 0;
      if (!rec->live || rec->cancel_requested || rec->stalled ||
          phase_ == Phase::kFinishing) {
        return;
      }
      const absl::Time now = clock_->Now();
      const absl::Duration silent = now - rec->last_activity;
      if (rec->held) {  // silent because the stream stopped it
        ArmStallTimerLocked(rec, stall_timeout_);
        return;
      }
      if (silent < stall_timeout_) {  // a message came meanwhile
        ArmStallTimerLocked(rec, stall_timeout_ - silent);
        return;
      }
      rec->stalled = true;
      ++stats_.stalls;
      const absl::Status stall = absl::DeadlineExceededError(absl::StrCat(
          "tether: attempt ", rec->info.attempt, " received nothing for ",
          absl::FormatDuration(silent), " (stall_timeout)"));
      AttemptInfo info = rec->info;
      Notify(w,
             [info, silent](StreamObserver& o) { o.OnStalled(info, silent); });
      ReportEndLater(*rec, stall, w);
      RecordLater(rec->ticket, BreakerGate::kFailure, stall, w);
      if (rec == old_) {  // the fallback went silent: the replacement runs
        RetireOldLocked(w);
      } else if (rec == current_) {
        if (old_) {
          // A replacement that stalled before delivering: back to the
          // fallback, which moves again below.
          CancelAttemptLocked(current_, w);
          FallBackLocked(w);
        }
        FailedWhileLiveLocked(rec->last_activity, stall, w);
      }
    }
    Flush(w);
  }

  // The current attempt (still live, leaving) failed: spend the budget, then
  // move make-before-break after the backoff delay.
  void FailedWhileLiveLocked(absl::Time failing_since, const absl::Status& why,
                             Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::StatusOr<absl::Duration> delay = budget_.OnFailure(
        clock_->Now(), failing_since, why, absl::BitGenRef(gen_));
    if (!delay.ok()) {
      GiveUpLocked(delay.status(), w);
      return;
    }
    if (*delay <= absl::ZeroDuration()) {
      MaybeMigrateLocked(/*now=*/true, w);
    } else {
      ArmMigrationTimerLocked(*delay);
    }
  }

  // The open deadline passed: an attempt that is not connected yet is given
  // up (connect black holes, hung handshakes), and so is one still
  // connecting when the budget's time bound runs out.
  void OnOpenTimer(const std::shared_ptr<AttemptRec>& rec) {
    std::uint64_t id = 0;
    {
      MutexLock lock(&mu_);
      rec->open_timer = 0;
      if (!rec->live || rec->cancel_requested || rec->healthy ||
          rec->got_message || phase_ == Phase::kFinishing) {
        return;
      }
      id = rec->info.connection_id;
    }
    const bool connected = source_->IsConnected(id);
    Work w;
    {
      MutexLock lock(&mu_);
      if (connected || !rec->live || rec->cancel_requested || rec->healthy ||
          rec->got_message || phase_ == Phase::kFinishing) {
        return;
      }
      const absl::Status why = absl::UnavailableError(absl::StrCat(
          "tether: attempt ", rec->info.attempt, " was not connected after ",
          absl::FormatDuration(clock_->Now() - rec->started)));
      ReportEndLater(*rec, why, w);
      RecordLater(rec->ticket, BreakerGate::kFailure, why, w);
      CancelAttemptLocked(rec, w);  // it retires; its OnDone is ignored
      if (rec == old_) {
        old_.reset();
      } else if (rec == current_) {
        if (old_) {  // a replacement that never connected: keep the fallback
          FallBackLocked(w);
          FailedWhileLiveLocked(rec->started, why, w);
        } else {
          current_.reset();
          absl::StatusOr<absl::Duration> delay = budget_.OnFailure(
              clock_->Now(), rec->started, why, absl::BitGenRef(gen_));
          if (!delay.ok()) {
            GiveUpLocked(delay.status(), w);
          } else if (!starting_) {
            ArmReopenTimerLocked(*delay, why, w);
          }
        }
      }
    }
    Flush(w);
  }

  // A waiting stream hears that a usable connection is back: reopen now
  // (spread over `recovery_jitter`) instead of at the backoff timer.
  void OnConnectionAvailable() override {
    Work w;
    {
      MutexLock lock(&mu_);
      if (phase_ != Phase::kWaiting) return;
      absl::Duration spread = absl::ZeroDuration();
      if (recovery_jitter_ > absl::ZeroDuration()) {
        spread = gen_.Below(recovery_jitter_);
      }
      if (reopen_due_ - clock_->Now() <= spread) return;
      CancelTimerLocked(reopen_timer_);
      std::weak_ptr<StreamCoreImpl> weak = this->shared_from_this();
      const Clock::TimerId token = ++timer_tokens_;
      reopen_timer_token_ = token;
      reopen_due_ = clock_->Now() + spread;
      reopen_timer_ = clock_->RunAfter(spread, [weak, token] {
        if (auto self = weak.lock()) self->OnReopenTimer(token);
      });
    }
    Flush(w);
  }

  void ArmSettleTimerLocked(const std::shared_ptr<AttemptRec>& rec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::weak_ptr<StreamCoreImpl> weak = this->shared_from_this();
    std::weak_ptr<AttemptRec> weak_rec = rec;
    rec->settle_timer = clock_->RunAfter(settle_time_, [weak, weak_rec] {
      auto self = weak.lock();
      auto r = weak_rec.lock();
      if (self && r) self->OnSettleTimer(r);
    });
  }

  void OnSettleTimer(const std::shared_ptr<AttemptRec>& rec) {
    Work w;
    std::uint64_t id = 0;
    {
      MutexLock lock(&mu_);
      rec->settle_timer = 0;
      if (!rec->live || rec->cancel_requested || rec->healthy ||
          phase_ == Phase::kFinishing) {
        return;
      }
      id = rec->info.connection_id;
    }
    const bool connected = source_->IsConnected(id);
    {
      MutexLock lock(&mu_);
      if (!rec->live || rec->cancel_requested || rec->healthy ||
          phase_ == Phase::kFinishing) {
        return;
      }
      if (connected) {
        MarkHealthyLocked(rec, /*ends_failing=*/true, w);
      } else {
        ArmSettleTimerLocked(rec);  // look again later
      }
    }
    Flush(w);
  }

  // The attempt works: the dependency answered (breaker success). A quiet
  // attempt that settled also ends the failing period; a first message does
  // only if it is new (a server that replays one old message and hangs is
  // still failing), see AcceptLocked.
  void MarkHealthyLocked(const std::shared_ptr<AttemptRec>& rec,
                         bool ends_failing, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (rec->healthy) return;
    rec->healthy = true;
    CancelTimerLocked(rec->settle_timer);
    CancelTimerLocked(rec->open_timer);
    if (ends_failing) budget_.OnProgress();
    RecordLater(rec->ticket, BreakerGate::kSuccess, absl::OkStatus(), w);
  }

  // --- Migration -----------------------------------------------------------

  // Moves off a draining connection, make before break. `now`: the jitter
  // (if any) has been waited out.
  void MaybeMigrateLocked(bool now, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (phase_ != Phase::kRunning || starting_) return;
    if (!current_ || !current_->live || current_->cancel_requested ||
        !current_->leaving()) {
      return;
    }
    // A stall always moves; a drain only with `migrate_on_drain`.
    if (!migrate_on_drain_ && !current_->stalled) return;
    if (old_) {
      // The replacement's connection drained before it delivered: drop the
      // replacement, keep the fallback, and move again.
      CancelAttemptLocked(current_, w);
      FallBackLocked(w);
    }
    if (!now) {
      if (migration_timer_ != 0) return;  // a move is already scheduled
      if (migration_jitter_ > absl::ZeroDuration()) {
        // Spread the moves of many streams leaving one connection.
        ArmMigrationTimerLocked(gen_.Below(migration_jitter_));
        return;
      }
    }
    BeginStartLocked(AttemptReason::kMigration, w);
  }

  void ArmMigrationTimerLocked(absl::Duration delay)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    CancelTimerLocked(migration_timer_);
    std::weak_ptr<StreamCoreImpl> weak = this->shared_from_this();
    const Clock::TimerId token = ++timer_tokens_;
    migration_timer_token_ = token;
    migration_timer_ = clock_->RunAfter(delay, [weak, token] {
      if (auto self = weak.lock()) self->OnMigrationTimer(token);
    });
  }

  void OnMigrationTimer(Clock::TimerId token) {
    Work w;
    {
      MutexLock lock(&mu_);
      if (migration_timer_token_ != token) return;
      migration_timer_ = 0;
      MaybeMigrateLocked(/*now=*/true, w);
    }
    Flush(w);
  }

  void ArmHandoffTimerLocked(const std::shared_ptr<AttemptRec>& fresh)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    CancelTimerLocked(handoff_timer_);
    std::weak_ptr<StreamCoreImpl> weak = this->shared_from_this();
    std::weak_ptr<AttemptRec> weak_fresh = fresh;
    handoff_timer_ = clock_->RunAfter(handoff_timeout_, [weak, weak_fresh] {
      if (auto self = weak.lock()) self->OnHandoffTimer(weak_fresh.lock());
    });
  }

  void OnHandoffTimer(const std::shared_ptr<AttemptRec>& fresh) {
    Work w;
    {
      MutexLock lock(&mu_);
      if (fresh && current_ == fresh && old_) {
        handoff_timer_ = 0;
        RetireOldLocked(w);
      }
    }
    Flush(w);
  }

  // The replacement took over: cancel the fallback.
  void RetireOldLocked(Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    CancelAttemptLocked(old_, w);
    old_.reset();
    CancelTimerLocked(handoff_timer_);
  }

  // The replacement is gone (or going): the fallback is the current attempt
  // again and reads on, starting with what it held.
  void FallBackLocked(Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    current_ = std::move(old_);
    old_.reset();
    CancelTimerLocked(handoff_timer_);
    ReleaseHoldLocked(w);
  }

  // Whether a message of the attempt a move leaves (`rec`) is held instead
  // of delivered: it is new (past everything delivered), and the
  // replacement resumed from a position the stream had delivered (the
  // stream's position only grows) and has not delivered yet, so it will
  // send the message again. That is the fallback while its replacement
  // opens, or the current attempt while the replacement's start (which took
  // its resume position) is in flight. One message at most.
  bool ShouldHoldLocked(const AttemptRec& rec,
                        const absl::optional<Position>& pos)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!hold_fallback_ || !hooks_.position_of || !pos || rec.held ||
        !gate_.has_last()) {
      return false;
    }
    const Position::Kind kind = pos->kind();
    if (kind != Position::Kind::kItem && kind != Position::Kind::kItems) {
      return false;
    }
    const bool fallback = &rec == old_.get() && current_ && current_->live &&
                          !current_->cancel_requested &&
                          !current_->got_message && current_->info.resumed;
    const bool leaving = &rec == current_.get() && starting_ && start_is_move_;
    return (fallback || leaving) && pos->first() > gate_.last();
  }

  // The held message is not needed: the attempt that held it is cancelled
  // or ended, and the stream's position never passed it.
  void DropHoldLocked(AttemptRec& rec, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!rec.held) return;
    rec.held = false;
    DisposeLater(std::move(held_), w);
  }

  // The held message (app type) is destroyed after the lock.
  static void DisposeLater(std::unique_ptr<Held> held, Work& w) {
    if (held) w.internal.Add([m = std::move(held->message)] {});
  }

  // The stream fell back to `current_`: deliver what it held and let it
  // read on.
  void ReleaseHoldLocked(Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::shared_ptr<AttemptRec> rec = current_;
    if (!rec || !rec->held) return;
    rec->held = false;
    std::unique_ptr<Held> held = std::move(held_);
    // An ending stream delivers nothing more (like OnMessage).
    if (!rec->live || rec->cancel_requested || phase_ == Phase::kFinishing) {
      DisposeLater(std::move(held), w);
      return;
    }
    absl::optional<std::uint64_t> trim_at;
    const bool more = AcceptLocked(rec, held->pos, absl::nullopt, absl::nullopt,
                                   held->message.get(), &trim_at, w);
    DisposeLater(std::move(held), w);
    if (!more || !rec->live || rec->cancel_requested) return;
    if (rec->handle) {
      w.internal.Add([h = rec->handle] { h->Resume(); });
    } else {
      rec->paused = true;  // OnAttemptHandle resumes it
    }
  }

  // --- Messages ------------------------------------------------------------

  bool OnMessage(const std::shared_ptr<AttemptRec>& rec, void* response) {
    absl::optional<Position> pos;
    absl::optional<std::string> cursor;
    bool notice = false;
    bool resync = false;
    absl::Status threw;
    const char* fn = "is_drain_notice";
    try {
      if (rare_.drain_notice) notice = parts_->IsDrainNotice(response);
      fn = "resync_on_message";
      if (!notice && rare_.resync_on_message) {
        resync = parts_->ResyncOnMessage(response);
      }
      const bool positioned = !notice && !resync;  // a notice carries none
      if (positioned && hooks_.position_of) {
        fn = hooks_.position_name;
        pos = parts_->PositionOf(response);
      } else if (positioned && rare_.cursor_of) {
        fn = "cursor_of";
        cursor = parts_->CursorOf(response);
      }
    } catch (...) {
      threw = CallbackThrew(fn, std::current_exception());
    }
    // A batch that straddles the position is trimmed outside the lock, then
    // admitted again (the position may have moved meanwhile: trim again).
    absl::optional<std::uint64_t> trimmed_at;
    for (;;) {
      Work w;
      bool more = true;
      absl::optional<std::uint64_t> trim_at;
      {
        MutexLock lock(&mu_);
        if (!rec->live || rec->cancel_requested ||
            phase_ == Phase::kFinishing) {
          return false;
        }
        if (!threw.ok()) {
          EndLocked(threw, w);
          more = false;
        } else if (notice) {
          more = OnNoticeLocked(rec, response, w);
        } else if (resync) {
          BeginResyncLocked(*rec,
                            absl::FailedPreconditionError(absl::StrCat(
                                "tether: attempt ", rec->info.attempt,
                                " received a message that asks for a resync "
                                "(resync_on_message)")),
                            w);
          more = false;
        } else if (ShouldHoldLocked(*rec, pos)) {
          rec->held = true;
          held_.reset(
              new Held{*pos, std::shared_ptr<void>(parts_->NewMessage(response),
                                                   parts_->message_deleter())});
          more = false;
        } else {
          more =
              AcceptLocked(rec, pos, cursor, trimmed_at, response, &trim_at, w);
        }
      }
      Flush(w);
      if (!trim_at) return more;
      try {
        parts_->TrimDelivered(response, *trim_at);
        trimmed_at = trim_at;
      } catch (...) {
        threw = CallbackThrew("trim_delivered", std::current_exception());
      }
    }
  }

  // The server's drain notice on `rec`: the stream moves off it as off a
  // draining connection, at the notice pace. The connection is not reported
  // (behind an L7 proxy it is healthy: the next call goes through it
  // again). The notice moves no position and reaches the app only if the
  // spec asks. Returns whether the attempt may read on.
  bool OnNoticeLocked(const std::shared_ptr<AttemptRec>& rec, void* response,
                      Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++stats_.drain_notices;
    if (stall_timeout_ > absl::ZeroDuration()) {
      rec->last_activity = clock_->Now();
    }
    AttemptInfo info = rec->info;
    Notify(w, [info](StreamObserver& o) { o.OnDrainNotice(info); });
    const bool first = !rec->noticed;
    rec->noticed = true;
    if (first && rec == current_) MoveOnNoticeLocked(w);
    return rare_.deliver_drain_notice ? PushLocked(rec, response) : true;
  }

  // Moves off the current attempt, which heard a notice: at once while
  // the pace allows (`NoticePace`), else when it does. A replacement that
  // heard the notice too (its call landed on the leaving server again) is
  // dropped for the fallback first, as on a drain.
  void MoveOnNoticeLocked(Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (phase_ != Phase::kRunning || starting_ || !migrate_on_drain_ ||
        migration_timer_ != 0) {
      return;
    }
    const absl::Duration wait = notice_pace_.Take(clock_->Now());
    if (wait <= absl::ZeroDuration()) {
      MaybeMigrateLocked(/*now=*/false, w);
      return;
    }
    if (old_) {
      CancelAttemptLocked(current_, w);
      FallBackLocked(w);
    }
    ArmMigrationTimerLocked(wait);
  }

  // Applies the position rules and queues the message. Returns whether the
  // attempt may read on. Sets `*trim_at` (and leaves `response` alone) when
  // a batch must be trimmed first.
  bool AcceptLocked(const std::shared_ptr<AttemptRec>& rec,
                    const absl::optional<Position>& pos,
                    const absl::optional<std::string>& cursor,
                    absl::optional<std::uint64_t> trimmed_at, void* response,
                    absl::optional<std::uint64_t>* trim_at, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (stall_timeout_ > absl::ZeroDuration())
      rec->last_activity = clock_->Now();
    if (!rec->got_message) {
      rec->got_message = true;
      AttemptInfo info = rec->info;
      absl::Duration since = clock_->Now() - rec->started;
      Notify(w, [info, since](StreamObserver& o) {
        o.OnFirstMessage(info, since);
      });
      // The replacement is live: hand off from the draining attempt.
      if (rec == current_ && old_) RetireOldLocked(w);
      MarkHealthyLocked(rec, /*ends_failing=*/false, w);
    }
    if (hooks_.position_of) {
      PositionGate::Admission a =
          gate_.Admit(rec->cursor, pos, trimmed_at, rec->info.attempt);
      if (a.gap) {
        ++stats_.gaps;
        const std::uint64_t expected = a.expected, got = pos->first();
        Notify(w,
               [expected, got](StreamObserver& o) { o.OnGap(expected, got); });
      }
      switch (a.verdict) {
        case PositionGate::Verdict::kFail:
          EndLocked(a.error, w);
          return false;
        case PositionGate::Verdict::kTrim:
          *trim_at = a.trim_at;
          return true;
        case PositionGate::Verdict::kDuplicate: {
          ++stats_.duplicates_dropped;
          const std::uint64_t s = pos->last(), l = gate_.last();
          Notify(w, [s, l](StreamObserver& o) { o.OnDuplicateDropped(s, l); });
          return true;
        }
        case PositionGate::Verdict::kStale:
          return true;
        case PositionGate::Verdict::kProgress:
          stats_.has_last_seq = true;
          stats_.last_delivered_seq = gate_.last();
          rec->progressed = true;
          resyncs_without_progress_ = 0;
          budget_.OnProgress();
          if (!hooks_.deliver_progress) return true;
          break;
        case PositionGate::Verdict::kDeliver:
          if (pos->kind() == Position::Kind::kNone) {
            // A control message is delivered but is no progress: a server
            // that answers every attempt with one and then fails (or asks
            // for a resync) still spends the budget.
            return PushLocked(rec, response);
          }
          stats_.has_last_seq = true;
          stats_.last_delivered_seq = gate_.last();
          resyncs_without_progress_ = 0;
          break;
      }
    } else if (rare_.cursor_of && cursor) {
      if (IsReplayedCursorLocked(*rec, *cursor)) {
        ++stats_.duplicates_dropped;
        Notify(w, [](StreamObserver& o) { o.OnDuplicateDropped(0, 0); });
        return true;
      }
      RecordCursorLocked(*cursor);
      resyncs_without_progress_ = 0;
    }
    rec->progressed = true;
    budget_.OnProgress();
    return PushLocked(rec, response);
  }

  // Queues a message for the app; false (and the attempt pauses) when the
  // queue is full.
  bool PushLocked(const std::shared_ptr<AttemptRec>& rec, void* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!queue_.Push(response)) {
      rec->paused = true;
      return false;
    }
    return true;
  }

  // Opaque cursors have no order, so a resumed attempt's replays are found
  // by name: while an attempt catches up, a message whose cursor the stream
  // delivered after the attempt's resume cursor (the old attempt of a
  // migration delivered it meanwhile) is a replay. Its first message with a
  // cursor the stream has not delivered since ends the catching up. The
  // server must send cursors in order and resume strictly after the cursor
  // it is given.
  bool IsReplayedCursorLocked(AttemptRec& rec, const std::string& cursor)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!rec.catching_up) return false;
    for (const auto& entry : cursors_->log) {
      if (entry.first > rec.cursor_from && entry.second == cursor) {
        rec.cursor_from = entry.first;
        return true;
      }
    }
    rec.catching_up = false;
    return false;
  }

  void RecordCursorLocked(const std::string& cursor)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    CursorLog& c = *cursors_;
    c.last = cursor;
    ++c.count;
    // Kept only as far back as an attempt (or a start in flight) may replay.
    std::uint64_t keep_after = c.count;
    for (const AttemptRec* r : {current_.get(), old_.get()}) {
      if (r && r->live && r->catching_up) {
        keep_after = std::min(keep_after, r->cursor_from);
      }
    }
    if (starting_) keep_after = std::min(keep_after, c.pending_from);
    if (keep_after < c.count) c.log.emplace_back(c.count, cursor);
    while (!c.log.empty() && (c.log.front().first <= keep_after ||
                              c.log.size() > kMaxCursorLog)) {
      c.log.pop_front();
    }
  }

  void OnQueueSpace() override {
    std::vector<std::shared_ptr<Attempt>> resume;
    {
      MutexLock lock(&mu_);
      for (const std::shared_ptr<AttemptRec>& rec : {current_, old_}) {
        if (rec && rec->live && rec->paused && rec->handle &&
            !rec->cancel_requested) {
          rec->paused = false;
          resume.push_back(rec->handle);
        }
      }
    }
    for (auto& h : resume) h->Resume();
  }

  void OnCallbackError(absl::Status status) override {
    auto self = this->shared_from_this();
    Work w;
    {
      MutexLock lock(&mu_);
      queue_.Clear();
      EndLocked(std::move(status), w);
    }
    Flush(w);
  }

  // --- Attempt ends --------------------------------------------------------

  void OnAttemptDone(const std::shared_ptr<AttemptRec>& rec,
                     const absl::Status& status, const Metadata& trailers) {
    bool by_client = false;
    bool received = false;
    {
      MutexLock lock(&mu_);
      by_client = rec->cancel_requested;
      received = rec->got_message;
    }
    // The classifier and `resync_on_end` are app code: outside the lock.
    EndClass cls = EndClass::kOk;
    absl::Status classifier_threw;
    RetryPushback pushback;
    bool resync = false;
    if (!by_client && rare_.resync_on_end) {
      try {
        resync = rare_.resync_on_end(status);
      } catch (...) {
        classifier_threw =
            CallbackThrew("resync_on_end", std::current_exception());
      }
    }
    if (!by_client && !resync && classifier_threw.ok()) {
      AttemptEnd end = MakeAttemptEnd(status, trailers);
      end.received_messages = received;
      pushback = end.pushback;
      try {
        cls = classifier_(end);
      } catch (...) {
        classifier_threw =
            CallbackThrew("classifier", std::current_exception());
      }
      // Only the stream's resync_on_end asks for a resync.
      if (cls == EndClass::kResync) cls = EndClass::kTransient;
    }
    Work w;
    {
      MutexLock lock(&mu_);
      rec->pushback = pushback;
      rec->end_status = status;
      rec->live = false;
      DropHoldLocked(*rec, w);
      --live_attempts_;
      CancelAttemptTimersLocked(*rec);
      by_client = rec->cancel_requested;
      if (rec->handle) {
        // Dropped after the lock, like every other call into the attempt.
        w.internal.Add([h = std::move(rec->handle)] {});
        rec->handle = nullptr;
      }
      auto self = this->shared_from_this();
      const std::uint64_t id = rec->info.connection_id;
      w.internal.Add(
          [self, id] { self->source_->Release(id, self->WeakListener()); });
      resync = resync && !by_client && (rec == current_ || rec == old_);
      if (resync) cls = EndClass::kResync;
      RecordLater(rec->ticket, BreakerGate::Classify(status, cls, by_client),
                  status, w);
      AttemptInfo info = rec->info;
      Notify(w, [info, status, cls, by_client](StreamObserver& o) {
        o.OnAttemptEnded(info, status, cls, by_client);
      });
      EndFacts facts;
      facts.role = rec == current_ ? EndFacts::Role::kCurrent
                   : rec == old_   ? EndFacts::Role::kFallback
                                   : EndFacts::Role::kRetiring;
      facts.finishing = phase_ == Phase::kFinishing;
      facts.status = status;
      facts.cls = cls;
      facts.by_client = by_client;
      facts.callback_error = classifier_threw;
      facts.announced_drain = rec->draining || rec->noticed;
      facts.progressed = rec->progressed;
      facts.has_fallback = old_ != nullptr;
      facts.pushback_stop = rec->pushback.stop;
      ApplyEndLocked(rec, DecideEnd(facts), w);
    }
    Flush(w);
  }

  // Carries out what `DecideEnd` decided about `rec`'s end.
  void ApplyEndLocked(const std::shared_ptr<AttemptRec>& rec,
                      const EndDecision& d, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    using Action = EndDecision::Action;
    if (d.report_unannounced) ReportEndLater(*rec, rec->end_status, w);
    switch (d.action) {
      case Action::kNothing:
        MaybeFinalizeLocked();  // the last end of an ending stream
        return;
      case Action::kEnd:
        EndLocked(d.status, w);
        return;
      case Action::kResync:
        BeginResyncLocked(*rec, rec->end_status, w);
        return;
      case Action::kDropFallback:
        old_.reset();
        CancelTimerLocked(handoff_timer_);
        return;
      case Action::kFallBack:
        // The replacement of a migration failed while the draining attempt
        // still runs (not cancelled): fall back to it (delivering what it
        // held) and move again after the delay.
        FallBackLocked(w);
        break;
      case Action::kReopen:
        break;
    }
    const absl::Time now = clock_->Now();
    absl::StatusOr<absl::Duration> delay =
        d.after_progress
            ? absl::StatusOr<absl::Duration>(
                  budget_.AfterProgress(absl::BitGenRef(gen_)))
            : budget_.OnFailure(now, FailingSince(*rec), rec->end_status,
                                absl::BitGenRef(gen_));
    if (d.use_pushback) {
      delay = WithPushback(std::move(delay), rec->pushback.present,
                           rec->pushback.delay, now, budget_.failing(),
                           budget_.failing_since(), max_time_);
    }
    if (!delay.ok()) {
      GiveUpLocked(delay.status(), w);
      return;
    }
    if (d.action == Action::kFallBack) {
      ArmMigrationTimerLocked(*delay);
      return;
    }
    if (d.unless_starting && starting_) return;  // a move's start is on its way
    ArmReopenTimerLocked(*delay, rec->end_status, w);
  }

  // When an attempt began to fail: at its start unless it proved healthy
  // (then at its last sign of life).
  absl::Time FailingSince(const AttemptRec& rec) {
    if (!rec.healthy) return rec.started;
    return stall_timeout_ > absl::ZeroDuration() ? rec.last_activity
                                                 : clock_->Now();
  }

  // Tells the source what an unannounced end (or a stall) says about the
  // attempt's connection.
  void ReportEndLater(const AttemptRec& rec, const absl::Status& status,
                      Work& w) {
    auto self = this->shared_from_this();
    const std::uint64_t id = rec.info.connection_id;
    ConnectionSource::EndReport report;
    report.status = status;
    report.before_first_message = !rec.got_message;
    report.stalled = rec.stalled;
    w.internal.Add([self, id, report] {
      self->source_->ReportUnannouncedEnd(id, report);
    });
  }

  void ArmReopenTimerLocked(absl::Duration delay, const absl::Status& last,
                            Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    phase_ = Phase::kWaiting;
    reopen_due_ = clock_->Now() + delay;
    if (delay > recovery_jitter_) {
      // Woken early if the source sees a usable connection come back.
      auto self = this->shared_from_this();
      w.internal.Add(
          [self] { self->source_->NotifyWhenAvailable(self->WeakListener()); });
    }
    Notify(w, [delay, last](StreamObserver& o) { o.OnBackoff(delay, last); });
    CancelTimerLocked(reopen_timer_);
    std::weak_ptr<StreamCoreImpl> weak = this->shared_from_this();
    const Clock::TimerId token = ++timer_tokens_;
    reopen_timer_token_ = token;
    reopen_timer_ = clock_->RunAfter(delay, [weak, token] {
      if (auto self = weak.lock()) self->OnReopenTimer(token);
    });
  }

  void OnReopenTimer(Clock::TimerId token) {
    Work w;
    {
      MutexLock lock(&mu_);
      if (phase_ != Phase::kWaiting || reopen_timer_token_ != token) return;
      reopen_timer_ = 0;
      BeginStartLocked(AttemptReason::kReopen, w);
    }
    Flush(w);
  }

  // --- Resync --------------------------------------------------------------

  // The server says the stream cannot resume from its position: cancel every
  // attempt (by us: no failure), call the app's `resync` on a thread of the
  // stream's resync pool (blocking allowed; other streams' resyncs run on
  // other threads), then resume after the position it gives. A
  // resync right after another one with nothing delivered in between is a
  // failed attempt for the reopen budget (no endless resync loop).
  // `asking`: the attempt whose message or end asks for the resync.
  void BeginResyncLocked(const AttemptRec& asking, const absl::Status& why,
                         Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (phase_ == Phase::kFinishing || phase_ == Phase::kResyncing) return;
    // An attempt that was healthy for the whole time bound before it asked
    // is no loop (a quiet watch that reconnects long after its last item and
    // finds its position compacted away): the count starts over.
    if (asking.healthy && max_time_ != absl::InfiniteDuration() &&
        clock_->Now() - asking.started >= max_time_) {
      resyncs_without_progress_ = 0;
    }
    absl::Duration delay = absl::ZeroDuration();
    if (resyncs_without_progress_ > 0) {
      const absl::Time now = clock_->Now();
      absl::StatusOr<absl::Duration> d = budget_.OnFailure(
          now, budget_.failing() ? budget_.failing_since() : now, why,
          absl::BitGenRef(gen_));
      if (!d.ok()) {
        GiveUpLocked(d.status(), w);
        return;
      }
      // An attempt that settled resets the budget (a quiet stream is not a
      // failing one), so a server that asks for a resync only after each
      // attempt settled would loop for ever on the budget alone: resyncs
      // without a new item are also counted on their own.
      if (resyncs_without_progress_ >= budget_.max_attempts()) {
        GiveUpLocked(ReopenBudget::GaveUpWith(
                         why, absl::StrCat(resyncs_without_progress_,
                                           " resyncs without a new item")),
                     w);
        return;
      }
      delay = *d;
    }
    ++resyncs_without_progress_;  // at most max_attempts (given up above)
    phase_ = Phase::kResyncing;
    const std::uint64_t epoch = ++resync_epoch_;
    resync_why_ = why;
    CancelTimerLocked(reopen_timer_);
    CancelTimerLocked(handoff_timer_);
    CancelTimerLocked(migration_timer_);
    CancelAttemptLocked(current_, w);
    CancelAttemptLocked(old_, w);
    current_.reset();
    old_.reset();
    std::weak_ptr<StreamCoreImpl> weak = this->shared_from_this();
    auto post = [weak, epoch, pool = resync_pool_] {
      pool->Run([weak, epoch] {
        if (auto self = weak.lock()) self->CallResync(epoch);
      });
    };
    if (delay > absl::ZeroDuration()) {
      Notify(w, [delay, why](StreamObserver& o) { o.OnBackoff(delay, why); });
      resync_timer_ = clock_->RunAfter(delay, post);
    } else {
      w.internal.Add(post);
    }
    // A resync that never calls `done` (a listing that hangs) must not hold
    // the stream for ever: it ends once the resync has taken the time bound.
    if (max_time_ != absl::InfiniteDuration()) {
      resync_deadline_timer_ =
          clock_->RunAfter(delay + max_time_, [weak, epoch] {
            if (auto self = weak.lock()) self->OnResyncTimedOut(epoch);
          });
    }
  }

  void OnResyncTimedOut(std::uint64_t epoch) {
    Work w;
    {
      MutexLock lock(&mu_);
      resync_deadline_timer_ = 0;
      if (phase_ != Phase::kResyncing || epoch != resync_epoch_) return;
      phase_ = Phase::kRunning;
      GiveUpLocked(
          absl::DeadlineExceededError(absl::StrCat(
              "tether: resync did not call done within "
              "max_time_without_progress (",
              absl::FormatDuration(max_time_),
              "); resync was needed because: ", resync_why_.ToString())),
          w);
    }
    Flush(w);
  }

  // On a thread of the resync pool, no lock held.
  void CallResync(std::uint64_t epoch) {
    {
      MutexLock lock(&mu_);
      if (phase_ != Phase::kResyncing || epoch != resync_epoch_) return;
      resync_timer_ = 0;
    }
    std::weak_ptr<StreamCoreImpl> weak = this->shared_from_this();
    auto once = std::make_shared<std::atomic<bool>>(false);
    ResyncDone done = [weak, epoch, once](absl::StatusOr<std::uint64_t> r) {
      if (once->exchange(true)) return;
      if (auto self = weak.lock()) self->OnResyncDone(epoch, std::move(r));
    };
    try {
      rare_.resync(done);
    } catch (...) {
      done(CallbackThrew("resync", std::current_exception()));
    }
  }

  void OnResyncDone(std::uint64_t epoch, absl::StatusOr<std::uint64_t> r) {
    auto self = this->shared_from_this();
    Work w;
    {
      MutexLock lock(&mu_);
      if (phase_ != Phase::kResyncing || epoch != resync_epoch_) return;
      CancelTimerLocked(resync_deadline_timer_);
      if (!r.ok()) {
        phase_ = Phase::kRunning;
        EndLocked(r.status(), w);
      } else {
        const std::uint64_t after = *r;
        gate_.Reset(after);
        stats_.has_last_seq = true;
        stats_.last_delivered_seq = after;
        ++stats_.resyncs;
        absl::Status why = resync_why_;
        Notify(w, [why, after](StreamObserver& o) { o.OnResync(why, after); });
        phase_ = Phase::kRunning;
        BeginStartLocked(AttemptReason::kResync, w);
      }
    }
    Flush(w);
  }

  // --- Ending --------------------------------------------------------------

  void GiveUpLocked(const absl::Status& gave_up, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Notify(w, [gave_up](StreamObserver& o) { o.OnGaveUp(gave_up); });
    EndLocked(gave_up, StreamEnd::kGaveUp, w);
  }

  void CancelLocked(Work& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (phase_ == Phase::kFinishing) return;
    queue_.Clear();
    EndLocked(absl::CancelledError("tether: stream cancelled by the client"),
              StreamEnd::kCancelled, w);
  }

  void EndLocked(const absl::Status& status, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    EndLocked(status, status.ok() ? StreamEnd::kFinished : StreamEnd::kFailed,
              w);
  }

  void EndLocked(const absl::Status& status, StreamEnd how, Work& w)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (phase_ == Phase::kFinishing) return;
    phase_ = Phase::kFinishing;
    final_ = status;
    Notify(w,
           [status, how](StreamObserver& o) { o.OnStreamEnded(status, how); });
    CancelTimerLocked(reopen_timer_);
    CancelTimerLocked(handoff_timer_);
    CancelTimerLocked(migration_timer_);
    CancelTimerLocked(resync_timer_);
    CancelTimerLocked(resync_deadline_timer_);
    CancelAttemptLocked(current_, w);
    CancelAttemptLocked(old_, w);
    if (rare_.on_end_decided) rare_.on_end_decided();
    MaybeFinalizeLocked();
  }

  // The end reaches the app once no attempt is live and no start is in
  // flight (their picks and permits are given back first).
  void MaybeFinalizeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finalized_ || phase_ != Phase::kFinishing) return;
    if (live_attempts_ > 0 || starting_) return;
    finalized_ = true;
    queue_.Close(final_);
  }

  void CancelTimerLocked(Clock::TimerId& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (id != 0) clock_->Cancel(id);
    id = 0;
  }

  // Immutable after construction.
  const std::shared_ptr<ConnectionSource> source_;
  // The typed parts: the request, the attempt factory, the messages read
  // ahead. Lives as long as the core (attempts hold the core).
  const std::unique_ptr<StreamParts> parts_;
  const Hooks hooks_;
  const Hooks::Rare& rare_;  // *hooks_.rare, or all empty
  const std::shared_ptr<StreamObserver> observer_;
  const std::shared_ptr<Clock> clock_;
  const Classifier classifier_;
  const bool migrate_on_drain_;
  const bool fail_fast_on_open_breaker_;
  const bool hold_fallback_;
  const absl::Duration handoff_timeout_;
  const absl::Duration migration_jitter_;
  const absl::Duration settle_time_;
  const absl::Duration stall_timeout_;  // zero: off
  const absl::Duration open_timeout_;
  const absl::Duration max_time_;
  const absl::Duration recovery_jitter_;
  const std::shared_ptr<ResyncPool> resync_pool_;  // runs `resync`
  BreakerGate breaker_;  // thread-safe; used outside `mu_`
  DeliveryQueue queue_;

  Mutex mu_;
  PositionGate gate_ ABSL_GUARDED_BY(mu_);
  // Opaque cursors: the last delivered one, how many were delivered, and
  // the ones a catching-up attempt may replay (index, cursor).
  static constexpr std::size_t kMaxCursorLog = 1 << 16;
  struct CursorLog {
    absl::optional<std::string> last;
    std::uint64_t count = 0;
    std::uint64_t pending_from = 0;
    // Not a std::deque: that allocates 576 bytes up front.
    CompactFifo<std::pair<std::uint64_t, std::string>> log;
  };
  // Allocated only with `cursor_of` (bytes per open stream). The
  // pointee is guarded by `mu_` (clang 14 takes PT_GUARDED_BY on raw
  // pointers only).
  const std::unique_ptr<CursorLog> cursors_;
  // Resync.
  std::uint64_t resync_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  // Resyncs since the last new item; each after the first counts against
  // the reopen budget, and at max_attempts_without_progress the stream ends.
  int resyncs_without_progress_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status resync_why_ ABSL_GUARDED_BY(mu_);
  Clock::TimerId resync_timer_ ABSL_GUARDED_BY(mu_) = 0;
  // Ends a resync whose `done` never comes (max_time_without_progress).
  Clock::TimerId resync_deadline_timer_ ABSL_GUARDED_BY(mu_) = 0;
  ReopenBudget budget_ ABSL_GUARDED_BY(mu_);
  // Paces the moves on drain notices (32 bytes).
  NoticePace notice_pace_ ABSL_GUARDED_BY(mu_);
  StreamRandom gen_ ABSL_GUARDED_BY(mu_);  // 8 bytes (mt19937_64: 2.5 KB)
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kRunning;
  bool starting_ ABSL_GUARDED_BY(mu_) = false;
  // The start in flight is a move that resumes (see ShouldHoldLocked).
  bool start_is_move_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<Held> held_ ABSL_GUARDED_BY(mu_);
  std::vector<std::uint64_t> drained_during_start_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<AttemptRec> current_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<AttemptRec> old_ ABSL_GUARDED_BY(mu_);  // the fallback
  int live_attempts_ ABSL_GUARDED_BY(mu_) = 0;            // incl. retiring ones
  Clock::TimerId timer_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  Clock::TimerId reopen_timer_ ABSL_GUARDED_BY(mu_) = 0;
  Clock::TimerId reopen_timer_token_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time reopen_due_ ABSL_GUARDED_BY(mu_);
  Clock::TimerId handoff_timer_ ABSL_GUARDED_BY(mu_) = 0;
  Clock::TimerId migration_timer_ ABSL_GUARDED_BY(mu_) = 0;
  Clock::TimerId migration_timer_token_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration migration_retry_delay_ ABSL_GUARDED_BY(mu_);
  absl::Status final_ ABSL_GUARDED_BY(mu_);
  bool finalized_ ABSL_GUARDED_BY(mu_) = false;
  StreamStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

AttemptSink::AttemptSink(std::shared_ptr<StreamCore> core,
                         std::shared_ptr<AttemptRecord> rec)
    : core_(std::move(core)), rec_(std::move(rec)) {}
AttemptSink::~AttemptSink() = default;
AttemptSink::AttemptSink(AttemptSink&&) noexcept = default;

bool AttemptSink::OnMessage(void* response) {
  return static_cast<StreamCoreImpl*>(core_.get())->OnMessage(rec_, response);
}

void AttemptSink::OnEnd(const absl::Status& status, const Metadata& trailers) {
  static_cast<StreamCoreImpl*>(core_.get())
      ->OnAttemptDone(rec_, status, trailers);
}

absl::StatusOr<std::shared_ptr<StreamCore>> StreamCore::Create(
    std::shared_ptr<ConnectionSource> source,
    std::unique_ptr<StreamParts> parts, StreamHooks hooks,
    ReconnectingStreamOptions options, DoneFn on_done) {
  return StreamCoreImpl::Create(std::move(source), std::move(parts),
                                std::move(hooks), std::move(options),
                                std::move(on_done));
}

}  // namespace internal
}  // namespace tether
