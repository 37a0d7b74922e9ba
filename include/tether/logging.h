// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_LOGGING_H_
#define TETHER_LOGGING_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tether/circuit_breaker.h"
#include "tether/clock.h"
#include "tether/connection_pool.h"
#include "tether/internal/mutex.h"
#include "tether/internal/visibility.h"
#include "tether/observer.h"

namespace tether {
namespace internal {
struct TETHER_HIDDEN_TYPE LogLine;
}  // namespace internal

enum class LogSeverity { kInfo, kWarning, kError };

// "INFO", "WARNING", "ERROR".
absl::string_view LogSeverityName(LogSeverity s);

// Where log lines go: implement it to forward to your logger (glog, spdlog,
// syslog, ...). Called with no tether lock held, from gRPC's, the clock's
// and the pool's threads, possibly concurrently; must be thread-safe and
// must not block for long.
class LogSink {
 public:
  virtual ~LogSink() = default;
  // One line, without a trailing newline.
  virtual void Write(LogSeverity severity, absl::string_view line) = 0;
};

// Writes "tether W: <line>\n" to stderr, one write per line. Never destroyed.
std::shared_ptr<LogSink> StderrLogSink();

// The kinds of events a `LoggingObserver` logs; each kind has its own rate
// limit.
enum class LogEvent {
  kAttemptStarted,
  kAttemptEnded,
  kDuplicate,
  kGap,
  kBackoff,
  kGaveUp,
  kStalled,
  kResync,
  kStreamDraining,  // a connection draining (told to a stream or a pool),
                    // or a server's drain notice on a stream
  kConnection,      // pool: opened, ready, suspect, restored, retired,
                    // endpoints added, missing, removed, source errors
  kBreakerState,
  kBreakerRejected,
  kCount,  // not an event: the number of kinds
};

// "attempt_started", "attempt_ended", ...
absl::string_view LogEventName(LogEvent e);

struct LoggingOptions {
  // Default null: `StderrLogSink()`.
  std::shared_ptr<LogSink> sink;
  // Lines below this severity are dropped. Default kInfo.
  LogSeverity min_severity = LogSeverity::kInfo;
  // Storm control: at most this many lines per event kind per
  // `rate_window`; the rest are counted, and one line "suppressed K
  // <kind> lines" follows when the window ends (on the clock's timer, or at
  // the next line of that kind, or when the observer is destroyed).
  // Default 5; in [1, 1000000].
  int max_lines_per_window = 5;
  // Default 1 s; in [1 ms, 1 h].
  absl::Duration rate_window = absl::Seconds(1);
  // Starts every line ("ledger/alice: attempt 3 started ..."). Default "".
  std::string prefix;
  // Time for the rate limit. Default null: `SystemClock()`.
  std::shared_ptr<Clock> clock;
};

// OK, or INVALID_ARGUMENT naming the field out of range.
absl::Status Validate(const LoggingOptions& options);

// Logs the events of streams, pools and breakers through a `LogSink`,
// rate-limited per event kind so that a storm (a thousand streams moving at
// once) writes a few lines and a count instead of a thousand lines.
//
// One observer implements the three observer interfaces; hand the same
// `std::shared_ptr` to streams, a pool and breakers (or one per stream, with
// a prefix naming it). Severity: failures that end a stream, permanent ends
// and gave-up are ERROR; transient ends, gaps, stalls, suspect connections,
// a breaker leaving `closed`, rejected calls and resyncs are WARNING; the
// rest INFO.
//
// Thread safety: every method may be called concurrently. The sink is
// called with no lock held. Summary timers hold the observer weakly.
//
//   tether::LoggingOptions lo;
//   lo.prefix = "ledger";
//   auto log = tether::LoggingObserver::Create(lo).value();
//   stream_options.observer = log;
//   pool_options.observer = log;
class LoggingObserver final
    : public StreamObserver,
      public ConnectionObserver,
      public BreakerObserver,
      public std::enable_shared_from_this<LoggingObserver> {
 public:
  static absl::StatusOr<std::shared_ptr<LoggingObserver>> Create(
      LoggingOptions options);
  // Writes the pending "suppressed" summaries.
  ~LoggingObserver() override;

  // StreamObserver.
  void OnAttemptStarted(const AttemptInfo& info) override;
  void OnAttemptEnded(const AttemptInfo& info, const absl::Status& status,
                      EndClass classified, bool by_client) override;
  void OnDuplicateDropped(std::uint64_t seq,
                          std::uint64_t last_delivered) override;
  void OnGap(std::uint64_t expected, std::uint64_t got) override;
  void OnBackoff(absl::Duration delay,
                 const absl::Status& last_status) override;
  void OnRetryBudgetWait(absl::Duration added) override;
  void OnGaveUp(const absl::Status& status) override;
  void OnStalled(const AttemptInfo& info, absl::Duration silent_for) override;
  void OnResync(const absl::Status& why, std::uint64_t resume_after) override;
  void OnDrainNotice(const AttemptInfo& info) override;
  // Both StreamObserver's and ConnectionObserver's. One line per drain
  // (connection and reason), however many of the pool and the streams on
  // that connection report it through this observer.
  void OnConnectionDraining(std::uint64_t connection_id,
                            absl::string_view why) override;

  // ConnectionObserver.
  void OnConnectionOpened(std::uint64_t id, absl::string_view target) override;
  void OnConnectionReady(std::uint64_t id) override;
  void OnConnectionSuspect(std::uint64_t id,
                           const absl::Status& status) override;
  void OnConnectionRestored(std::uint64_t id) override;
  void OnConnectionRetired(std::uint64_t id) override;
  void OnEndpointAdded(absl::string_view address) override;
  void OnEndpointMissing(absl::string_view address) override;
  void OnEndpointRemoved(absl::string_view address,
                         absl::string_view why) override;
  void OnEndpointsError(const absl::Status& status) override;
  void OnEndpointBalancesCalls(absl::string_view address,
                               absl::string_view why) override;

  // BreakerObserver.
  void OnStateChange(absl::string_view breaker, BreakerState from,
                     BreakerState to, const BreakerCounts& counts) override;
  void OnNotPermitted(absl::string_view breaker,
                      const BreakerCounts& counts) override;

  // Lines suppressed so far by the rate limit, over all kinds.
  std::uint64_t suppressed_total() const;

  // A `StreamObserver` for one stream: the same lines as this observer's
  // stream lines, each starting with "stream <name>: ", through this
  // observer's sink, prefix and rate limits (it keeps this observer alive).
  // It writes no line for a connection draining: give this observer to the
  // pool, which writes that once for all its streams. `tether::Client`
  // gives every stream one, named after its method and a counter.
  std::shared_ptr<StreamObserver> ForStream(std::string name);

 private:
  explicit LoggingObserver(LoggingOptions options);

  struct Window {
    absl::Time start = absl::InfinitePast();
    int lines = 0;
    std::uint64_t suppressed = 0;
    Clock::TimerId flush_timer = 0;
    // Which window of its kind this is: a timer armed for an earlier one
    // (it raced the window's end on another thread) finds it changed and
    // does nothing.
    std::uint64_t number = 0;
  };

  class StreamLog;

  // Writes `line` if the kind's window allows, else counts it.
  void Log(LogEvent kind, LogSeverity severity, absl::string_view line);
  void Log(const internal::LogLine& line);
  // Window `number` of `kind` ended: writes its summary, if any.
  void Flush(LogEvent kind, std::uint64_t number);
  // Takes the summary line of `w` (empty if nothing was suppressed).
  std::string TakeSummaryLocked(LogEvent kind, Window& w, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const LoggingOptions options_;
  const std::shared_ptr<LogSink> sink_;
  const std::shared_ptr<Clock> clock_holder_;
  Clock* const clock_;
  mutable internal::Mutex mu_;
  std::array<Window, static_cast<std::size_t>(LogEvent::kCount)> windows_
      ABSL_GUARDED_BY(mu_);
  std::uint64_t suppressed_total_ ABSL_GUARDED_BY(mu_) = 0;
  // The last drains written, (connection, why), oldest overwritten first.
  std::array<std::pair<std::uint64_t, std::string>, 16> drains_said_
      ABSL_GUARDED_BY(mu_);
  std::size_t next_drain_slot_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tether

#endif  // TETHER_LOGGING_H_
