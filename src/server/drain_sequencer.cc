// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "server/drain_sequencer.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tether {
namespace internal {

absl::string_view DrainPhaseName(DrainPhase phase) {
  switch (phase) {
    case DrainPhase::kServing:
      return "serving";
    case DrainPhase::kUnready:
      return "unready";
    case DrainPhase::kNotice:
      return "notice";
    case DrainPhase::kGoaway:
      return "goaway";
    case DrainPhase::kEnding:
      return "ending";
    case DrainPhase::kFinished:
      return "finished";
  }
  return "unknown";
}

std::shared_ptr<DrainSequencer> DrainSequencer::Create(
    server::DrainOptions options, std::shared_ptr<ServerDriver> driver) {
  if (options.clock == nullptr) {
    // SystemClock() is never destroyed: hold it without owning it.
    options.clock = std::shared_ptr<Clock>(&SystemClock(), [](Clock*) {});
  }
  if (options.log_sink == nullptr) options.log_sink = StderrLogSink();
  return std::shared_ptr<DrainSequencer>(
      new DrainSequencer(std::move(options), std::move(driver)));
}

DrainSequencer::DrainSequencer(server::DrainOptions options,
                               std::shared_ptr<ServerDriver> driver)
    : options_(std::move(options)),
      driver_(std::move(driver)),
      clock_(*options_.clock) {}

std::unique_ptr<server::DrainCall> DrainSequencer::Register(
    server::DrainHooks hooks) {
  std::shared_ptr<DrainCallState> call;
  {
    MutexLock lock(&mu_);
    call = std::make_shared<DrainCallState>(++last_call_id_, std::move(hooks));
    // A handler still starting while the drain runs hears the news so far
    // at once; its hooks run from the clock's thread, never in here.
    bool posted = false;
    if (phase_ != DrainPhase::kFinished) open_.emplace(call->id(), call);
    if (phase_ >= DrainPhase::kNotice && call->MarkNoticeDue()) {
      ++report_.calls_noticed;
      calls_.Post([call] { call->RunNoticeHook(); });
      posted = true;
    }
    if (phase_ >= DrainPhase::kEnding &&
        call->MarkEndDue(options_.end_status)) {
      ++report_.calls_told_to_end;
      calls_.Post([call] { call->RunEndHook(); });
      posted = true;
    }
    if (posted) {
      std::weak_ptr<DrainSequencer> weak = weak_from_this();
      clock_.RunAfter(absl::ZeroDuration(), [weak] {
        if (auto self = weak.lock()) self->calls_.Run();
      });
    }
  }
  return std::unique_ptr<server::DrainCall>(
      new server::DrainCall(std::move(call), weak_from_this()));
}

void DrainSequencer::Unregister(const std::shared_ptr<DrainCallState>& call) {
  Deferred later;  // runs the queues once the lock is released
  RunQueuesLater(later);
  MutexLock lock(&mu_);
  open_.erase(call->id());
  // Every call that got the notice has left: no need to wait out the grace.
  if (phase_ == DrainPhase::kNotice && open_.empty() && !stopped_) {
    LogLocked(
        LogSeverity::kInfo,
        absl::StrCat("every registered call ended within ",
                     absl::FormatDuration(ElapsedLocked()), " of Begin()"));
    EnterGoawayLocked();
  }
}

bool DrainSequencer::Begin() {
  Deferred later;  // runs the queues once the lock is released
  RunQueuesLater(later);
  MutexLock lock(&mu_);
  if (phase_ != DrainPhase::kServing || stopped_) return false;
  phase_ = DrainPhase::kUnready;
  begun_at_ = clock_.Now();
  std::weak_ptr<DrainSequencer> weak = weak_from_this();
  bound_timer_ = clock_.RunAfter(HardBound(options_), [weak] {
    if (auto self = weak.lock()) self->OnHardBound();
  });
  DriveLocked([](ServerDriver& d) { d.SetNotServing(); });
  const absl::Duration window = options_.unready_window;
  LogLocked(LogSeverity::kInfo,
            absl::StrCat("step 1/4: health NOT_SERVING; serving on for ",
                         absl::FormatDuration(window),
                         " (unready_window); hard bound ",
                         absl::FormatDuration(HardBound(options_))));
  ObserveLocked([window](server::DrainObserver& o) { o.OnUnready(window); });
  if (window == absl::ZeroDuration()) {
    EnterNoticeLocked();
  } else {
    ArmLocked(DrainPhase::kUnready, window);
  }
  return true;
}

DrainPhase DrainSequencer::phase() const {
  MutexLock lock(&mu_);
  return phase_;
}

std::size_t DrainSequencer::open_calls() const {
  MutexLock lock(&mu_);
  return open_.size();
}

absl::optional<server::DrainReport> DrainSequencer::WaitFor(
    absl::Duration timeout) {
  // Bounded so that the chrono arithmetic cannot overflow; a year is "for
  // ever" here.
  const auto deadline =
      std::chrono::steady_clock::now() +
      absl::ToChronoNanoseconds(std::max(
          absl::ZeroDuration(), std::min(timeout, absl::Hours(24 * 365))));
  MutexLock lock(&mu_);
  while (!finished_) {
    if (finished_cv_.wait_until(mu_, deadline) == std::cv_status::timeout) {
      break;
    }
  }
  if (!finished_) return absl::nullopt;
  return report_;
}

void DrainSequencer::Stop() {
  MutexLock lock(&mu_);
  if (stopped_) return;
  stopped_ = true;
  if (step_timer_ != 0) clock_.Cancel(step_timer_);
  if (bound_timer_ != 0) clock_.Cancel(bound_timer_);
  step_timer_ = bound_timer_ = 0;
}

void DrainSequencer::ArmLocked(DrainPhase phase, absl::Duration delay) {
  if (step_timer_ != 0) clock_.Cancel(step_timer_);
  std::weak_ptr<DrainSequencer> weak = weak_from_this();
  // A firing for a phase the drain has left is ignored (`OnTimer`).
  step_timer_ = clock_.RunAfter(delay, [weak, phase] {
    if (auto self = weak.lock()) self->OnTimer(phase);
  });
}

void DrainSequencer::OnTimer(DrainPhase armed_in) {
  Deferred later;  // runs the queues once the lock is released
  RunQueuesLater(later);
  MutexLock lock(&mu_);
  if (stopped_ || phase_ != armed_in) return;
  step_timer_ = 0;
  switch (armed_in) {
    case DrainPhase::kUnready:
      EnterNoticeLocked();
      break;
    case DrainPhase::kNotice:
      EnterGoawayLocked();
      break;
    case DrainPhase::kGoaway:
      EnterEndingLocked();
      break;
    default:
      break;
  }
}

void DrainSequencer::EnterNoticeLocked() {
  phase_ = DrainPhase::kNotice;
  std::size_t told = 0;
  for (const auto& [id, call] : open_) {
    if (!call->MarkNoticeDue()) continue;
    ++told;
    PostNoticeLocked(call);
  }
  report_.calls_noticed += told;
  const absl::Duration grace = options_.notice_grace;
  LogLocked(
      LogSeverity::kInfo,
      absl::StrCat("step 2/4: drain notice to ", told,
                   " open calls; waiting up to ", absl::FormatDuration(grace),
                   " (notice_grace) for them to leave"));
  ObserveLocked([told](server::DrainObserver& o) { o.OnNotice(told); });
  if (open_.empty() || grace == absl::ZeroDuration()) {
    EnterGoawayLocked();
  } else {
    ArmLocked(DrainPhase::kNotice, grace);
  }
}

void DrainSequencer::EnterGoawayLocked() {
  phase_ = DrainPhase::kGoaway;
  const std::size_t open = open_.size();
  report_.calls_at_goaway = open;
  const absl::Duration deadline = options_.drain_deadline;
  std::weak_ptr<DrainSequencer> weak = weak_from_this();
  DriveLocked([deadline, weak](ServerDriver& d) {
    d.StartShutdown(deadline, [weak] {
      if (auto self = weak.lock()) self->OnShutdownReturned();
    });
  });
  LogLocked(
      LogSeverity::kInfo,
      absl::StrCat("step 3/4: Shutdown(now + ", absl::FormatDuration(deadline),
                   ") (drain_deadline): GOAWAY sent, new calls refused; ", open,
                   " registered calls open, told to end in ",
                   absl::FormatDuration(options_.goaway_grace),
                   " (goaway_grace)"));
  ObserveLocked([open, deadline](server::DrainObserver& o) {
    o.OnGoaway(open, deadline);
  });
  ArmLocked(DrainPhase::kGoaway, options_.goaway_grace);
}

void DrainSequencer::EnterEndingLocked() {
  phase_ = DrainPhase::kEnding;
  std::size_t told = 0;
  for (const auto& [id, call] : open_) {
    if (!call->MarkEndDue(options_.end_status)) continue;
    ++told;
    PostEndLocked(call);
  }
  report_.calls_told_to_end += told;
  DriveLocked([](ServerDriver& d) { d.EndHealthWatches(); });
  const grpc::Status status = options_.end_status;
  LogLocked(LogSeverity::kInfo,
            absl::StrCat("step 3/4: ", told,
                         " registered calls still open told to end with code ",
                         static_cast<int>(status.error_code()), " \"",
                         status.error_message(), "\"; health watches end"));
  ObserveLocked(
      [told, status](server::DrainObserver& o) { o.OnEndCalls(told, status); });
}

void DrainSequencer::OnShutdownReturned() {
  Deferred later;  // runs the queues once the lock is released
  RunQueuesLater(later);
  MutexLock lock(&mu_);
  if (finished_) {
    LogLocked(LogSeverity::kWarning,
              absl::StrCat("Server::Shutdown returned ",
                           absl::FormatDuration(ElapsedLocked()),
                           " after Begin(), after the hard bound"));
    return;
  }
  FinishLocked(/*stopped=*/true);
}

void DrainSequencer::OnHardBound() {
  Deferred later;  // runs the queues once the lock is released
  RunQueuesLater(later);
  MutexLock lock(&mu_);
  bound_timer_ = 0;
  if (finished_ || stopped_) return;
  FinishLocked(/*stopped=*/false);
}

void DrainSequencer::FinishLocked(bool stopped) {
  finished_ = true;
  phase_ = DrainPhase::kFinished;
  if (step_timer_ != 0) clock_.Cancel(step_timer_);
  if (bound_timer_ != 0) clock_.Cancel(bound_timer_);
  step_timer_ = bound_timer_ = 0;
  report_.server_stopped = stopped;
  report_.elapsed = ElapsedLocked();
  report_.calls_stuck = open_.size();
  finished_cv_.notify_all();
  const server::DrainReport report = report_;
  if (stopped) {
    LogLocked(
        LogSeverity::kInfo,
        absl::StrCat("step 4/4: server ", server::DrainReportToString(report)));
  } else {
    LogLocked(
        LogSeverity::kError,
        absl::StrCat("step 4/4: hard bound ",
                     absl::FormatDuration(HardBound(options_)),
                     " passed and Server::Shutdown has not returned: ",
                     report.calls_stuck,
                     " registered handlers never ended (gRPC cancelled every "
                     "call at the deadline); ",
                     server::DrainReportToString(report)));
  }
  ObserveLocked([report](server::DrainObserver& o) { o.OnFinished(report); });
}

void DrainSequencer::PostNoticeLocked(
    const std::shared_ptr<DrainCallState>& call) {
  calls_.Post([call] { call->RunNoticeHook(); });
}

void DrainSequencer::PostEndLocked(
    const std::shared_ptr<DrainCallState>& call) {
  calls_.Post([call] { call->RunEndHook(); });
}

void DrainSequencer::LogLocked(LogSeverity severity, std::string line) {
  std::shared_ptr<LogSink> sink = options_.log_sink;
  calls_.Post([sink, severity, line = std::move(line)] {
    sink->Write(severity, absl::StrCat("drain: ", line));
  });
}

void DrainSequencer::ObserveLocked(
    std::function<void(server::DrainObserver&)> event) {
  std::shared_ptr<server::DrainObserver> observer = options_.observer;
  if (observer == nullptr) return;
  calls_.Post([observer, event = std::move(event)] { event(*observer); });
}

void DrainSequencer::DriveLocked(std::function<void(ServerDriver&)> action) {
  std::shared_ptr<ServerDriver> driver = driver_;
  driver_calls_.Post([driver, action = std::move(action)] { action(*driver); });
}

void DrainSequencer::RunQueuesLater(Deferred& later) {
  // The driver's queue first: a step's action reaches the server before
  // the observer and the log hear of it.
  later.Add([this] {
    driver_calls_.Run();
    calls_.Run();
  });
}

absl::Duration DrainSequencer::ElapsedLocked() {
  return clock_.Now() - begun_at_;
}

}  // namespace internal
}  // namespace tether
