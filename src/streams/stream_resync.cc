// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Resync: the app's `resync` on the stream's pool, its epoch and deadline.
#include "policies/spread_order.h"
#include "streams/stream_machine.h"

namespace tether {
namespace internal {

void StreamMachine::BeginResyncLocked(const AttemptRec& asking,
                                      const absl::Status& why, Work& w) {
  if (phase_ == Phase::kFinishing || phase_ == Phase::kResyncing) return;
  if (!resyncs_) resyncs_ = std::make_unique<Resyncs>();
  Resyncs& r = *resyncs_;
  // An attempt that was healthy for the whole time bound before it asked
  // is no loop (a quiet watch that reconnects long after its last item and
  // finds its position compacted away): the count starts over.
  if (asking.healthy && settings_->max_time != absl::InfiniteDuration() &&
      settings_->clock->Now() - asking.started >= settings_->max_time) {
    r.without_progress = 0;
  }
  absl::Duration delay = absl::ZeroDuration();
  if (r.without_progress > 0) {
    const absl::Time now = settings_->clock->Now();
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
    if (r.without_progress >= budget_.max_attempts()) {
      GiveUpLocked(ReopenBudget::GaveUpWith(
                       why, absl::StrCat(r.without_progress,
                                         " resyncs without a new item")),
                   w);
      return;
    }
    delay = *d;
  }
  // Streams told to resync together (a compaction) list as a ramp: the
  // pool places each in the window, evenly.
  if (settings_->resync_jitter > absl::ZeroDuration()) {
    delay += PointIn(settings_->resync_jitter,
                     settings_->resync_pool->NextSpreadShare(gen_.Unit()));
  }
  ++r.without_progress;  // at most max_attempts (given up above)
  phase_ = Phase::kResyncing;
  ++resync_epoch_;
  r.why = why;
  reopen_timer_.Cancel(*settings_->clock);
  handoff_timer_.Cancel(*settings_->clock);
  migration_timer_.Cancel(*settings_->clock);
  CancelAttemptLocked(current_, w);
  CancelAttemptLocked(old_, w);
  current_.reset();
  old_.reset();
  if (delay > absl::ZeroDuration()) {
    Notify(w, [delay, why](StreamObserver& o) { o.OnBackoff(delay, why); });
    ArmLocked(r.timer, delay, &StreamMachine::PostResyncLocked);
  } else {
    PostResyncLocked(w);
  }
  // A resync that never calls `done` (a listing that hangs) must not hold
  // the stream for ever: it ends once the resync has taken the time bound.
  if (settings_->max_time != absl::InfiniteDuration()) {
    ArmLocked(r.deadline, delay + settings_->max_time,
              &StreamMachine::OnResyncTimedOutLocked);
  }
}

void StreamMachine::PostResyncLocked(Work& w) {
  std::weak_ptr<StreamMachine> weak = this->shared_from_this();
  const std::uint64_t epoch = resync_epoch_;
  w.internal.Add([weak, epoch, pool = settings_->resync_pool] {
    pool->RunHeld([weak, epoch](std::function<void()> release) {
      if (auto self = weak.lock()) {
        self->CallResync(epoch, std::move(release));
      } else {
        release();
      }
    });
  });
}

void StreamMachine::OnResyncTimedOutLocked(Work& w) {
  if (phase_ != Phase::kResyncing) return;
  phase_ = Phase::kRunning;
  GiveUpLocked(absl::DeadlineExceededError(absl::StrCat(
                   "tether: resync did not call done within "
                   "max_time_without_progress (",
                   absl::FormatDuration(settings_->max_time),
                   "); resync was needed because: ", resyncs_->why.ToString())),
               w);
}

namespace {

// The worker a resync holds, given back when its `done` is called or the
// last copy of it is dropped.
class ResyncHold {
 public:
  explicit ResyncHold(std::function<void()> release)
      : release_(std::move(release)) {}
  ResyncHold(const ResyncHold&) = delete;
  ResyncHold& operator=(const ResyncHold&) = delete;
  ~ResyncHold() { release_(); }
  void Release() { release_(); }  // the pool's release is idempotent

 private:
  const std::function<void()> release_;
};

}  // namespace

void StreamMachine::CallResync(std::uint64_t epoch,
                               std::function<void()> release) {
  bool current;
  {
    MutexLock lock(&mu_);
    current = phase_ == Phase::kResyncing && epoch == resync_epoch_;
  }
  if (!current) {
    release();
    return;
  }
  std::weak_ptr<StreamMachine> weak = this->shared_from_this();
  auto once = std::make_shared<std::atomic<bool>>(false);
  auto hold = std::make_shared<ResyncHold>(std::move(release));
  ResyncDone done = [weak, epoch, once, hold](absl::StatusOr<std::uint64_t> r) {
    if (once->exchange(true)) return;
    if (auto self = weak.lock()) self->OnResyncDone(epoch, std::move(r));
    hold->Release();
  };
  hold.reset();  // only `done` keeps it now
  try {
    rare().resync(done);
  } catch (...) {
    done(CallbackThrew("resync", std::current_exception()));
  }
}

void StreamMachine::OnResyncDone(std::uint64_t epoch,
                                 absl::StatusOr<std::uint64_t> r) {
  auto self = this->shared_from_this();
  Work w;
  {
    MutexLock lock(&mu_);
    if (phase_ != Phase::kResyncing || epoch != resync_epoch_) return;
    resyncs_->deadline.Cancel(*settings_->clock);
    if (!r.ok()) {
      phase_ = Phase::kRunning;
      EndLocked(r.status(), w);
    } else {
      const std::uint64_t after = *r;
      gate_.Reset(after);
      stats_.has_last_seq = true;
      stats_.last_delivered_seq = after;
      ++stats_.resyncs;
      absl::Status why = resyncs_->why;
      Notify(w, [why, after](StreamObserver& o) { o.OnResync(why, after); });
      phase_ = Phase::kRunning;
      BeginStartLocked(AttemptReason::kResync, w);
    }
  }
  Flush(w);
}

}  // namespace internal
}  // namespace tether
