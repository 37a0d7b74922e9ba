// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_SERVER_DRAIN_CONTROLLER_H_
#define TETHER_SERVER_DRAIN_CONTROLLER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "grpcpp/server.h"
#include "tether/server/drain_call.h"
#include "tether/server/drain_options.h"
#include "tether/internal/visibility.h"

namespace tether {

namespace internal {
class TETHER_HIDDEN_TYPE DrainSequencer;
}  // namespace internal

namespace server {

// Drains a running `grpc::Server` (callback or sync services) in the order
// that lets clients leave it without a gap: readiness first, then the app's
// drain notice, then the GOAWAY, and only then the end of what is still
// open, all within a hard bound.
//
// `Begin()` starts the drain and returns at once:
//   1. every health status NOT_SERVING (Check and open Watches); the server
//      keeps serving for `unready_window`;
//   2. every registered call is told to send the app's drain notice
//      (`DrainHooks::send_notice`); the drain waits up to `notice_grace`
//      for them to end;
//   3. `Server::Shutdown(now + drain_deadline)`: the GOAWAY goes out, new
//      calls are refused, calls in flight run on; `goaway_grace` later the
//      handlers of registered calls still open are told to end
//      (`DrainHooks::end`, `end_status`) and open health Watches end;
//   4. the drain ends when `Shutdown` returns, or at the hard bound
//      (`HardBound(options)` after `Begin()`) if a handler never returns: it
//      is reported, not waited for (gRPC has cancelled its call and closed
//      the connections at the deadline).
// Every step is told to the observer and logged.
//
// It installs no signal handler: wire `Begin()` to SIGTERM yourself (a
// thread in `sigwait`, or a flag the main loop reads), never from inside a
// signal handler.
//
//   grpc::EnableDefaultHealthCheckService(true);
//   auto server = builder.BuildAndStart();
//   auto drain = tether::server::DrainController::Create(server.get());
//   ... handlers call (*drain)->Register(...) ...
//   ... on SIGTERM: (*drain)->Begin();
//   tether::server::DrainReport report = (*drain)->Wait();
//   if (!report.server_stopped) std::_Exit(1);  // see "Lifetime"
//
// Thread safety: every method may be called from any thread concurrently.
// Hooks and the observer are never called under a tether lock.
//
// Lifetime: the server must outlive the controller. When a drain ends at
// the hard bound, `Server::Shutdown` is still blocked in a handler on a
// thread of the controller's; destroying the server then is undefined
// behaviour in gRPC, so end the process without destroying it
// (`std::_Exit`). Destroying the controller before a drain ends stops the
// drain where it is (no later step runs).
class TETHER_API DrainController {
 public:
  // Fails with INVALID_ARGUMENT for invalid options or a null server.
  static absl::StatusOr<std::unique_ptr<DrainController>> Create(
      grpc::Server* server, DrainOptions options = {});
  ~DrainController();
  DrainController(const DrainController&) = delete;
  DrainController& operator=(const DrainController&) = delete;

  // Registers a call that has just started: the drain will tell it to send
  // its notice and to end (through `hooks`, or by its polled state). A call
  // registered after a step began is told that step's news at once (from
  // another thread, never inside `Register`). Never null.
  std::unique_ptr<DrainCall> Register(DrainHooks hooks = {});

  // Starts the drain; returns at once. True the first time; later calls do
  // nothing and return false.
  bool Begin();

  // True once `Begin()` was called.
  bool draining() const;

  // Blocks until the drain is over and returns its report: at most the
  // hard bound after `Begin()`. Before `Begin()` it waits for it, like
  // `grpc::Server::Wait` (a main thread may park here while another thread
  // takes SIGTERM and calls `Begin()`).
  DrainReport Wait();
  // As `Wait`, for at most `timeout`; nullopt if the drain is not over.
  absl::optional<DrainReport> WaitFor(absl::Duration timeout);

 private:
  explicit DrainController(std::shared_ptr<internal::DrainSequencer> sequencer);

  std::shared_ptr<internal::DrainSequencer> sequencer_;
};

}  // namespace server
}  // namespace tether

#endif  // TETHER_SERVER_DRAIN_CONTROLLER_H_
