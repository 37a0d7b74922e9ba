// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Admitting a message: resync triggers, positions and cursors, trimming,
// the hold, the write a bidi response acknowledges, then the delivery queue.
#include "streams/stream_machine.h"

namespace tether {
namespace internal {

bool StreamMachine::OnMessage(const std::shared_ptr<AttemptRec>& rec,
                              void* response) {
  absl::optional<Position> pos;
  absl::optional<std::string> cursor;
  AckMatch ack;
  bool notice = false;
  bool resync = false;
  absl::Status threw;
  const char* fn = "is_drain_notice";
  try {
    if (rare().drain_notice) notice = parts_->IsDrainNotice(response);
    fn = "resync_on_message";
    if (!notice && rare().resync_on_message) {
      resync = parts_->ResyncOnMessage(response);
    }
    const bool positioned = !notice && !resync;  // a notice carries none
    if (positioned && hooks_.position_of) {
      fn = hooks_.position_name;
      pos = parts_->PositionOf(response);
    } else if (positioned && rare().cursor_of) {
      fn = "cursor_of";
      cursor = parts_->CursorOf(response);
    }
    if (positioned && rare().acks) {
      fn = "acknowledges";
      ack = rare().acks->Match(response);
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
      if (!rec->running() || phase_ == Phase::kFinishing) {
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
        held_.reset(new Held{
            *pos, ack,
            std::shared_ptr<void>(parts_->NewMessage(response),
                                  parts_->message_deleter())});
        more = false;
      } else {
        more = AcceptLocked(rec, pos, cursor, trimmed_at, response, ack,
                            &trim_at, w);
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

bool StreamMachine::OnNoticeLocked(const std::shared_ptr<AttemptRec>& rec,
                                   void* response, Work& w) {
  ++stats_.drain_notices;
  if (settings_->stall_timeout > absl::ZeroDuration()) {
    rec->last_activity = settings_->clock->Now();
  }
  AttemptInfo info = rec->info;
  Notify(w, [info](StreamObserver& o) { o.OnDrainNotice(info); });
  const bool first = !rec->noticed;
  rec->noticed = true;
  if (first && rec == current_) MoveOnNoticeLocked(w);
  return rare().deliver_drain_notice ? PushLocked(rec, response) : true;
}

void StreamMachine::MoveOnNoticeLocked(Work& w) {
  if (phase_ != Phase::kRunning || starting_ || !settings_->migrate_on_drain ||
      migration_timer_.armed()) {
    return;
  }
  if (!notice_pace_) notice_pace_ = std::make_unique<NoticePace>();
  const absl::Duration wait = notice_pace_->Take(settings_->clock->Now());
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

bool StreamMachine::AcceptLocked(const std::shared_ptr<AttemptRec>& rec,
                                 const absl::optional<Position>& pos,
                                 const absl::optional<std::string>& cursor,
                                 absl::optional<std::uint64_t> trimmed_at,
                                 void* response, const AckMatch& ack,
                                 absl::optional<std::uint64_t>* trim_at,
                                 Work& w) {
  if (settings_->stall_timeout > absl::ZeroDuration())
    rec->last_activity = settings_->clock->Now();
  if (!rec->got_message) {
    rec->got_message = true;
    AttemptInfo info = rec->info;
    absl::Duration since = settings_->clock->Now() - rec->started;
    Notify(w,
           [info, since](StreamObserver& o) { o.OnFirstMessage(info, since); });
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
      Notify(w, [expected, got](StreamObserver& o) { o.OnGap(expected, got); });
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
        ResetResyncCountLocked();
        budget_.OnProgress();
        if (!hooks_.deliver_progress) return true;
        break;
      case PositionGate::Verdict::kDeliver:
        if (pos->kind() == Position::Kind::kNone) {
          // A control message is delivered but is no progress: a server
          // that answers every attempt with one and then fails (or asks
          // for a resync) still spends the budget.
          return AdmitAckLocked(ack, w) ? PushLocked(rec, response) : true;
        }
        stats_.has_last_seq = true;
        stats_.last_delivered_seq = gate_.last();
        ResetResyncCountLocked();
        break;
    }
  } else if (rare().cursor_of && cursor) {
    if (cursors_->IsReplay(rec->catchup, *cursor)) {
      ++stats_.duplicates_dropped;
      Notify(w, [](StreamObserver& o) { o.OnDuplicateDropped(0, 0); });
      return true;
    }
    RecordCursorLocked(*cursor);
    ResetResyncCountLocked();
  }
  if (!AdmitAckLocked(ack, w)) return true;
  rec->progressed = true;
  budget_.OnProgress();
  return PushLocked(rec, response);
}

bool StreamMachine::AdmitAckLocked(const AckMatch& ack, Work& w) {
  if (!rare().acks || rare().acks->Admit(ack, w.internal)) return true;
  ++stats_.duplicates_dropped;
  Notify(w, [](StreamObserver& o) { o.OnDuplicateDropped(0, 0); });
  return false;
}

bool StreamMachine::PushLocked(const std::shared_ptr<AttemptRec>& rec,
                               void* response) {
  if (!queue_.Push(response)) {
    rec->paused = true;
    return false;
  }
  return true;
}

void StreamMachine::RecordCursorLocked(const std::string& cursor) {
  std::uint64_t keep_after = CursorReplay::kKeepNone;
  for (const AttemptRec* r : {current_.get(), old_.get()}) {
    if (r && r->live && r->catchup.active) {
      keep_after = std::min(keep_after, r->catchup.from);
    }
  }
  cursors_->Delivered(cursor, keep_after, starting_);
}

void StreamMachine::OnQueueSpace() {
  std::vector<std::shared_ptr<Attempt>> resume;
  {
    MutexLock lock(&mu_);
    for (const std::shared_ptr<AttemptRec>& rec : {current_, old_}) {
      if (rec && rec->running() && rec->paused && rec->handle) {
        rec->paused = false;
        resume.push_back(rec->handle);
      }
    }
  }
  for (auto& h : resume) h->Resume();
}

void StreamMachine::OnCallbackError(absl::Status status) {
  auto self = this->shared_from_this();
  Work w;
  {
    MutexLock lock(&mu_);
    queue_.Clear();
    EndLocked(std::move(status), w);
  }
  Flush(w);
}

}  // namespace internal
}  // namespace tether
