// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: the state machine behind `ReconnectingStream`. It knows nothing of
// gRPC; it talks to a `ConnectionSource` and an `AttemptFactory`.
#ifndef TETHER_INTERNAL_STREAM_CORE_H_
#define TETHER_INTERNAL_STREAM_CORE_H_

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/random/distributions.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "tether/backoff.h"
#include "tether/classification.h"
#include "tether/clock.h"
#include "tether/internal/breaker_gate.h"
#include "tether/observer.h"
#include "tether/stream_options.h"
#include "tether/transport.h"

namespace tether {
namespace internal {

// Work decided under the stream's lock and done after it is released: calls
// into attempts and the factory (`internal`), calls to the observer (`user`),
// and whether this thread must run the delivery loop.
struct Pending {
  std::vector<std::function<void()>> internal;
  std::vector<std::function<void()>> user;
  bool deliver = false;
};

// Marks the stream whose user callbacks this thread is running, so that a
// stream destroyed from inside its own callback does not wait for itself.
inline const void*& CurrentCalloutStream() {
  thread_local const void* stream = nullptr;
  return stream;
}

// The state machine of one stream.
//
// Locking: one mutex guards all state. Nothing outside the stream is called
// with it held except the `ConnectionSource` (whose contract allows it), the
// clock's `RunAfter`/`Cancel` and the user's pure `sequence_of`/`resume_after`
// functions. Attempts, the factory, the observer and the app's callbacks are
// called after it is released (see `Pending`).
//
// Delivery: messages go into `ready_` in sequence order. In callback mode one
// thread at a time (the one that finds nobody delivering) drains it into
// `on_message`, then calls `on_done` last. In reader mode `Read` drains it.
// Reading pauses while `ready_` is full and resumes as it empties.
template <class Request, class Response>
class StreamCore final
    : public ConnectionSource::DrainListener,
      public std::enable_shared_from_this<StreamCore<Request, Response>> {
 public:
  using SequenceFn =
      std::function<absl::optional<std::uint64_t>(const Response&)>;
  using ResumeFn = std::function<void(Request&, std::uint64_t)>;
  using MessageFn = std::function<void(Response&&)>;
  using DoneFn = std::function<void(const absl::Status&)>;

  static absl::StatusOr<std::shared_ptr<StreamCore>> Create(
      std::shared_ptr<ConnectionSource> source,
      std::shared_ptr<AttemptFactory<Request, Response>> factory,
      Request request, SequenceFn sequence_of, ResumeFn resume_after,
      absl::optional<std::uint64_t> initial_last_seq,
      ReconnectingStreamOptions options, MessageFn on_message, DoneFn on_done) {
    std::unique_ptr<BackoffPolicy> backoff;
    if (options.backoff) {
      backoff = options.backoff->Clone();
    } else {
      auto made = ExponentialBackoff::Create(ExponentialBackoffOptions());
      if (!made.ok()) return made.status();
      backoff = *std::move(made);
    }
    if (!options.clock) {
      options.clock = std::shared_ptr<Clock>(&SystemClock(), [](Clock*) {});
    }
    if (!options.classifier) options.classifier = DefaultClassify;
    std::uint64_t seed = options.random_seed;
    if (seed == 0) {
      absl::BitGen entropy;
      seed = absl::Uniform<std::uint64_t>(entropy);
    }
    return std::shared_ptr<StreamCore>(new StreamCore(
        std::move(source), std::move(factory), std::move(request),
        std::move(sequence_of), std::move(resume_after), initial_last_seq,
        std::move(options), std::move(backoff), seed, std::move(on_message),
        std::move(on_done)));
  }

  void StartFirst() {
    Pending p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      progress_anchor_ = clock_->Now();
      StartAttemptLocked(AttemptReason::kFirst, p);
    }
    Flush(p);
  }

  bool Read(Response* out) {
    Pending p;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !ready_.empty() || final_ready_; });
      if (ready_.empty()) {
        phase_ = Phase::kDone;
        return false;
      }
      *out = std::move(ready_.front());
      ready_.pop_front();
      ++stats_.messages_delivered;
      ResumePausedLocked(p);
    }
    Flush(p);
    return true;
  }

  absl::Status Finish() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return final_ready_; });
    phase_ = Phase::kDone;
    return final_;
  }

  void Cancel() {
    Pending p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      CancelLocked(p);
    }
    Flush(p);
  }

  // Cancels, stops every later callback, and waits for the ones running on
  // other threads.
  void Detach() {
    Pending p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      CancelLocked(p);
      detached_ = true;
    }
    Flush(p);
    std::unique_lock<std::mutex> lock(mu_);
    const bool inside = CurrentCalloutStream() == this;
    cv_.wait(lock, [&] {
      const bool delivering_elsewhere =
          delivering_ && deliverer_ != std::this_thread::get_id();
      return !delivering_elsewhere && callouts_ <= (inside ? 1 : 0);
    });
  }

  StreamStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  void OnConnectionDraining(std::uint64_t connection_id,
                            absl::string_view why) override {
    Pending p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      draining_.insert(connection_id);
      std::string reason(why);
      Notify(p, [connection_id, reason](StreamObserver& o) {
        o.OnConnectionDraining(connection_id, reason);
      });
      if (migrate_on_drain_ && phase_ == Phase::kRunning && current_ &&
          current_->live && !current_->cancel_requested &&
          current_->info.connection_id == connection_id &&
          !(old_ && old_->live)) {
        if (migration_jitter_ > absl::ZeroDuration()) {
          // Spread the moves of many streams leaving one connection.
          absl::Duration delay = absl::Seconds(
              absl::Uniform(absl::IntervalClosedOpen, gen_, 0.0,
                            absl::ToDoubleSeconds(migration_jitter_)));
          std::weak_ptr<StreamCore> weak = this->shared_from_this();
          clock_->Cancel(handoff_timer_);
          handoff_timer_ = clock_->RunAfter(delay, [weak] {
            if (auto self = weak.lock()) self->OnMigrationRetry();
          });
        } else {
          StartMigrationLocked(p);
        }
      }
    }
    Flush(p);
  }

 private:
  enum class Phase { kRunning, kBackoff, kFinishing, kDone };

  struct AttemptRec {
    AttemptInfo info;
    std::shared_ptr<Attempt> handle;
    absl::Time started;
    absl::optional<BreakerGate::Ticket> ticket;
    bool live = true;  // OnDone not seen yet
    bool cancel_requested = false;
    bool got_message = false;
    bool progressed = false;
    bool paused = false;
    bool has_seq = false;
    std::uint64_t last_seq = 0;
  };

  class Listener final : public AttemptListener<Response> {
   public:
    Listener(std::shared_ptr<StreamCore> core, std::shared_ptr<AttemptRec> rec)
        : core_(std::move(core)), rec_(std::move(rec)) {}
    bool OnMessage(Response&& response) override {
      return core_->OnMessage(rec_, std::move(response));
    }
    // Keeps the stream alive until the attempt drops its listener: the
    // attempt decides on which thread that last release happens (never a
    // gRPC callback thread; see GrpcReadAttempt::OnDone). The stream drops
    // its handle on the attempt in OnAttemptDone, so no cycle remains.
    void OnDone(const absl::Status& status) override {
      core_->OnAttemptDone(rec_, status);
    }

   private:
    std::shared_ptr<StreamCore> core_;
    std::shared_ptr<AttemptRec> rec_;
  };

  StreamCore(std::shared_ptr<ConnectionSource> source,
             std::shared_ptr<AttemptFactory<Request, Response>> factory,
             Request request, SequenceFn sequence_of, ResumeFn resume_after,
             absl::optional<std::uint64_t> initial_last_seq,
             ReconnectingStreamOptions options,
             std::unique_ptr<BackoffPolicy> backoff, std::uint64_t seed,
             MessageFn on_message, DoneFn on_done)
      : source_(std::move(source)),
        factory_(std::move(factory)),
        request_(std::move(request)),
        sequence_of_(std::move(sequence_of)),
        resume_after_(std::move(resume_after)),
        observer_(std::move(options.observer)),
        clock_(std::move(options.clock)),
        classifier_(std::move(options.classifier)),
        backoff_(std::move(backoff)),
        gate_(std::move(options.breaker), clock_),
        gen_(seed),
        on_message_(std::move(on_message)),
        on_done_(std::move(on_done)),
        callback_mode_(static_cast<bool>(on_message_)),
        migrate_on_drain_(options.migrate_on_drain),
        fail_fast_on_open_breaker_(options.fail_fast_on_open_breaker),
        gap_policy_(options.gap_policy),
        progress_jitter_(options.reopen_after_progress_jitter),
        max_attempts_(options.max_attempts_without_progress),
        max_time_(options.max_time_without_progress),
        handoff_timeout_(options.migration_handoff_timeout),
        migration_jitter_(options.migration_jitter),
        max_buffered_(options.max_buffered_messages) {
    if (initial_last_seq) {
      has_last_ = true;
      last_ = *initial_last_seq;
      stats_.has_last_seq = true;
      stats_.last_delivered_seq = last_;
    }
  }

  std::weak_ptr<ConnectionSource::DrainListener> WeakListener() {
    return std::weak_ptr<ConnectionSource::DrainListener>(
        std::static_pointer_cast<ConnectionSource::DrainListener>(
            this->shared_from_this()));
  }

  template <class F>
  void Notify(Pending& p, F&& f) {
    if (!observer_) return;
    p.user.push_back(
        [obs = observer_, f = std::forward<F>(f)]() mutable { f(*obs); });
  }

  // --- Attempts -----------------------------------------------------------

  void StartAttemptLocked(AttemptReason reason, Pending& p) {
    // The breaker (if any) is asked first: while it is open the stream waits
    // for it instead of spinning on connections.
    absl::optional<BreakerGate::Ticket> ticket;
    if (gate_.enabled()) {
      auto t = gate_.Acquire();
      if (!t.ok()) {
        if (reason == AttemptReason::kMigration) return;  // stay put
        if (reason == AttemptReason::kFirst && fail_fast_on_open_breaker_) {
          EndLocked(t.status(), p);
          return;
        }
        WaitForBreakerLocked(t.status(), p);
        return;
      }
      ticket = *std::move(t);
    }
    absl::StatusOr<ConnectionPick> pick = source_->Pick(WeakListener());
    if (!pick.ok()) {
      if (ticket) {
        RecordLater(ticket,
                    BreakerGate::IsConnectFailure(pick.status())
                        ? BreakerGate::kFailure
                        : BreakerGate::kIgnored,
                    pick.status(), p);
      }
      if (reason == AttemptReason::kMigration) return;  // stay put
      ScheduleReopenLocked(pick.status(), /*progressed=*/false, p);
      return;
    }
    auto rec = std::make_shared<AttemptRec>();
    rec->ticket = std::move(ticket);
    rec->started = clock_->Now();
    rec->info.attempt = ++stats_.attempts;
    rec->info.connection_id = pick->connection_id;
    rec->info.reason = reason;
    Request request = request_;
    if (reason != AttemptReason::kFirst && sequence_of_ && has_last_) {
      resume_after_(request, last_);
      rec->info.resumed = true;
      rec->info.resume_after_seq = last_;
    }
    if (reason == AttemptReason::kMigration) {
      old_ = current_;
      ++stats_.migrations;
    }
    current_ = rec;
    phase_ = Phase::kRunning;
    AttemptInfo info = rec->info;
    Notify(p, [info](StreamObserver& o) { o.OnAttemptStarted(info); });
    auto self = this->shared_from_this();
    p.internal.push_back(
        [self, rec, pick = *std::move(pick), request = std::move(request)]() {
          auto listener = std::make_shared<Listener>(self, rec);
          std::shared_ptr<Attempt> handle =
              self->factory_->Start(pick, request, std::move(listener));
          self->OnAttemptHandle(rec, std::move(handle));
        });
  }

  void OnAttemptHandle(const std::shared_ptr<AttemptRec>& rec,
                       std::shared_ptr<Attempt> handle) {
    bool cancel = false;
    bool resume = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!rec->live || !handle) return;
      rec->handle = handle;
      if (rec->cancel_requested) {
        cancel = true;
      } else if (rec->paused && ready_.size() < max_buffered_) {
        rec->paused = false;
        resume = true;
      }
    }
    if (cancel) handle->Cancel();
    if (resume) handle->Resume();
  }

  // Records a breaker outcome after the stream's lock is released: the
  // breaker calls its listeners and observer inline, and those may call back
  // into this stream.
  void RecordLater(absl::optional<BreakerGate::Ticket>& ticket, Outcome outcome,
                   absl::Status cause, Pending& p) {
    if (!ticket) return;
    auto held = std::make_shared<BreakerGate::Ticket>(*std::move(ticket));
    ticket.reset();
    p.internal.push_back([this, held, outcome, cause = std::move(cause)] {
      gate_.Record(std::move(*held), outcome, cause);
    });
  }

  void CancelAttemptLocked(const std::shared_ptr<AttemptRec>& rec, Pending& p) {
    if (!rec || !rec->live || rec->cancel_requested) return;
    rec->cancel_requested = true;
    if (rec->handle) {
      p.internal.push_back([h = rec->handle] { h->Cancel(); });
    }  // else OnAttemptHandle cancels it
  }

  void StartMigrationLocked(Pending& p) {
    std::shared_ptr<AttemptRec> before = current_;
    StartAttemptLocked(AttemptReason::kMigration, p);
    if (current_ == before) return;  // no connection or breaker: stay put
    std::weak_ptr<StreamCore> weak = this->shared_from_this();
    std::weak_ptr<AttemptRec> fresh = current_;
    clock_->Cancel(handoff_timer_);
    handoff_timer_ = clock_->RunAfter(handoff_timeout_, [weak, fresh] {
      if (auto self = weak.lock()) self->OnHandoffTimer(fresh.lock());
    });
  }

  void OnHandoffTimer(const std::shared_ptr<AttemptRec>& fresh) {
    Pending p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (fresh && current_ == fresh && old_) CancelAttemptLocked(old_, p);
    }
    Flush(p);
  }

  bool OnMessage(const std::shared_ptr<AttemptRec>& rec, Response&& response) {
    Pending p;
    bool more = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!rec->live || rec->cancel_requested || phase_ >= Phase::kFinishing) {
        return false;
      }
      if (!rec->got_message) {
        rec->got_message = true;
        AttemptInfo info = rec->info;
        absl::Duration since = clock_->Now() - rec->started;
        Notify(p, [info, since](StreamObserver& o) {
          o.OnFirstMessage(info, since);
        });
        // The replacement is live: hand off from the draining attempt.
        if (rec == current_ && old_) CancelAttemptLocked(old_, p);
        RecordLater(rec->ticket, BreakerGate::kSuccess, absl::OkStatus(), p);
      }
      more = AcceptLocked(rec, std::move(response), p);
    }
    Flush(p);
    return more;
  }

  // Applies the sequence rules and queues the message. Returns whether the
  // attempt may read on.
  bool AcceptLocked(const std::shared_ptr<AttemptRec>& rec, Response&& response,
                    Pending& p) {
    if (sequence_of_) {
      absl::optional<std::uint64_t> seq = sequence_of_(response);
      if (!seq) {
        EndLocked(absl::InternalError(absl::StrCat(
                      "tether: attempt ", rec->info.attempt,
                      " received a message without a sequence number (after "
                      "seq ",
                      last_, "); the stream cannot resume safely")),
                  p);
        return false;
      }
      if (rec->has_seq && *seq < rec->last_seq) {
        EndLocked(absl::InternalError(absl::StrCat(
                      "tether: sequence numbers went backwards within attempt ",
                      rec->info.attempt, ": seq ", *seq, " after seq ",
                      rec->last_seq)),
                  p);
        return false;
      }
      rec->has_seq = true;
      rec->last_seq = *seq;
      if (has_last_ && *seq <= last_) {
        ++stats_.duplicates_dropped;
        std::uint64_t s = *seq, l = last_;
        Notify(p, [s, l](StreamObserver& o) { o.OnDuplicateDropped(s, l); });
        return true;
      }
      if (has_last_ && *seq > last_ + 1) {
        ++stats_.gaps;
        std::uint64_t expected = last_ + 1, got = *seq;
        Notify(p,
               [expected, got](StreamObserver& o) { o.OnGap(expected, got); });
        if (gap_policy_ == GapPolicy::kFail) {
          EndLocked(absl::DataLossError(
                        absl::StrCat("tether: sequence gap: expected seq ",
                                     expected, ", got ", got)),
                    p);
          return false;
        }
      }
      has_last_ = true;
      last_ = *seq;
      stats_.has_last_seq = true;
      stats_.last_delivered_seq = last_;
    }
    // Progress: the budgets start over.
    rec->progressed = true;
    attempts_without_progress_ = 0;
    progress_anchor_ = clock_->Now();
    backoff_->Reset();
    ready_.push_back(std::move(response));
    MarkDeliverableLocked(p);
    if (ready_.size() >= max_buffered_) {
      rec->paused = true;
      return false;
    }
    return true;
  }

  void OnAttemptDone(const std::shared_ptr<AttemptRec>& rec,
                     const absl::Status& status) {
    Pending p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      rec->live = false;
      if (rec->handle) {
        p.internal.push_back([h = std::move(rec->handle)] {});
        rec->handle = nullptr;
      }
      source_->Release(rec->info.connection_id, WeakListener());
      const bool by_client = rec->cancel_requested;
      EndClass cls = EndClass::kOk;
      if (!by_client) {
        AttemptEnd end;
        end.status = status;
        end.received_messages = rec->got_message;
        cls = classifier_(end);
      }
      // No message arrived if the ticket is still here (the first message
      // records success).
      RecordLater(rec->ticket, BreakerGate::Classify(status, cls, by_client),
                  status, p);
      AttemptInfo info = rec->info;
      Notify(p, [info, status, cls, by_client](StreamObserver& o) {
        o.OnAttemptEnded(info, status, cls, by_client);
      });
      HandleEndLocked(rec, status, cls, by_client, p);
    }
    Flush(p);
  }

  void HandleEndLocked(const std::shared_ptr<AttemptRec>& rec,
                       const absl::Status& status, EndClass cls, bool by_client,
                       Pending& p) {
    if (phase_ >= Phase::kFinishing) {
      MaybeFinalizeLocked(p);
      return;
    }
    if (rec == old_) {
      old_.reset();
      return;
    }
    if (rec != current_ || by_client) return;
    if (cls == EndClass::kDrain && !draining_.count(rec->info.connection_id)) {
      source_->ReportDrainEnd(rec->info.connection_id, status);
    }
    if (old_ && old_->live) {
      // The replacement of a migration failed; the draining attempt still
      // runs, so fall back to it and try the move again later.
      current_ = std::move(old_);
      old_.reset();
      if (cls == EndClass::kOk || cls == EndClass::kPermanent) {
        EndLocked(cls == EndClass::kOk ? absl::OkStatus() : status, p);
        return;
      }
      if (!SpendBudgetLocked(status, p)) return;
      absl::Duration delay = backoff_->OnFailure(absl::BitGenRef(gen_));
      std::weak_ptr<StreamCore> weak = this->shared_from_this();
      clock_->Cancel(handoff_timer_);
      handoff_timer_ = clock_->RunAfter(delay, [weak] {
        if (auto self = weak.lock()) self->OnMigrationRetry();
      });
      return;
    }
    switch (cls) {
      case EndClass::kOk:
        EndLocked(absl::OkStatus(), p);
        return;
      case EndClass::kPermanent:
        EndLocked(status, p);
        return;
      case EndClass::kDrain:
      case EndClass::kTransient:
        ScheduleReopenLocked(status, rec->progressed, p);
        return;
    }
  }

  void OnMigrationRetry() {
    Pending p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (phase_ == Phase::kRunning && current_ && current_->live &&
          !current_->cancel_requested && !(old_ && old_->live) &&
          draining_.count(current_->info.connection_id)) {
        StartMigrationLocked(p);
      }
    }
    Flush(p);
  }

  // Counts one attempt without progress. Returns false (and ends the stream)
  // when the reopen budget is spent.
  bool SpendBudgetLocked(const absl::Status& last, Pending& p) {
    ++attempts_without_progress_;
    absl::Duration elapsed = clock_->Now() - progress_anchor_;
    if (attempts_without_progress_ >= max_attempts_ || elapsed >= max_time_) {
      absl::Status gave_up(
          last.code() == absl::StatusCode::kOk ? absl::StatusCode::kUnavailable
                                               : last.code(),
          absl::StrCat(last.message(), " (tether: gave up after ",
                       attempts_without_progress_,
                       " attempts without progress in ",
                       absl::FormatDuration(elapsed), ")"));
      Notify(p, [gave_up](StreamObserver& o) { o.OnGaveUp(gave_up); });
      EndLocked(gave_up, p);
      return false;
    }
    return true;
  }

  void ScheduleReopenLocked(const absl::Status& last, bool progressed,
                            Pending& p) {
    absl::Duration delay = absl::ZeroDuration();
    if (progressed) {
      if (progress_jitter_ > absl::ZeroDuration()) {
        delay = absl::Seconds(
            absl::Uniform(absl::IntervalClosedOpen, gen_, 0.0,
                          absl::ToDoubleSeconds(progress_jitter_)));
      }
    } else {
      if (!SpendBudgetLocked(last, p)) return;
      delay = backoff_->OnFailure(absl::BitGenRef(gen_));
      if (max_time_ != absl::InfiniteDuration()) {
        absl::Duration left = max_time_ - (clock_->Now() - progress_anchor_);
        delay = std::min(delay, left);
      }
    }
    ArmReopenTimerLocked(delay, last, p);
  }

  void ArmReopenTimerLocked(absl::Duration delay, const absl::Status& last,
                            Pending& p) {
    phase_ = Phase::kBackoff;
    Notify(p, [delay, last](StreamObserver& o) { o.OnBackoff(delay, last); });
    std::weak_ptr<StreamCore> weak = this->shared_from_this();
    Clock::TimerId id = ++timer_generation_;
    reopen_timer_ = clock_->RunAfter(delay, [weak, id] {
      if (auto self = weak.lock()) self->OnReopenTimer(id);
    });
    reopen_timer_generation_ = id;
  }

  void OnReopenTimer(Clock::TimerId generation) {
    Pending p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (phase_ != Phase::kBackoff || reopen_timer_generation_ != generation) {
        return;
      }
      reopen_timer_ = 0;
      StartAttemptLocked(AttemptReason::kReopen, p);
    }
    Flush(p);
  }

  // The breaker refused: wait until it may let a probe through, within the
  // reopen budget's time bound.
  void WaitForBreakerLocked(const absl::Status& refused, Pending& p) {
    // A refused permit is not an attempt: only the time bound applies.
    absl::Duration elapsed = clock_->Now() - progress_anchor_;
    if (elapsed >= max_time_) {
      absl::Status gave_up(
          absl::StatusCode::kUnavailable,
          absl::StrCat(refused.message(), " (tether: gave up after ",
                       absl::FormatDuration(elapsed), " without progress)"));
      Notify(p, [gave_up](StreamObserver& o) { o.OnGaveUp(gave_up); });
      EndLocked(gave_up, p);
      return;
    }
    absl::Duration delay = gate_.RetryDelay();
    if (max_time_ != absl::InfiniteDuration()) {
      delay = std::min(delay, max_time_ - elapsed);
    }
    ArmReopenTimerLocked(delay, refused, p);
  }

  // --- Ending -------------------------------------------------------------

  void CancelLocked(Pending& p) {
    if (phase_ >= Phase::kFinishing) return;
    ready_.clear();
    EndLocked(absl::CancelledError("tether: stream cancelled by the client"),
              p);
  }

  void EndLocked(const absl::Status& status, Pending& p) {
    if (phase_ >= Phase::kFinishing) return;
    phase_ = Phase::kFinishing;
    final_ = status;
    if (reopen_timer_ != 0) clock_->Cancel(reopen_timer_);
    reopen_timer_ = 0;
    clock_->Cancel(handoff_timer_);
    handoff_timer_ = 0;
    CancelAttemptLocked(current_, p);
    CancelAttemptLocked(old_, p);
    MaybeFinalizeLocked(p);
  }

  void MaybeFinalizeLocked(Pending& p) {
    if (final_ready_) return;
    if ((current_ && current_->live) || (old_ && old_->live)) return;
    final_ready_ = true;
    MarkDeliverableLocked(p);
  }

  // --- Delivery -----------------------------------------------------------

  void MarkDeliverableLocked(Pending& p) {
    if (!callback_mode_) {
      cv_.notify_all();
      return;
    }
    if (!delivering_) {
      delivering_ = true;
      p.deliver = true;
    }
  }

  void ResumePausedLocked(Pending& p) {
    if (ready_.size() >= max_buffered_) return;
    for (const std::shared_ptr<AttemptRec>& rec : {current_, old_}) {
      if (rec && rec->live && rec->paused && rec->handle) {
        rec->paused = false;
        p.internal.push_back([h = rec->handle] { h->Resume(); });
      }
    }
  }

  void DeliverLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    deliverer_ = std::this_thread::get_id();
    for (;;) {
      if (detached_) break;
      if (!ready_.empty()) {
        Response message = std::move(ready_.front());
        ready_.pop_front();
        ++stats_.messages_delivered;
        Pending p;
        ResumePausedLocked(p);
        lock.unlock();
        for (auto& f : p.internal) f();
        const void* saved = CurrentCalloutStream();
        CurrentCalloutStream() = this;
        on_message_(std::move(message));
        CurrentCalloutStream() = saved;
        lock.lock();
        continue;
      }
      if (final_ready_ && phase_ != Phase::kDone) {
        phase_ = Phase::kDone;
        absl::Status final_status = final_;
        lock.unlock();
        const void* saved = CurrentCalloutStream();
        CurrentCalloutStream() = this;
        on_done_(final_status);
        CurrentCalloutStream() = saved;
        lock.lock();
        continue;
      }
      break;
    }
    delivering_ = false;
    deliverer_ = std::thread::id();
    cv_.notify_all();
  }

  // Runs what was decided under the lock: observer calls first (so an
  // attempt's start is reported before anything it delivers), then calls
  // into attempts, then delivery.
  void Flush(Pending& p) {
    if (!p.user.empty()) {
      bool run = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!detached_) {
          run = true;
          ++callouts_;
        }
      }
      if (run) {
        const void* saved = CurrentCalloutStream();
        CurrentCalloutStream() = this;
        for (auto& f : p.user) f();
        CurrentCalloutStream() = saved;
        std::lock_guard<std::mutex> lock(mu_);
        --callouts_;
        cv_.notify_all();
      }
    }
    for (auto& f : p.internal) f();
    if (p.deliver) DeliverLoop();
  }

  // Immutable after construction.
  const std::shared_ptr<ConnectionSource> source_;
  const std::shared_ptr<AttemptFactory<Request, Response>> factory_;
  const Request request_;
  const SequenceFn sequence_of_;
  const ResumeFn resume_after_;
  const std::shared_ptr<StreamObserver> observer_;
  const std::shared_ptr<Clock> clock_;
  const Classifier classifier_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<BackoffPolicy> backoff_;
  BreakerGate gate_;
  std::mt19937_64 gen_;
  const MessageFn on_message_;
  const DoneFn on_done_;
  const bool callback_mode_;
  const bool migrate_on_drain_;
  const bool fail_fast_on_open_breaker_;
  const GapPolicy gap_policy_;
  const absl::Duration progress_jitter_;
  const int max_attempts_;
  const absl::Duration max_time_;
  const absl::Duration handoff_timeout_;
  const absl::Duration migration_jitter_;
  const std::size_t max_buffered_;

  Phase phase_ = Phase::kRunning;
  std::shared_ptr<AttemptRec> current_;
  std::shared_ptr<AttemptRec> old_;  // the draining attempt of a migration
  std::set<std::uint64_t> draining_;
  bool has_last_ = false;
  std::uint64_t last_ = 0;
  int attempts_without_progress_ = 0;
  absl::Time progress_anchor_;
  Clock::TimerId reopen_timer_ = 0;
  Clock::TimerId reopen_timer_generation_ = 0;
  Clock::TimerId timer_generation_ = 0;
  Clock::TimerId handoff_timer_ = 0;
  std::deque<Response> ready_;
  absl::Status final_;
  bool final_ready_ = false;
  bool delivering_ = false;
  std::thread::id deliverer_;
  bool detached_ = false;
  int callouts_ = 0;
  StreamStats stats_;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_STREAM_CORE_H_
