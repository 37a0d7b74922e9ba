// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The decision logic of `tether::server::DrainController`, with gRPC behind
// a seam.
//
// `DrainSequencer` decides when each step of a drain happens, which
// registered calls hear of it, and when the drain is over. It never touches
// gRPC: it acts through a `ServerDriver` (grpc_server_driver.h wraps a
// `grpc::Server` and its health service) and learns that `Shutdown`
// returned from the driver's callback. Unit tests pass a fake driver and a
// fake clock.
#ifndef TETHER_SRC_SERVER_DRAIN_SEQUENCER_H_
#define TETHER_SRC_SERVER_DRAIN_SEQUENCER_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "connections/serial_calls.h"
#include "server/drain_call_state.h"
#include "tether/clock.h"
#include "tether/internal/deferred.h"
#include "tether/internal/mutex.h"
#include "tether/internal/visibility.h"
#include "tether/server/drain_call.h"
#include "tether/server/drain_options.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

// What the sequencer does to the server. Each method is called at most
// once, in this order, with no sequencer lock held, and must return at once.
class ServerDriver {
 public:
  virtual ~ServerDriver() = default;
  // Step 1: every health status NOT_SERVING (Check and open Watches).
  virtual void SetNotServing() = 0;
  // Step 3: calls `grpc::Server::Shutdown` with a deadline `deadline` from
  // now on a thread of its own, and `on_returned` from that thread when it
  // returns (maybe never, if a handler never returns).
  virtual void StartShutdown(absl::Duration deadline,
                             std::function<void()> on_returned) = 0;
  // Step 3, `goaway_grace` later: freeze the health statuses at
  // NOT_SERVING and end open health Watches (so they do not hold
  // `Shutdown` until its deadline).
  virtual void EndHealthWatches() = 0;
};

// The steps of a drain, in order.
enum class DrainPhase {
  kServing,   // no `Begin()` yet
  kUnready,   // step 1: NOT_SERVING, serving on for unready_window
  kNotice,    // step 2: notices told, up to notice_grace
  kGoaway,    // step 3: Shutdown called, calls run on for goaway_grace
  kEnding,    // step 3: handlers told to end, until Shutdown returns
  kFinished,  // step 4: the server stopped, or the hard bound passed
};

absl::string_view DrainPhaseName(DrainPhase phase);

// Sequences one drain. See `tether::server::DrainController` for the
// contract; this class implements it for any driver and clock.
//
// Thread safety: every method may be called from any thread. Hooks, the
// observer, the log sink and the driver are called with no sequencer lock
// held, each kind in the order decided (two `SerialCalls` queues: the
// driver's, and one for hooks, observer and log lines, so a hook that
// blocks cannot hold up `Shutdown`). The clock's `RunAfter` / `Cancel` are
// called under the lock (their contract forbids calling back).
//
// Ownership: the sequencer owns the driver; timers and `DrainCall`s hold it
// weakly. `Stop()` (the controller's destructor) cancels its timers; a step
// already decided may still reach the driver.
class DrainSequencer final
    : public std::enable_shared_from_this<DrainSequencer> {
 public:
  // `options` must be valid (`ValidateDrainOptions`); its null defaults
  // (clock, log sink) are filled in here.
  static std::shared_ptr<DrainSequencer> Create(
      server::DrainOptions options, std::shared_ptr<ServerDriver> driver);

  std::unique_ptr<server::DrainCall> Register(server::DrainHooks hooks);
  // From `~DrainCall`, after the call's state was closed.
  void Unregister(const std::shared_ptr<DrainCallState>& call);

  bool Begin();
  DrainPhase phase() const;
  // The report once finished; nullopt before. Waits up to `timeout` (on
  // the real steady clock, whatever `options.clock` is).
  absl::optional<server::DrainReport> WaitFor(absl::Duration timeout);

  // Cancels the timers: no later step is decided. Idempotent.
  void Stop();

  // Registered calls open now, for tests.
  std::size_t open_calls() const;

 private:
  DrainSequencer(server::DrainOptions options,
                 std::shared_ptr<ServerDriver> driver);

  // Each `...Locked` method queues what must happen after the lock in
  // `calls_` / `driver_calls_`; every entry point runs both queues once its
  // lock is released (`RunQueuesLater`).
  void RunQueuesLater(Deferred& later);
  void ArmLocked(DrainPhase phase, absl::Duration delay)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnTimer(DrainPhase armed_in);
  void OnHardBound();
  void OnShutdownReturned();
  void EnterNoticeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EnterGoawayLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EnterEndingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishLocked(bool stopped) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues a call's notice or end hook (the call was just marked).
  void PostNoticeLocked(const std::shared_ptr<DrainCallState>& call)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PostEndLocked(const std::shared_ptr<DrainCallState>& call)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LogLocked(LogSeverity severity, std::string line)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ObserveLocked(std::function<void(server::DrainObserver&)> event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DriveLocked(std::function<void(ServerDriver&)> action)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Duration ElapsedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const server::DrainOptions options_;
  const std::shared_ptr<ServerDriver> driver_;
  Clock& clock_;  // options_.clock, or SystemClock()

  SerialCalls calls_;         // hooks, observer, log lines
  SerialCalls driver_calls_;  // the driver

  mutable Mutex mu_;
  std::condition_variable_any finished_cv_;  // steady_clock waits
  DrainPhase phase_ ABSL_GUARDED_BY(mu_) = DrainPhase::kServing;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time begun_at_ ABSL_GUARDED_BY(mu_);
  Clock::TimerId step_timer_ ABSL_GUARDED_BY(mu_) = 0;
  Clock::TimerId bound_timer_ ABSL_GUARDED_BY(mu_) = 0;
  // Open registered calls, oldest first.
  std::map<std::uint64_t, std::shared_ptr<DrainCallState>> open_
      ABSL_GUARDED_BY(mu_);
  std::uint64_t last_call_id_ ABSL_GUARDED_BY(mu_) = 0;
  server::DrainReport report_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_SERVER_DRAIN_SEQUENCER_H_
