// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// An attempt's end: classified outside the lock, decided by `DecideEnd`,
// carried out here (reopen after a delay, fall back, resync, end).
#include "streams/stream_machine.h"

namespace tether {
namespace internal {

void StreamMachine::OnAttemptDone(const std::shared_ptr<AttemptRec>& rec,
                                  const absl::Status& status,
                                  const Metadata& trailers) {
  bool by_client = false;
  bool received = false;
  bool progressed = false;
  {
    MutexLock lock(&mu_);
    by_client = rec->cancel_requested;
    received = rec->got_message;
    progressed = rec->progressed;
  }
  // Where in `reopen_after_progress_jitter` a reopen after progress starts,
  // asked before the lock: the source takes its own (see ReopenShare).
  const absl::optional<double> reopen_share =
      !by_client && progressed &&
              settings_->budget.limits.progress_jitter > absl::ZeroDuration()
          ? source_->ReopenShare(rec->info.connection_id)
          : absl::nullopt;
  // The classifier and `resync_on_end` are app code: outside the lock.
  EndClass cls = EndClass::kOk;
  absl::Status classifier_threw;
  RetryPushback pushback;
  bool resync = false;
  if (!by_client && rare().resync_on_end) {
    try {
      resync = rare().resync_on_end(status);
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
      cls = settings_->classifier(end);
    } catch (...) {
      classifier_threw = CallbackThrew("classifier", std::current_exception());
    }
    // Only the stream's resync_on_end asks for a resync.
    if (cls == EndClass::kResync) cls = EndClass::kTransient;
  }
  Work w;
  {
    MutexLock lock(&mu_);
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
    facts.pushback_stop = pushback.stop;
    // A server's pushback says when to come back: it is not waived.
    facts.spread_wait = rec == current_ && SpreadingLocked() &&
                        (rec->healthy || rec->progressed) && !pushback.present;
    ApplyEndLocked(rec, DecideEnd(facts), status, pushback, reopen_share, w);
  }
  Flush(w);
}

void StreamMachine::ApplyEndLocked(const std::shared_ptr<AttemptRec>& rec,
                                   const EndDecision& d,
                                   const absl::Status& status,
                                   const RetryPushback& pushback,
                                   absl::optional<double> reopen_share,
                                   Work& w) {
  using Action = EndDecision::Action;
  if (d.report_unannounced) ReportEndLater(*rec, status, w);
  switch (d.action) {
    case Action::kNothing:
      MaybeFinalizeLocked();  // the last end of an ending stream
      return;
    case Action::kEnd:
      EndLocked(d.status, w);
      return;
    case Action::kResync:
      BeginResyncLocked(*rec, status, w);
      return;
    case Action::kDropFallback:
      old_.reset();
      handoff_timer_.Cancel(*settings_->clock);
      return;
    case Action::kFallBack:
      // The replacement of a migration failed while the draining attempt
      // still runs (not cancelled): fall back to it (delivering what it
      // held) and move again after the delay.
      FallBackLocked(w);
      break;
    case Action::kReopen:
      if (d.at_once) {
        migration_timer_.Cancel(*settings_->clock);
        BeginStartLocked(AttemptReason::kMigration, w);
        return;
      }
      if (!d.after_progress && !rec->healthy && !pushback.present &&
          !(d.unless_starting && starting_) &&
          BackToScheduleLocked(rec->hinted_due, status, w)) {
        return;
      }
      break;
  }
  const absl::Time now = settings_->clock->Now();
  absl::StatusOr<absl::Duration> delay =
      d.after_progress ? absl::StatusOr<absl::Duration>(
                             budget_.AfterProgress(absl::BitGenRef(gen_),
                                                   reopen_share))
                       : budget_.OnFailure(now, FailingSince(*rec), status,
                                           absl::BitGenRef(gen_));
  if (d.use_pushback) {
    delay = WithPushback(std::move(delay), pushback.present, pushback.delay,
                         now, budget_.failing(), budget_.failing_since(),
                         settings_->max_time);
  }
  if (d.spends_retry) {
    const absl::Time give_up_at =
        settings_->max_time == absl::InfiniteDuration()
            ? absl::InfiniteFuture()
            : budget_.failing_since() + settings_->max_time;
    delay = retry_.Take(std::move(delay), now, give_up_at, status);
    if (retry_.added_wait() > absl::ZeroDuration()) {
      Notify(w, [added = retry_.added_wait()](StreamObserver& o) {
        o.OnRetryBudgetWait(added);
      });
    }
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
  ArmReopenTimerLocked(*delay, status, w, /*start_if_due=*/d.after_progress);
}

absl::Time StreamMachine::FailingSince(const AttemptRec& rec) {
  if (!rec.healthy) return rec.started;
  return settings_->stall_timeout > absl::ZeroDuration()
             ? rec.last_activity
             : settings_->clock->Now();
}

void StreamMachine::ReportEndLater(const AttemptRec& rec,
                                   const absl::Status& status, Work& w) {
  auto self = this->shared_from_this();
  const std::uint64_t id = rec.info.connection_id;
  ConnectionSource::EndReport report;
  report.status = status;
  report.before_first_message = !rec.got_message;
  report.stalled = rec.stalled;
  w.internal.Add(
      [self, id, report] { self->source_->ReportUnannouncedEnd(id, report); });
}

bool StreamMachine::BackToScheduleLocked(absl::Time due,
                                         const absl::Status& why, Work& w) {
  const absl::Time now = settings_->clock->Now();
  if (due <= now || !budget_.failing()) return false;
  ArmReopenTimerLocked(due - now, why, w);
  return true;
}

void StreamMachine::ArmReopenTimerLocked(absl::Duration delay,
                                         const absl::Status& last, Work& w,
                                         bool start_if_due) {
  phase_ = Phase::kWaiting;
  hinted_due_ = absl::InfinitePast();  // the timer is the schedule now
  reopen_due_ = settings_->clock->Now() + delay;
  if (delay > settings_->recovery_jitter) {
    // Woken early if the source sees a usable connection come back.
    auto self = this->shared_from_this();
    w.internal.Add(
        [self] { self->source_->NotifyWhenAvailable(self->WeakListener()); });
  }
  Notify(w, [delay, last](StreamObserver& o) { o.OnBackoff(delay, last); });
  if (start_if_due && delay <= absl::ZeroDuration() && !starting_) {
    // Started by this flush, after what the end told the source (already
    // in `w`): a timer could fire first, on the clock's thread, and pick
    // the connection the end is evidence against before the source heard.
    BeginStartLocked(AttemptReason::kReopen, w);
    return;
  }
  ArmLocked(reopen_timer_, delay, &StreamMachine::OnReopenTimerLocked);
}

void StreamMachine::OnReopenTimerLocked(Work& w) {
  if (phase_ != Phase::kWaiting) return;
  BeginStartLocked(AttemptReason::kReopen, w);
}

}  // namespace internal
}  // namespace tether
