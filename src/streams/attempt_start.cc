// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Starting an attempt: the breaker permit and the pick (outside the lock),
// the resume request, then commit (the attempt runs) or abandon (what it
// took is given back).
#include "streams/stream_machine.h"

namespace tether {
namespace internal {

void StreamMachine::BeginStartLocked(AttemptReason reason, Work& w) {
  if (starting_ || phase_ == Phase::kFinishing || phase_ == Phase::kResyncing) {
    return;
  }
  starting_ = true;
  phase_ = Phase::kRunning;
  retry_.Release(settings_->clock->Now());
  drained_during_start_.reset();
  auto self = this->shared_from_this();
  w.internal.Add([self, reason] { self->StartAttempt(reason); });
}

void StreamMachine::StartAttempt(AttemptReason reason) {
  Work w;
  BreakerGate::Ticket ticket;
  if (settings_->breaker.enabled()) {
    absl::StatusOr<BreakerGate::Ticket> permit = settings_->breaker.Acquire();
    if (!permit.ok()) {
      const absl::Duration wait = settings_->breaker.RetryDelay();
      {
        MutexLock lock(&mu_);
        OnStartFailedLocked(reason, permit.status(), /*refused=*/true, wait, w);
      }
      Flush(w);
      return;
    }
    ticket = *std::move(permit);
  }
  absl::StatusOr<ConnectionPick> pick = source_->Pick(WeakListener());
  if (!pick.ok()) {
    if (ticket.valid()) {
      settings_->breaker.Record(std::move(ticket),
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
  CursorReplay::Catchup catchup;
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
        if (resumes && current_ && current_->running()) {
          start_is_move_ = true;
        }
      }
      if (cursors_ && cursors_->last()) {
        state.has_cursor = true;
        state.cursor = *cursors_->last();
      }
      epoch = resync_epoch_;
      if (cursors_) catchup = cursors_->BeginStart();
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
    if (phase_ == Phase::kFinishing || !threw.ok() || epoch != resync_epoch_) {
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
                        catchup, w);
    }
  }
  Flush(w);
}

void StreamMachine::AbandonStartLocked(const ConnectionPick& pick,
                                       BreakerGate::Ticket& ticket, Work& w) {
  starting_ = false;
  start_is_move_ = false;
  hinted_due_ = absl::InfinitePast();
  ReleaseHoldLocked(w);
  RecordLater(ticket, BreakerGate::kIgnored, absl::OkStatus(), w);
  auto self = this->shared_from_this();
  const std::uint64_t id = pick.connection_id;
  w.internal.Add(
      [self, id] { self->source_->Release(id, self->WeakListener()); });
  MaybeFinalizeLocked();
}

void StreamMachine::CommitStartLocked(AttemptReason reason, ConnectionPick pick,
                                      BreakerGate::Ticket ticket,
                                      std::shared_ptr<void> request,
                                      bool resumed, std::uint64_t after,
                                      CursorReplay::Catchup catchup, Work& w) {
  starting_ = false;
  start_is_move_ = false;
  migration_retry_delay_ = absl::ZeroDuration();
  auto rec = std::make_shared<AttemptRec>();
  if (reason == AttemptReason::kReopen) rec->hinted_due = hinted_due_;
  hinted_due_ = absl::InfinitePast();
  rec->ticket = std::move(ticket);
  rec->started = settings_->clock->Now();
  rec->info.attempt = ++stats_.attempts;
  rec->info.connection_id = pick.connection_id;
  rec->info.resumed = resumed;
  rec->info.resume_after_seq = resumed ? after : 0;
  if (rare().cursor_of) rec->catchup = catchup;
  if (drained_during_start_) {
    for (std::uint64_t id : *drained_during_start_) {
      if (id == pick.connection_id) rec->draining = true;
    }
    drained_during_start_.reset();
  }
  const bool replaces_live = current_ && current_->running();
  if (replaces_live) {
    // Make before break: the current attempt stays as the fallback.
    old_ = current_;
    rec->info.reason =
        old_->noticed ? AttemptReason::kDrainNotice : AttemptReason::kMigration;
    ++stats_.migrations;
    ArmLocked(handoff_timer_, settings_->handoff_timeout,
              &StreamMachine::OnHandoffTimerLocked);
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

void StreamMachine::OnStartFailedLocked(AttemptReason reason,
                                        const absl::Status& status,
                                        bool refused,
                                        absl::Duration breaker_wait, Work& w) {
  starting_ = false;
  start_is_move_ = false;
  const absl::Time hinted_due =
      reason == AttemptReason::kReopen ? hinted_due_ : absl::InfinitePast();
  hinted_due_ = absl::InfinitePast();
  ReleaseHoldLocked(w);
  if (phase_ == Phase::kFinishing) {
    MaybeFinalizeLocked();
    return;
  }
  if (phase_ == Phase::kResyncing) return;  // the resync starts the next
  if (current_ && current_->running()) {
    if (current_->stalled) {
      // The stream is failing (its attempt went silent): a move that
      // cannot start is one more failed attempt, within the budget.
      FailedWhileLiveLocked(
          budget_.failing() ? budget_.failing_since() : settings_->clock->Now(),
          status, w);
      return;
    }
    // A migration could not start: stay on the draining attempt and try
    // again later (it keeps delivering meanwhile).
    migration_retry_delay_ =
        std::min(absl::Seconds(5),
                 std::max(absl::Milliseconds(100), 2 * migration_retry_delay_));
    ArmMigrationTimerLocked(refused
                                ? std::max(breaker_wait, migration_retry_delay_)
                                : migration_retry_delay_);
    return;
  }
  if (refused) {
    if (reason == AttemptReason::kFirst &&
        settings_->fail_fast_on_open_breaker) {
      EndLocked(status, w);
      return;
    }
    absl::StatusOr<absl::Duration> wait =
        budget_.OnRefused(settings_->clock->Now(), breaker_wait, status);
    if (!wait.ok()) {
      GiveUpLocked(wait.status(), w);
      return;
    }
    ArmReopenTimerLocked(*wait, status, w);
    return;
  }
  if (BackToScheduleLocked(hinted_due, status, w)) return;
  const absl::Time now = settings_->clock->Now();
  absl::StatusOr<absl::Duration> delay =
      budget_.OnFailure(now, now, status, absl::BitGenRef(gen_));
  if (!delay.ok()) {
    GiveUpLocked(delay.status(), w);
    return;
  }
  ArmReopenTimerLocked(*delay, status, w);
}

void StreamMachine::OnAttemptHandle(const std::shared_ptr<AttemptRec>& rec,
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

void StreamMachine::CancelAttemptLocked(const std::shared_ptr<AttemptRec>& rec,
                                        Work& w) {
  if (!rec || !rec->running()) return;
  rec->cancel_requested = true;
  DropHoldLocked(*rec, w);
  CancelAttemptTimersLocked(*rec);
  if (rec->handle) {
    w.internal.Add([h = rec->handle] { h->Cancel(); });
  }  // else OnAttemptHandle cancels it
}

}  // namespace internal
}  // namespace tether
