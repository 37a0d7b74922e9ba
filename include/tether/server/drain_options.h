// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_SERVER_DRAIN_OPTIONS_H_
#define TETHER_SERVER_DRAIN_OPTIONS_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/support/status.h"
#include "tether/clock.h"
#include "tether/logging.h"

namespace tether {
namespace server {

// What one drain did, as `DrainController::Wait` returns it. "Registered
// calls" are the calls that hold a `DrainCall`; gRPC's graceful shutdown
// covers the others (unary calls, services that do not register).
struct DrainReport {
  // True when `grpc::Server::Shutdown` returned (every handler returned)
  // before the hard bound. False when the hard bound passed first: some
  // handler never returned (`calls_stuck` counts the registered ones).
  bool server_stopped = false;
  // From `Begin()` to the end of the drain.
  absl::Duration elapsed = absl::ZeroDuration();
  // Registered calls told to send the drain notice.
  std::size_t calls_noticed = 0;
  // Registered calls still open when `Shutdown` was called (the GOAWAY).
  std::size_t calls_at_goaway = 0;
  // Registered calls told to end (still open `goaway_grace` after the
  // GOAWAY).
  std::size_t calls_told_to_end = 0;
  // Registered calls still open when the drain ended: their handlers had
  // not returned.
  std::size_t calls_stuck = 0;
};

// "stopped in 1.2s: 3 noticed, 1 open at GOAWAY, 0 told to end, 0 stuck".
std::string DrainReportToString(const DrainReport& report);

// Receives the steps of a drain, for metrics and logs.
//
// All methods have empty defaults. They are called one at a time, in step
// order, with no tether lock held, from the thread that called `Begin()`,
// the clock's thread, or the thread on which `grpc::Server::Shutdown`
// returned. They must not block: while one runs, the drain's later hooks
// and events wait (the drain's timing does not). Held by `std::shared_ptr`.
class DrainObserver {
 public:
  virtual ~DrainObserver() = default;
  // Step 1: every health status is NOT_SERVING; the server keeps serving
  // for `unready_window`.
  virtual void OnUnready(absl::Duration /*unready_window*/) {}
  // Step 2: `open_calls` registered calls were told to send the drain
  // notice; the drain waits up to `notice_grace` for them to end.
  virtual void OnNotice(std::size_t /*open_calls*/) {}
  // Step 3: `grpc::Server::Shutdown(now + deadline)` was called: the
  // GOAWAY leaves, no new call is accepted, calls in flight run on.
  virtual void OnGoaway(std::size_t /*open_calls*/,
                        absl::Duration /*deadline*/) {}
  // Step 3, `goaway_grace` later: handlers of the `open_calls` registered
  // calls still open were told to end with `status`; open health Watches
  // end.
  virtual void OnEndCalls(std::size_t /*open_calls*/,
                          const grpc::Status& /*status*/) {}
  // Step 4: the drain is over (the server stopped, or the hard bound
  // passed). Called once; `Wait()` returns the same report.
  virtual void OnFinished(const DrainReport& /*report*/) {}
};

// How a `DrainController` drains. Every field has a usable default; the
// durations add up to the hard bound of a drain (`HardBound`).
//
// With the defaults a drain takes at most 5 + 5 + 10 + 1 = 21 s, within
// Kubernetes' default terminationGracePeriodSeconds (30 s).
struct DrainOptions {
  // Step 1. After `Begin()` flips every health status to NOT_SERVING, the
  // server goes on serving normally (new calls too) for this long, so load
  // balancers and clients that watch health withdraw it before anything
  // closes. Default 5 s; in [0, 1 h].
  absl::Duration unready_window = absl::Seconds(5);
  // Step 2. Registered calls are told to send the app's drain notice, then
  // the drain waits up to this long for them to end (clients that react to
  // the notice open their next call elsewhere and cancel this one); it goes
  // on as soon as none is open. Default 5 s; in [0, 1 h].
  absl::Duration notice_grace = absl::Seconds(5);
  // Step 3. How long after the GOAWAY the calls still open run before their
  // handlers are told to end: clients that move on a GOAWAY (tether's pool
  // does) leave meanwhile, and the GOAWAY is on the wire before any stream
  // ends. Default 1 s; in [10 ms, drain_deadline].
  absl::Duration goaway_grace = absl::Seconds(1);
  // Step 3. The deadline given to `grpc::Server::Shutdown`, counted from
  // its call: gRPC cancels the calls still open then (clients see
  // UNAVAILABLE) and closes the connections. Handlers told to end have
  // `drain_deadline - goaway_grace` to do it. Default 10 s; in
  // [goaway_grace, 1 h].
  absl::Duration drain_deadline = absl::Seconds(10);
  // Step 4. After the deadline, how long `Shutdown` may take to return
  // (handlers' `OnDone`, gRPC's own threads) before the drain ends without
  // it and reports the handlers that never returned. Default 1 s; in
  // [10 ms, 1 min].
  absl::Duration stop_slack = absl::Seconds(1);

  // The status handlers are told to end their calls with. A client that
  // sees it knows the server is going away and reopens elsewhere. Default
  // UNAVAILABLE "server is draining"; must not be OK (a client takes OK as
  // the stream's natural end and would not reopen).
  grpc::Status end_status =
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is draining");

  // The health service whose statuses step 1 flips. Default null: the
  // server's own (`grpc::Server::GetHealthCheckService()`, set up by
  // `grpc::EnableDefaultHealthCheckService(true)` before the server was
  // built); no health flip when the server has none. Not owned; must
  // outlive the controller.
  grpc::HealthCheckServiceInterface* health_service = nullptr;

  // Told each step. Default null: none.
  std::shared_ptr<DrainObserver> observer;
  // Where the step log lines go ("drain: step 1/4: ..."). Default null:
  // `StderrLogSink()`.
  std::shared_ptr<LogSink> log_sink;
  // The clock the steps are timed on. Default null: `SystemClock()`.
  // `grpc::Server::Shutdown`'s deadline is always on the system clock.
  std::shared_ptr<Clock> clock;
};

// Checks every field; the error names the field ("DrainOptions.
// goaway_grace must be in [10ms, drain_deadline], got 0").
absl::Status ValidateDrainOptions(const DrainOptions& options);

// The longest a drain can take from `Begin()` to `Wait()` returning:
// unready_window + notice_grace + drain_deadline + stop_slack.
absl::Duration HardBound(const DrainOptions& options);

}  // namespace server
}  // namespace tether

#endif  // TETHER_SERVER_DRAIN_OPTIONS_H_
