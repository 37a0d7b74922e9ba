// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The composing machine: the public calls, the drain notice, timers, the end.
#include "streams/stream_machine.h"

namespace tether {
namespace internal {

absl::StatusOr<std::shared_ptr<StreamCore>> StreamMachine::Create(
    std::shared_ptr<ConnectionSource> source,
    std::unique_ptr<StreamParts> parts, Hooks hooks,
    ReconnectingStreamOptions options, DoneFn on_done) {
  const std::uint64_t seed = SeedOrEntropy(options.random_seed);
  // One allocation for the core and its control block.
  return std::shared_ptr<StreamCore>(std::make_shared<StreamMachine>(
      PassKey(), std::move(source), std::move(parts), std::move(hooks), options,
      StreamSettings::Share(options), seed, std::move(on_done)));
}

void StreamMachine::StartFirst() {
  auto self = this->shared_from_this();
  Work w;
  {
    MutexLock lock(&mu_);
    retry_.OnFirstTry();
    BeginStartLocked(AttemptReason::kFirst, w);
  }
  Flush(w);
}

void StreamMachine::Cancel() {
  auto self = this->shared_from_this();
  Work w;
  {
    MutexLock lock(&mu_);
    CancelLocked(w);
  }
  Flush(w);
}

void StreamMachine::Detach() {
  auto self = this->shared_from_this();
  queue_.Detach();  // first: the cancel below must not reach the app
  Cancel();
}

void StreamMachine::Callout(const std::function<void()>& call) {
  queue_.Callout(call);
}

StreamStats StreamMachine::stats() {
  StreamStats s;
  {
    MutexLock lock(&mu_);
    s = stats_;
  }
  s.messages_delivered = queue_.delivered();
  return s;
}

void StreamMachine::OnConnectionDraining(std::uint64_t connection_id,
                                         absl::string_view why) {
  // Asked before the lock: the source takes its own (see SpreadShare).
  const absl::optional<double> share =
      settings_->migration_jitter > absl::ZeroDuration()
          ? source_->SpreadShare(connection_id)
          : absl::nullopt;
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
      if (!drained_during_start_) {
        drained_during_start_ = std::make_unique<std::vector<std::uint64_t>>();
      }
      drained_during_start_->push_back(connection_id);
      ours = true;
    }
    if (!ours) return;
    std::string reason(why);
    Notify(w, [connection_id, reason](StreamObserver& o) {
      o.OnConnectionDraining(connection_id, reason);
    });
    MaybeMigrateLocked(/*now=*/false, w, share);
  }
  Flush(w);
}

StreamMachine::StreamMachine(std::shared_ptr<ConnectionSource> source,
                             std::unique_ptr<StreamParts> parts, Hooks hooks,
                             const ReconnectingStreamOptions& options,
                             std::shared_ptr<const StreamSettings> settings,
                             std::uint64_t seed, DoneFn on_done)
    : source_(std::move(source)),
      parts_(std::move(parts)),
      hooks_(std::move(hooks)),
      settings_(std::move(settings)),
      queue_(options.max_buffered_messages, parts_->store(), std::move(on_done),
             this, settings_->observer.get()),
      gate_(hooks_.initial_position, hooks_.spacing, options.gap_policy,
            static_cast<bool>(rare().trim_delivered)),
      cursors_(rare().cursor_of
                   ? std::make_unique<CursorReplay>(rare().initial_cursor)
                   : nullptr),
      // The budget's policy lives in the settings (aliasing: it holds them).
      budget_(std::shared_ptr<const ReopenBudget::Policy>(settings_,
                                                          &settings_->budget)),
      retry_(settings_->retry_budget.get()),
      gen_(seed) {
  if (hooks_.initial_position) {
    stats_.has_last_seq = true;
    stats_.last_delivered_seq = *hooks_.initial_position;
  }
}

std::weak_ptr<ConnectionSource::DrainListener> StreamMachine::WeakListener() {
  return std::weak_ptr<ConnectionSource::DrainListener>(
      std::static_pointer_cast<ConnectionSource::DrainListener>(
          this->shared_from_this()));
}

void StreamMachine::Flush(Work& w) {
  // One gate check per call: an observer call may destroy the stream,
  // and nothing runs after that.
  for (const std::function<void()>& call : w.user) queue_.Callout(call);
  w.user.clear();
  w.internal.Run();
  queue_.Drain();
}

void StreamMachine::RecordLater(BreakerGate::Ticket& ticket, Outcome outcome,
                                absl::Status cause, Work& w) {
  if (!ticket.valid()) return;
  // Moving leaves `ticket` empty.
  auto held = std::make_shared<BreakerGate::Ticket>(std::move(ticket));
  auto self = this->shared_from_this();
  w.internal.Add([self, held, outcome, cause = std::move(cause)] {
    self->settings_->breaker.Record(std::move(*held), outcome, cause);
  });
}

void StreamMachine::GiveUpLocked(const absl::Status& gave_up, Work& w) {
  Notify(w, [gave_up](StreamObserver& o) { o.OnGaveUp(gave_up); });
  EndLocked(gave_up, StreamEnd::kGaveUp, w);
}

void StreamMachine::CancelLocked(Work& w) {
  if (phase_ == Phase::kFinishing) return;
  queue_.Clear();
  EndLocked(absl::CancelledError("tether: stream cancelled by the client"),
            StreamEnd::kCancelled, w);
}

void StreamMachine::EndLocked(const absl::Status& status, Work& w) {
  EndLocked(status, status.ok() ? StreamEnd::kFinished : StreamEnd::kFailed, w);
}

void StreamMachine::EndLocked(const absl::Status& status, StreamEnd how,
                              Work& w) {
  if (phase_ == Phase::kFinishing) return;
  phase_ = Phase::kFinishing;
  final_ = status;
  Notify(w, [status, how](StreamObserver& o) { o.OnStreamEnded(status, how); });
  reopen_timer_.Cancel(*settings_->clock);
  retry_.Release(settings_->clock->Now());
  handoff_timer_.Cancel(*settings_->clock);
  migration_timer_.Cancel(*settings_->clock);
  if (resyncs_) {
    resyncs_->timer.Cancel(*settings_->clock);
    resyncs_->deadline.Cancel(*settings_->clock);
  }
  CancelAttemptLocked(current_, w);
  CancelAttemptLocked(old_, w);
  if (rare().on_end_decided) rare().on_end_decided();
  MaybeFinalizeLocked();
}

void StreamMachine::MaybeFinalizeLocked() {
  if (finalized_ || phase_ != Phase::kFinishing) return;
  if (live_attempts_ > 0 || starting_) return;
  finalized_ = true;
  queue_.Close(final_);
}

void StreamMachine::ArmLocked(TimerSlot& slot, absl::Duration delay,
                              TimerFn on_fire) {
  ArmSlotLocked(slot, delay, [on_fire](StreamMachine& self, Work& w) {
    (self.*on_fire)(w);
  });
}

void StreamMachine::ArmLocked(const std::shared_ptr<AttemptRec>& rec,
                              TimerSlot AttemptRec::*slot, absl::Duration delay,
                              AttemptTimerFn on_fire) {
  std::weak_ptr<StreamMachine> weak = this->shared_from_this();
  std::weak_ptr<AttemptRec> weak_rec = rec;
  ((*rec).*slot)
      .Arm(*settings_->clock, delay,
           [weak, weak_rec, slot, on_fire](TimerSlot::Shot shot) {
             auto self = weak.lock();
             auto r = weak_rec.lock();
             if (!self || !r) return;
             self->OnTimer([&](Work& w) {
               if (((*r).*slot).Claim(shot)) (self.get()->*on_fire)(r, w);
             });
           });
}

}  // namespace internal
}  // namespace tether
