// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// An attempt's health: settled or not, stalled, and its open deadline.
#include "streams/stream_machine.h"

namespace tether {
namespace internal {

void StreamMachine::ArmAttemptTimersLocked(
    const std::shared_ptr<AttemptRec>& rec) {
  if (settings_->stall_timeout > absl::ZeroDuration()) {
    ArmLocked(rec, &AttemptRec::watch_timer, settings_->stall_timeout,
              &StreamMachine::OnStallTimerLocked);
  } else {
    ArmLocked(rec, &AttemptRec::watch_timer, settings_->settle_time,
              &StreamMachine::OnSettleTimerLocked);
  }
  absl::Time deadline = rec->started + settings_->open_timeout;
  if (settings_->max_time != absl::InfiniteDuration()) {
    const absl::Time since =
        budget_.failing() ? std::min(budget_.failing_since(), rec->started)
                          : rec->started;
    deadline = std::min(deadline, since + settings_->max_time);
  }
  ArmLocked(rec, &AttemptRec::open_timer, deadline - settings_->clock->Now(),
            &StreamMachine::OnOpenTimerLocked);
}

void StreamMachine::CancelAttemptTimersLocked(AttemptRec& rec) {
  rec.watch_timer.Cancel(*settings_->clock);
  rec.open_timer.Cancel(*settings_->clock);
}

void StreamMachine::OnStallTimerLocked(const std::shared_ptr<AttemptRec>& rec,
                                       Work& w) {
  if (!rec->running() || rec->stalled || phase_ == Phase::kFinishing) {
    return;
  }
  const absl::Time now = settings_->clock->Now();
  const absl::Duration silent = now - rec->last_activity;
  if (rec->held || silent < settings_->stall_timeout) {
    // Held: silent because the stream stopped it. Otherwise a message
    // came meanwhile: look again when it would be silent for long enough.
    ArmLocked(rec, &AttemptRec::watch_timer,
              rec->held ? settings_->stall_timeout
                        : settings_->stall_timeout - silent,
              &StreamMachine::OnStallTimerLocked);
    return;
  }
  rec->stalled = true;
  ++stats_.stalls;
  const absl::Status stall = absl::DeadlineExceededError(absl::StrCat(
      "tether: attempt ", rec->info.attempt, " received nothing for ",
      absl::FormatDuration(silent), " (stall_timeout)"));
  AttemptInfo info = rec->info;
  Notify(w, [info, silent](StreamObserver& o) { o.OnStalled(info, silent); });
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

void StreamMachine::FailedWhileLiveLocked(absl::Time failing_since,
                                          const absl::Status& why, Work& w) {
  absl::StatusOr<absl::Duration> delay = budget_.OnFailure(
      settings_->clock->Now(), failing_since, why, absl::BitGenRef(gen_));
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

bool StreamMachine::UnprovenLocked(const AttemptRec& rec) {
  return rec.running() && !rec.healthy && phase_ != Phase::kFinishing;
}

void StreamMachine::AskConnectedLater(const std::shared_ptr<AttemptRec>& rec,
                                      ConnectedFn then, Work& w) {
  auto self = this->shared_from_this();
  const std::uint64_t id = rec->info.connection_id;
  w.internal.Add([self, rec, id, then] {
    self->OnConnectedAnswer(rec, self->source_->IsConnected(id), then);
  });
}

void StreamMachine::OnConnectedAnswer(const std::shared_ptr<AttemptRec>& rec,
                                      bool connected, ConnectedFn then) {
  Work w;
  {
    MutexLock lock(&mu_);
    if (!UnprovenLocked(*rec)) return;
    (this->*then)(rec, connected, w);
  }
  Flush(w);
}

void StreamMachine::OnOpenTimerLocked(const std::shared_ptr<AttemptRec>& rec,
                                      Work& w) {
  if (!UnprovenLocked(*rec) || rec->got_message) return;
  AskConnectedLater(rec, &StreamMachine::OnOpenCheckedLocked, w);
}

void StreamMachine::OnOpenCheckedLocked(const std::shared_ptr<AttemptRec>& rec,
                                        bool connected, Work& w) {
  if (connected || rec->got_message) return;
  const absl::Status why = absl::UnavailableError(absl::StrCat(
      "tether: attempt ", rec->info.attempt, " was not connected after ",
      absl::FormatDuration(settings_->clock->Now() - rec->started)));
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
          settings_->clock->Now(), rec->started, why, absl::BitGenRef(gen_));
      if (!delay.ok()) {
        GiveUpLocked(delay.status(), w);
      } else if (!starting_) {
        ArmReopenTimerLocked(*delay, why, w);
      }
    }
  }
}

void StreamMachine::OnConnectionAvailable() {
  MutexLock lock(&mu_);
  if (phase_ != Phase::kWaiting) return;
  absl::Duration spread = absl::ZeroDuration();
  if (settings_->recovery_jitter > absl::ZeroDuration()) {
    spread = gen_.Below(settings_->recovery_jitter);
  }
  // Never earlier than the retry budget allows.
  const absl::Time now = settings_->clock->Now();
  const absl::Time earliest = std::max(now + spread, retry_.not_before());
  if (reopen_due_ <= earliest) return;
  hinted_due_ = std::max(hinted_due_, reopen_due_);
  reopen_due_ = earliest;
  ArmLocked(reopen_timer_, earliest - now, &StreamMachine::OnReopenTimerLocked);
}

void StreamMachine::OnSettleTimerLocked(const std::shared_ptr<AttemptRec>& rec,
                                        Work& w) {
  if (!UnprovenLocked(*rec)) return;
  AskConnectedLater(rec, &StreamMachine::OnSettleCheckedLocked, w);
}

void StreamMachine::OnSettleCheckedLocked(
    const std::shared_ptr<AttemptRec>& rec, bool connected, Work& w) {
  if (connected) {
    MarkHealthyLocked(rec, /*ends_failing=*/true, w);
  } else {  // look again later
    ArmLocked(rec, &AttemptRec::watch_timer, settings_->settle_time,
              &StreamMachine::OnSettleTimerLocked);
  }
}

void StreamMachine::MarkHealthyLocked(const std::shared_ptr<AttemptRec>& rec,
                                      bool ends_failing, Work& w) {
  if (rec->healthy) return;
  rec->healthy = true;
  // The stall watch goes on; the settle watch and the open deadline are
  // answered.
  if (settings_->stall_timeout <= absl::ZeroDuration())
    rec->watch_timer.Cancel(*settings_->clock);
  rec->open_timer.Cancel(*settings_->clock);
  if (ends_failing) budget_.OnProgress();
  RecordLater(rec->ticket, BreakerGate::kSuccess, absl::OkStatus(), w);
}

}  // namespace internal
}  // namespace tether
