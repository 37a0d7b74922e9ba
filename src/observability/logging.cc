// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/logging.h"

#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "observability/readable_duration.h"

namespace tether {
namespace internal {

// One line of a stream's log: its kind (each kind has its own rate limit),
// its severity and its text.
struct LogLine {
  LogEvent kind;
  LogSeverity severity;
  std::string text;
};

}  // namespace internal

namespace {

using internal::MutexLock;

class StderrSink final : public LogSink {
 public:
  void Write(LogSeverity severity, absl::string_view line) override {
    const std::string out = absl::StrCat(
        "tether ", LogSeverityName(severity).substr(0, 1), ": ", line, "\n");
    std::fwrite(out.data(), 1, out.size(), stderr);
  }
};

// "CODE: message", or "CODE" alone when the message is empty or says the
// same ("CANCELLED: CANCELLED" reads as a stutter).
std::string StatusText(const absl::Status& s) {
  if (s.ok()) return "OK";
  const std::string code = absl::StatusCodeToString(s.code());
  if (s.message().empty() || s.message() == code) return code;
  return absl::StrCat(code, ": ", s.message());
}

using internal::ReadableDuration;

// The stream events' lines, made once for the unnamed observer and for
// `LoggingObserver::ForStream`'s.

internal::LogLine AttemptStartedLine(const AttemptInfo& info) {
  std::string text =
      absl::StrFormat("attempt %d started on connection %d (%s", info.attempt,
                      info.connection_id, AttemptReasonName(info.reason));
  if (info.resumed) {
    absl::StrAppend(&text, ", resume after ", info.resume_after_seq);
  }
  text += ")";
  return {LogEvent::kAttemptStarted, LogSeverity::kInfo, std::move(text)};
}

internal::LogLine AttemptEndedLine(const AttemptInfo& info,
                                   const absl::Status& status,
                                   EndClass classified, bool by_client) {
  LogSeverity sev = LogSeverity::kInfo;
  if (!by_client && classified == EndClass::kTransient) {
    sev = LogSeverity::kWarning;
  }
  if (!by_client && classified == EndClass::kPermanent) {
    sev = LogSeverity::kError;
  }
  return {
      LogEvent::kAttemptEnded, sev,
      absl::StrFormat("attempt %d on connection %d ended: %s (%s)",
                      info.attempt, info.connection_id, StatusText(status),
                      by_client ? absl::string_view("cancelled by the client")
                                : EndClassName(classified))};
}

internal::LogLine DuplicateLine(std::uint64_t seq,
                                std::uint64_t last_delivered) {
  return {LogEvent::kDuplicate, LogSeverity::kInfo,
          absl::StrFormat("duplicate seq %d dropped (last delivered %d)", seq,
                          last_delivered)};
}

internal::LogLine GapLine(std::uint64_t expected, std::uint64_t got) {
  return {LogEvent::kGap, LogSeverity::kWarning,
          absl::StrFormat("gap: expected seq %d, got %d", expected, got)};
}

internal::LogLine BackoffLine(absl::Duration delay,
                              const absl::Status& last_status) {
  return {LogEvent::kBackoff, LogSeverity::kInfo,
          absl::StrFormat("next attempt in %s after %s",
                          ReadableDuration(delay), StatusText(last_status))};
}

internal::LogLine RetryBudgetWaitLine(absl::Duration added) {
  return {LogEvent::kBackoff, LogSeverity::kWarning,
          absl::StrCat("the retry budget is spent: the next attempt waits ",
                       ReadableDuration(added), " more")};
}

internal::LogLine GaveUpLine(const absl::Status& status) {
  return {LogEvent::kGaveUp, LogSeverity::kError,
          absl::StrCat("gave up: ", StatusText(status))};
}

internal::LogLine StalledLine(const AttemptInfo& info,
                              absl::Duration silent_for) {
  return {LogEvent::kStalled, LogSeverity::kWarning,
          absl::StrFormat("attempt %d on connection %d stalled (silent for %s)",
                          info.attempt, info.connection_id,
                          ReadableDuration(silent_for))};
}

internal::LogLine DrainNoticeLine(const AttemptInfo& info) {
  return {LogEvent::kStreamDraining, LogSeverity::kInfo,
          absl::StrFormat("attempt %d on connection %d: the server sent its "
                          "drain notice; moving",
                          info.attempt, info.connection_id)};
}

internal::LogLine ResyncLine(const absl::Status& why,
                             std::uint64_t resume_after) {
  return {LogEvent::kResync, LogSeverity::kWarning,
          absl::StrFormat("resync after %s: resuming after %d", StatusText(why),
                          resume_after)};
}

}  // namespace

absl::string_view LogSeverityName(LogSeverity s) {
  switch (s) {
    case LogSeverity::kInfo:
      return "INFO";
    case LogSeverity::kWarning:
      return "WARNING";
    case LogSeverity::kError:
      return "ERROR";
  }
  return "?";
}

absl::string_view LogEventName(LogEvent e) {
  switch (e) {
    case LogEvent::kAttemptStarted:
      return "attempt_started";
    case LogEvent::kAttemptEnded:
      return "attempt_ended";
    case LogEvent::kDuplicate:
      return "duplicate";
    case LogEvent::kGap:
      return "gap";
    case LogEvent::kBackoff:
      return "backoff";
    case LogEvent::kGaveUp:
      return "gave_up";
    case LogEvent::kStalled:
      return "stalled";
    case LogEvent::kResync:
      return "resync";
    case LogEvent::kStreamDraining:
      return "draining";
    case LogEvent::kConnection:
      return "connection";
    case LogEvent::kBreakerState:
      return "breaker_state";
    case LogEvent::kBreakerRejected:
      return "breaker_rejected";
    case LogEvent::kCount:
      break;
  }
  return "?";
}

std::shared_ptr<LogSink> StderrLogSink() {
  static const auto* sink =
      new std::shared_ptr<LogSink>(std::make_shared<StderrSink>());
  return *sink;
}

absl::Status Validate(const LoggingOptions& o) {
  if (o.max_lines_per_window < 1 || o.max_lines_per_window > 1000000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LoggingOptions.max_lines_per_window must be in [1, 1000000], got ",
        o.max_lines_per_window));
  }
  if (o.rate_window < absl::Milliseconds(1) || o.rate_window > absl::Hours(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoggingOptions.rate_window must be in [1ms, 1h], got ",
                     absl::FormatDuration(o.rate_window)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<LoggingObserver>> LoggingObserver::Create(
    LoggingOptions options) {
  absl::Status s = Validate(options);
  if (!s.ok()) return s;
  return std::shared_ptr<LoggingObserver>(
      new LoggingObserver(std::move(options)));
}

LoggingObserver::LoggingObserver(LoggingOptions options)
    : options_(std::move(options)),
      sink_(options_.sink ? options_.sink : StderrLogSink()),
      clock_holder_(options_.clock),
      clock_(clock_holder_ ? clock_holder_.get() : &SystemClock()) {}

LoggingObserver::~LoggingObserver() {
  std::vector<std::string> summaries;
  {
    MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    for (std::size_t i = 0; i < windows_.size(); ++i) {
      Window& w = windows_[i];
      if (w.flush_timer != 0 && w.flush_timer != ~Clock::TimerId{0}) {
        clock_->Cancel(w.flush_timer);
      }
      w.flush_timer = 0;
      std::string line = TakeSummaryLocked(static_cast<LogEvent>(i), w, now);
      if (!line.empty()) summaries.push_back(std::move(line));
    }
  }
  for (const std::string& line : summaries) {
    sink_->Write(LogSeverity::kWarning, line);
  }
}

std::uint64_t LoggingObserver::suppressed_total() const {
  MutexLock lock(&mu_);
  return suppressed_total_;
}

std::string LoggingObserver::TakeSummaryLocked(LogEvent kind, Window& w,
                                               absl::Time now) {
  if (w.suppressed == 0) return std::string();
  std::string line = absl::StrFormat(
      "%ssuppressed %d %s lines in the last %s",
      options_.prefix.empty() ? std::string() : options_.prefix + ": ",
      w.suppressed, LogEventName(kind), ReadableDuration(now - w.start));
  w.suppressed = 0;
  return line;
}

void LoggingObserver::Log(const internal::LogLine& line) {
  Log(line.kind, line.severity, line.text);
}

void LoggingObserver::Log(LogEvent kind, LogSeverity severity,
                          absl::string_view line) {
  if (severity < options_.min_severity) return;
  constexpr Clock::TimerId kArming = ~Clock::TimerId{0};  // slot reserved
  std::string summary;
  bool write = false;
  bool arm = false;
  absl::Duration arm_delay;
  std::uint64_t arm_for = 0;  // the window the timer ends
  {
    MutexLock lock(&mu_);
    Window& w = windows_[static_cast<std::size_t>(kind)];
    const absl::Time now = clock_->Now();
    if (now - w.start >= options_.rate_window) {
      summary = TakeSummaryLocked(kind, w, now);
      if (w.flush_timer != 0 && w.flush_timer != kArming) {
        clock_->Cancel(w.flush_timer);
      }
      w.flush_timer = 0;
      ++w.number;
      w.start = now;
      w.lines = 0;
    }
    if (w.lines < options_.max_lines_per_window) {
      ++w.lines;
      write = true;
    } else {
      ++w.suppressed;
      ++suppressed_total_;
      if (w.flush_timer == 0) {
        arm = true;
        arm_delay = w.start + options_.rate_window - now;
        arm_for = w.number;
        w.flush_timer = kArming;  // the real id is stored below
      }
    }
  }
  if (arm) {
    std::weak_ptr<LoggingObserver> weak = weak_from_this();
    const Clock::TimerId id =
        clock_->RunAfter(arm_delay, [weak, kind, arm_for] {
          if (auto self = weak.lock()) self->Flush(kind, arm_for);
        });
    bool stale = false;
    {
      MutexLock lock(&mu_);
      Window& w = windows_[static_cast<std::size_t>(kind)];
      // Another thread may have ended the window meanwhile: then this timer
      // belongs to no window.
      if (w.number == arm_for && w.flush_timer == kArming) {
        w.flush_timer = id;
      } else {
        stale = true;
      }
    }
    if (stale) clock_->Cancel(id);
  }
  if (!summary.empty()) sink_->Write(LogSeverity::kWarning, summary);
  if (write) {
    if (options_.prefix.empty()) {
      sink_->Write(severity, line);
    } else {
      sink_->Write(severity, absl::StrCat(options_.prefix, ": ", line));
    }
  }
}

void LoggingObserver::Flush(LogEvent kind, std::uint64_t number) {
  std::string summary;
  {
    MutexLock lock(&mu_);
    Window& w = windows_[static_cast<std::size_t>(kind)];
    if (w.number != number) return;  // a later window: not this timer's
    w.flush_timer = 0;
    const absl::Time now = clock_->Now();
    summary = TakeSummaryLocked(kind, w, now);
    // The next line of this kind opens a new window.
    ++w.number;
    w.start = absl::InfinitePast();
    w.lines = 0;
  }
  if (!summary.empty()) sink_->Write(LogSeverity::kWarning, summary);
}

// --- Events ------------------------------------------------------------------

void LoggingObserver::OnAttemptStarted(const AttemptInfo& info) {
  Log(AttemptStartedLine(info));
}

void LoggingObserver::OnAttemptEnded(const AttemptInfo& info,
                                     const absl::Status& status,
                                     EndClass classified, bool by_client) {
  Log(AttemptEndedLine(info, status, classified, by_client));
}

void LoggingObserver::OnDuplicateDropped(std::uint64_t seq,
                                         std::uint64_t last_delivered) {
  Log(DuplicateLine(seq, last_delivered));
}

void LoggingObserver::OnGap(std::uint64_t expected, std::uint64_t got) {
  Log(GapLine(expected, got));
}

void LoggingObserver::OnBackoff(absl::Duration delay,
                                const absl::Status& last_status) {
  Log(BackoffLine(delay, last_status));
}

void LoggingObserver::OnRetryBudgetWait(absl::Duration added) {
  Log(RetryBudgetWaitLine(added));
}

void LoggingObserver::OnGaveUp(const absl::Status& status) {
  Log(GaveUpLine(status));
}

void LoggingObserver::OnStalled(const AttemptInfo& info,
                                absl::Duration silent_for) {
  Log(StalledLine(info, silent_for));
}

void LoggingObserver::OnResync(const absl::Status& why,
                               std::uint64_t resume_after) {
  Log(ResyncLine(why, resume_after));
}

void LoggingObserver::OnDrainNotice(const AttemptInfo& info) {
  Log(DrainNoticeLine(info));
}

// One stream's lines, each starting with "stream <name>: ", through the
// parent's sink, prefix and rate limits. A connection draining is the
// pool's line (said once for every stream on it): the stream's next attempt
// line says "migration".
class LoggingObserver::StreamLog final : public StreamObserver {
 public:
  StreamLog(std::shared_ptr<LoggingObserver> parent, std::string name)
      : parent_(std::move(parent)), name_(std::move(name)) {}

  void OnAttemptStarted(const AttemptInfo& info) override {
    Log(AttemptStartedLine(info));
  }
  void OnAttemptEnded(const AttemptInfo& info, const absl::Status& status,
                      EndClass classified, bool by_client) override {
    Log(AttemptEndedLine(info, status, classified, by_client));
  }
  void OnDuplicateDropped(std::uint64_t seq,
                          std::uint64_t last_delivered) override {
    Log(DuplicateLine(seq, last_delivered));
  }
  void OnGap(std::uint64_t expected, std::uint64_t got) override {
    Log(GapLine(expected, got));
  }
  void OnBackoff(absl::Duration delay,
                 const absl::Status& last_status) override {
    Log(BackoffLine(delay, last_status));
  }
  void OnRetryBudgetWait(absl::Duration added) override {
    Log(RetryBudgetWaitLine(added));
  }
  void OnGaveUp(const absl::Status& status) override {
    Log(GaveUpLine(status));
  }
  void OnStalled(const AttemptInfo& info, absl::Duration silent_for) override {
    Log(StalledLine(info, silent_for));
  }
  void OnResync(const absl::Status& why, std::uint64_t resume_after) override {
    Log(ResyncLine(why, resume_after));
  }
  void OnDrainNotice(const AttemptInfo& info) override {
    Log(DrainNoticeLine(info));
  }

 private:
  void Log(const internal::LogLine& line) {
    parent_->Log(line.kind, line.severity,
                 absl::StrCat("stream ", name_, ": ", line.text));
  }

  const std::shared_ptr<LoggingObserver> parent_;
  const std::string name_;
};

std::shared_ptr<StreamObserver> LoggingObserver::ForStream(std::string name) {
  return std::make_shared<StreamLog>(shared_from_this(), std::move(name));
}

void LoggingObserver::OnConnectionDraining(std::uint64_t connection_id,
                                           absl::string_view why) {
  {
    // The pool and every stream on the connection may report the same drain
    // through this one observer: the first says it.
    MutexLock lock(&mu_);
    for (const auto& [id, said] : drains_said_) {
      if (id == connection_id && said == why) return;
    }
    drains_said_[next_drain_slot_] = {connection_id, std::string(why)};
    next_drain_slot_ = (next_drain_slot_ + 1) % drains_said_.size();
  }
  Log(LogEvent::kStreamDraining, LogSeverity::kInfo,
      absl::StrFormat("connection %d draining: %s", connection_id, why));
}

void LoggingObserver::OnConnectionOpened(std::uint64_t id,
                                         absl::string_view target) {
  Log(LogEvent::kConnection, LogSeverity::kInfo,
      absl::StrFormat("connection %d opened to %s", id, target));
}

void LoggingObserver::OnConnectionReady(std::uint64_t id) {
  Log(LogEvent::kConnection, LogSeverity::kInfo,
      absl::StrFormat("connection %d ready", id));
}

void LoggingObserver::OnConnectionSuspect(std::uint64_t id,
                                          const absl::Status& status) {
  Log(LogEvent::kConnection, LogSeverity::kWarning,
      absl::StrFormat("connection %d suspect: %s", id, StatusText(status)));
}

void LoggingObserver::OnConnectionRestored(std::uint64_t id) {
  Log(LogEvent::kConnection, LogSeverity::kInfo,
      absl::StrFormat("connection %d restored", id));
}

void LoggingObserver::OnConnectionRetired(std::uint64_t id) {
  Log(LogEvent::kConnection, LogSeverity::kInfo,
      absl::StrFormat("connection %d retired", id));
}

void LoggingObserver::OnEndpointAdded(absl::string_view address) {
  Log(LogEvent::kConnection, LogSeverity::kInfo,
      absl::StrFormat("endpoint %s added", address));
}

void LoggingObserver::OnEndpointMissing(absl::string_view address) {
  Log(LogEvent::kConnection, LogSeverity::kInfo,
      absl::StrFormat("endpoint %s missing from the last answer", address));
}

void LoggingObserver::OnEndpointRemoved(absl::string_view address,
                                        absl::string_view why) {
  Log(LogEvent::kConnection, LogSeverity::kInfo,
      absl::StrFormat("endpoint %s removed: %s", address, why));
}

void LoggingObserver::OnEndpointsError(const absl::Status& status) {
  Log(LogEvent::kConnection, LogSeverity::kWarning,
      absl::StrFormat("endpoint source failed, keeping the last set: %s",
                      StatusText(status)));
}

void LoggingObserver::OnEndpointBalancesCalls(absl::string_view address,
                                              absl::string_view why) {
  Log(LogEvent::kConnection, LogSeverity::kInfo,
      absl::StrFormat("endpoint %s balances each call (an L7 proxy): %s; "
                      "stream ends no longer make its connections suspect",
                      address, why));
}

void LoggingObserver::OnStateChange(absl::string_view breaker,
                                    BreakerState from, BreakerState to,
                                    const BreakerCounts& counts) {
  Log(LogEvent::kBreakerState,
      to == BreakerState::kClosed || to == BreakerState::kDisabled
          ? LogSeverity::kInfo
          : LogSeverity::kWarning,
      counts.reason.empty()
          ? absl::StrFormat("breaker %s: %s -> %s", breaker,
                            BreakerStateName(from), BreakerStateName(to))
          : absl::StrFormat("breaker %s: %s -> %s (%s)", breaker,
                            BreakerStateName(from), BreakerStateName(to),
                            counts.reason));
}

void LoggingObserver::OnNotPermitted(absl::string_view breaker,
                                     const BreakerCounts& counts) {
  Log(LogEvent::kBreakerRejected, LogSeverity::kWarning,
      absl::StrFormat("breaker %s rejected a call (%s)", breaker,
                      BreakerStateName(counts.state)));
}

}  // namespace tether
