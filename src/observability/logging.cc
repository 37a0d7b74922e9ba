// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/logging.h"

#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tether {
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

std::string StatusText(const absl::Status& s) {
  if (s.ok()) return "OK";
  return absl::StrCat(absl::StatusCodeToString(s.code()), ": ", s.message());
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
      if (w.flush_timer != 0) clock_->Cancel(w.flush_timer);
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
      w.suppressed, LogEventName(kind),
      absl::FormatDuration(absl::Trunc(now - w.start, absl::Milliseconds(1))));
  w.suppressed = 0;
  return line;
}

void LoggingObserver::Log(LogEvent kind, LogSeverity severity,
                          absl::string_view line) {
  if (severity < options_.min_severity) return;
  std::string summary;
  bool write = false;
  bool arm = false;
  absl::Duration arm_delay;
  {
    MutexLock lock(&mu_);
    Window& w = windows_[static_cast<std::size_t>(kind)];
    const absl::Time now = clock_->Now();
    if (now - w.start >= options_.rate_window) {
      summary = TakeSummaryLocked(kind, w, now);
      if (w.flush_timer != 0) clock_->Cancel(w.flush_timer);
      w.flush_timer = 0;
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
        // Reserve the slot; the real id is stored below.
        w.flush_timer = ~Clock::TimerId{0};
      }
    }
  }
  if (arm) {
    std::weak_ptr<LoggingObserver> weak = weak_from_this();
    const Clock::TimerId id = clock_->RunAfter(arm_delay, [weak, kind] {
      if (auto self = weak.lock()) self->Flush(kind);
    });
    MutexLock lock(&mu_);
    Window& w = windows_[static_cast<std::size_t>(kind)];
    if (w.flush_timer == ~Clock::TimerId{0}) w.flush_timer = id;
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

void LoggingObserver::Flush(LogEvent kind) {
  std::string summary;
  {
    MutexLock lock(&mu_);
    Window& w = windows_[static_cast<std::size_t>(kind)];
    w.flush_timer = 0;
    const absl::Time now = clock_->Now();
    summary = TakeSummaryLocked(kind, w, now);
    // The next line of this kind opens a new window.
    w.start = absl::InfinitePast();
    w.lines = 0;
  }
  if (!summary.empty()) sink_->Write(LogSeverity::kWarning, summary);
}

// --- Events ------------------------------------------------------------------

void LoggingObserver::OnAttemptStarted(const AttemptInfo& info) {
  std::string line =
      absl::StrFormat("attempt %d started on connection %d (%s", info.attempt,
                      info.connection_id, AttemptReasonName(info.reason));
  if (info.resumed)
    absl::StrAppend(&line, ", resume after ", info.resume_after_seq);
  line += ")";
  Log(LogEvent::kAttemptStarted, LogSeverity::kInfo, line);
}

void LoggingObserver::OnAttemptEnded(const AttemptInfo& info,
                                     const absl::Status& status,
                                     EndClass classified, bool by_client) {
  LogSeverity sev = LogSeverity::kInfo;
  if (!by_client && classified == EndClass::kTransient) {
    sev = LogSeverity::kWarning;
  }
  if (!by_client && classified == EndClass::kPermanent) {
    sev = LogSeverity::kError;
  }
  Log(LogEvent::kAttemptEnded, sev,
      absl::StrFormat("attempt %d on connection %d ended: %s (%s)",
                      info.attempt, info.connection_id, StatusText(status),
                      by_client ? absl::string_view("cancelled by the client")
                                : EndClassName(classified)));
}

void LoggingObserver::OnDuplicateDropped(std::uint64_t seq,
                                         std::uint64_t last_delivered) {
  Log(LogEvent::kDuplicate, LogSeverity::kInfo,
      absl::StrFormat("duplicate seq %d dropped (last delivered %d)", seq,
                      last_delivered));
}

void LoggingObserver::OnGap(std::uint64_t expected, std::uint64_t got) {
  Log(LogEvent::kGap, LogSeverity::kWarning,
      absl::StrFormat("gap: expected seq %d, got %d", expected, got));
}

void LoggingObserver::OnBackoff(absl::Duration delay,
                                const absl::Status& last_status) {
  Log(LogEvent::kBackoff, LogSeverity::kInfo,
      absl::StrFormat("next attempt in %s after %s",
                      absl::FormatDuration(delay), StatusText(last_status)));
}

void LoggingObserver::OnGaveUp(const absl::Status& status) {
  Log(LogEvent::kGaveUp, LogSeverity::kError,
      absl::StrCat("gave up: ", StatusText(status)));
}

void LoggingObserver::OnStalled(const AttemptInfo& info,
                                absl::Duration silent_for) {
  Log(LogEvent::kStalled, LogSeverity::kWarning,
      absl::StrFormat("attempt %d on connection %d stalled (silent for %s)",
                      info.attempt, info.connection_id,
                      absl::FormatDuration(silent_for)));
}

void LoggingObserver::OnResync(const absl::Status& why,
                               std::uint64_t resume_after) {
  Log(LogEvent::kResync, LogSeverity::kWarning,
      absl::StrFormat("resync after %s: resuming after %d", StatusText(why),
                      resume_after));
}

void LoggingObserver::OnConnectionDraining(std::uint64_t connection_id,
                                           absl::string_view why) {
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

void LoggingObserver::OnStateChange(absl::string_view breaker,
                                    BreakerState from, BreakerState to,
                                    const BreakerCounts& counts) {
  Log(LogEvent::kBreakerState,
      to == BreakerState::kClosed || to == BreakerState::kDisabled
          ? LogSeverity::kInfo
          : LogSeverity::kWarning,
      absl::StrFormat("breaker %s: %s -> %s (failure rate %.1f%% of %d)",
                      breaker, BreakerStateName(from), BreakerStateName(to),
                      counts.failure_rate, counts.window_calls));
}

void LoggingObserver::OnNotPermitted(absl::string_view breaker,
                                     const BreakerCounts& counts) {
  Log(LogEvent::kBreakerRejected, LogSeverity::kWarning,
      absl::StrFormat("breaker %s rejected a call (%s)", breaker,
                      BreakerStateName(counts.state)));
}

}  // namespace tether
