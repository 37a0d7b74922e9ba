// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Internal: the state one registered call shares with its drain.
#ifndef TETHER_SRC_SERVER_DRAIN_CALL_STATE_H_
#define TETHER_SRC_SERVER_DRAIN_CALL_STATE_H_

#include <condition_variable>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "grpcpp/support/status.h"
#include "tether/internal/mutex.h"
#include "tether/internal/visibility.h"
#include "tether/server/drain_call.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

// What the drain has told one call (notice due, end due, with which
// status), the call's hooks, and the rule that no hook runs once the call
// is closed.
//
// The drain marks news (`MarkNoticeDue`, `MarkEndDue`, under its own lock:
// they only set fields and wake waiters) and later runs the hooks
// (`RunNoticeHook`, `RunEndHook`, with no lock held). `Close` (the call's
// `DrainCall` destroyed) stops any later hook and waits for hooks running
// on other threads, so a hook never outlives the handler it captured; a
// hook that closes its own call does not wait for itself.
//
// Lock order: the drain's lock may be held when calling `Mark*`; this
// class never calls out while holding its own.
class DrainCallState {
 public:
  // `id`: the call's rank among the drain's calls (told in that order).
  DrainCallState(std::uint64_t id, server::DrainHooks hooks)
      : id_(id), hooks_(std::move(hooks)) {}

  std::uint64_t id() const { return id_; }

  // Returns false when it was already due (nothing changes).
  bool MarkNoticeDue() ABSL_LOCKS_EXCLUDED(mu_);
  bool MarkEndDue(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  // Run the hook once, unless the call is closed or has no such hook.
  void RunNoticeHook() ABSL_LOCKS_EXCLUDED(mu_);
  void RunEndHook() ABSL_LOCKS_EXCLUDED(mu_);

  // The call is over: no hook runs after this returns.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

  bool notice_due() const ABSL_LOCKS_EXCLUDED(mu_);
  bool TakeNotice() ABSL_LOCKS_EXCLUDED(mu_);
  absl::optional<grpc::Status> end_status() const ABSL_LOCKS_EXCLUDED(mu_);
  bool WaitForSignal(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Claims the right to run one hook: false if closed or already run.
  bool ClaimLocked(bool& ran) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseClaim() ABSL_LOCKS_EXCLUDED(mu_);
  bool SignalledLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::uint64_t id_;
  const server::DrainHooks hooks_;
  mutable Mutex mu_;
  // Waits on steady_clock (`WaitForSignal`) and for running hooks (`Close`).
  std::condition_variable_any cv_;
  bool notice_due_ ABSL_GUARDED_BY(mu_) = false;
  bool notice_taken_ ABSL_GUARDED_BY(mu_) = false;
  absl::optional<grpc::Status> end_ ABSL_GUARDED_BY(mu_);
  bool notice_ran_ ABSL_GUARDED_BY(mu_) = false;
  bool end_ran_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // Threads running a hook of this call now.
  std::vector<std::thread::id> runners_ ABSL_GUARDED_BY(mu_);
};

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_SERVER_DRAIN_CALL_STATE_H_
