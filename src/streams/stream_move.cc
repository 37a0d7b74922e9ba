// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Moving off an attempt whose connection drains or that went silent, make
// before break: the replacement, the hand-off, the fallback and its hold.
#include "policies/spread_order.h"
#include "streams/stream_machine.h"

namespace tether {
namespace internal {

void StreamMachine::MaybeMigrateLocked(bool now, Work& w,
                                       absl::optional<double> share) {
  if (phase_ != Phase::kRunning || starting_) return;
  if (!current_ || !current_->running() || !current_->leaving()) {
    return;
  }
  // A stall always moves; a drain only with `migrate_on_drain`.
  if (!settings_->migrate_on_drain && !current_->stalled) return;
  if (old_) {
    // The replacement's connection drained before it delivered: drop the
    // replacement, keep the fallback, and move again.
    CancelAttemptLocked(current_, w);
    FallBackLocked(w);
  }
  if (!now) {
    if (migration_timer_.armed()) return;  // a move is already scheduled
    if (settings_->migration_jitter > absl::ZeroDuration() &&
        !current_->stalled) {
      // Spread the moves of many streams leaving one connection: this one
      // starts at one point of the window (where the source puts it, so
      // that they fill the window evenly, or at random), and its attempt
      // keeps delivering meanwhile.
      const absl::Duration point =
          share ? PointIn(settings_->migration_jitter, *share)
                : gen_.Below(settings_->migration_jitter);
      ArmSpreadPointLocked(point, /*redrawn=*/false);
      return;
    }
  }
  BeginStartLocked(AttemptReason::kMigration, w);
}

void StreamMachine::ArmMigrationTimerLocked(absl::Duration delay) {
  spreading_ = false;
  ArmLocked(migration_timer_, delay, &StreamMachine::OnMigrationTimerLocked);
}

void StreamMachine::OnMigrationTimerLocked(Work& w) {
  spreading_ = false;
  MaybeMigrateLocked(/*now=*/true, w);
}

void StreamMachine::ArmSpreadPointLocked(absl::Duration point,
                                         bool redrawn) {
  // The due time and the redraw travel with the firing: no field per stream.
  using SpreadFn = void (StreamMachine::*)(absl::Time, bool, Work&);
  const SpreadFn on_fire = &StreamMachine::OnSpreadPointLocked;
  const absl::Time due = settings_->clock->Now() + point;
  ArmSlotLocked(migration_timer_, point,
                [on_fire, due, redrawn](StreamMachine& self, Work& w) {
                  (self.*on_fire)(due, redrawn, w);
                });
  spreading_ = true;
}

void StreamMachine::OnSpreadPointLocked(absl::Time due, bool redrawn,
                                        Work& w) {
  const absl::Duration late = settings_->clock->Now() - due;
  if (!redrawn && late > kLateSpreadPoint) {
    ArmSpreadPointLocked(late, /*redrawn=*/true);
    return;
  }
  OnMigrationTimerLocked(w);
}

bool StreamMachine::SpreadingLocked() const {
  return spreading_ && migration_timer_.armed();
}

void StreamMachine::OnHandoffTimerLocked(Work& w) {
  if (current_ && old_) RetireOldLocked(w);
}

void StreamMachine::RetireOldLocked(Work& w) {
  CancelAttemptLocked(old_, w);
  old_.reset();
  handoff_timer_.Cancel(*settings_->clock);
}

void StreamMachine::FallBackLocked(Work& w) {
  current_ = std::move(old_);
  old_.reset();
  handoff_timer_.Cancel(*settings_->clock);
  ReleaseHoldLocked(w);
}

bool StreamMachine::ShouldHoldLocked(const AttemptRec& rec,
                                     const absl::optional<Position>& pos) {
  if (!settings_->hold_fallback || !hooks_.position_of || !pos || rec.held ||
      !gate_.has_last()) {
    return false;
  }
  const Position::Kind kind = pos->kind();
  if (kind != Position::Kind::kItem && kind != Position::Kind::kItems) {
    return false;
  }
  const bool fallback = &rec == old_.get() && current_ && current_->running() &&
                        !current_->got_message && current_->info.resumed;
  const bool leaving = &rec == current_.get() && starting_ && start_is_move_;
  return (fallback || leaving) && pos->first() > gate_.last();
}

void StreamMachine::DropHoldLocked(AttemptRec& rec, Work& w) {
  if (!rec.held) return;
  rec.held = false;
  DisposeLater(std::move(held_), w);
}

void StreamMachine::DisposeLater(std::unique_ptr<Held> held, Work& w) {
  if (held) w.internal.Add([m = std::move(held->message)] {});
}

void StreamMachine::ReleaseHoldLocked(Work& w) {
  const std::shared_ptr<AttemptRec> rec = current_;
  if (!rec || !rec->held) return;
  rec->held = false;
  std::unique_ptr<Held> held = std::move(held_);
  // An ending stream delivers nothing more (like OnMessage).
  if (!rec->running() || phase_ == Phase::kFinishing) {
    DisposeLater(std::move(held), w);
    return;
  }
  absl::optional<std::uint64_t> trim_at;
  const bool more = AcceptLocked(rec, held->pos, absl::nullopt, absl::nullopt,
                                 held->message.get(), held->ack, &trim_at, w);
  DisposeLater(std::move(held), w);
  if (!more || !rec->running()) return;
  if (rec->handle) {
    w.internal.Add([h = rec->handle] { h->Resume(); });
  } else {
    rec->paused = true;  // OnAttemptHandle resumes it
  }
}

}  // namespace internal
}  // namespace tether
