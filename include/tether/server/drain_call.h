// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_SERVER_DRAIN_CALL_H_
#define TETHER_SERVER_DRAIN_CALL_H_

#include <functional>
#include <memory>

#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "grpcpp/support/status.h"

#include "tether/internal/visibility.h"

namespace tether {

namespace internal {
class TETHER_HIDDEN_TYPE DrainCallState;
class TETHER_HIDDEN_TYPE DrainSequencer;
}  // namespace internal

namespace server {

// What a registered call does at the drain's steps, pushed to it. Both are
// optional: a handler may poll its `DrainCall` instead (sync handlers).
//
// Each hook runs at most once, on a thread of tether's (the clock's, or the
// thread that moved the drain on), never on the thread inside `Register`,
// never under a tether lock, and never after the call's `DrainCall` was
// destroyed. A call registered after a step began hears it at once: its
// hook may run before `Register` has returned to the handler, concurrently
// with the handler's own code, so guard what it shares (the reactor's
// state) and register last in a constructor. Hooks must not block: the
// drain's other hooks and events wait behind them.
struct DrainHooks {
  // Step 2: send the app's drain notice on this call (its own message
  // type: a flag or a oneof case the client recognizes). A callback reactor
  // queues the message for its next `StartWrite`. Default empty.
  std::function<void()> send_notice;
  // Step 3: end the call with `status` (`DrainOptions::end_status`). A
  // callback reactor calls `Finish(status)`, after the write in flight
  // completes if there is one. Default empty.
  std::function<void(const grpc::Status& status)> end;
};

// One open call's link to a drain: created by `DrainController::Register`
// when a handler starts, destroyed when it ends.
//
// From a callback reactor: register with hooks in the constructor, destroy
// the `DrainCall` in `OnDone` (before `delete this`).
//
//   WatchReactor(DrainController& drain) {
//     call_ = drain.Register({[this] { QueueNotice(); },
//                             [this](const grpc::Status& s) { EndWith(s); }});
//   }
//   void OnDone() override { call_.reset(); delete this; }
//
// From a sync handler: register without hooks and poll between writes.
//
//   auto call = drain.Register();
//   while (!context->IsCancelled()) {
//     if (auto end = call->end_status()) return *end;
//     if (call->TakeNotice()) writer->Write(NoticeMessage());
//     ... write the next message, or call->WaitForSignal(100ms) when idle ...
//   }
//
// Lifetime: the destructor unregisters the call. If a hook of this call is
// running on another thread, the destructor waits for it to return (so a
// hook may use the reactor it captured); from inside its own hook it does
// not wait. No hook runs after it. A `DrainCall` may outlive its controller.
//
// Thread safety: every method may be called from any thread.
class TETHER_API DrainCall {
 public:
  ~DrainCall();
  DrainCall(const DrainCall&) = delete;
  DrainCall& operator=(const DrainCall&) = delete;

  // True once the drain reached step 2 for this call.
  bool notice_due() const;
  // True the first time it is called once the notice is due; then false.
  bool TakeNotice();
  // Set once the handler should end the call, with the status to end it
  // with.
  absl::optional<grpc::Status> end_status() const;
  // Waits up to `timeout` until a notice not yet taken or an end is due.
  // Returns whether one is. For sync handlers that wait for their own data.
  bool WaitForSignal(absl::Duration timeout);

 private:
  friend class ::tether::internal::DrainSequencer;
  DrainCall(std::shared_ptr<::tether::internal::DrainCallState> state,
            std::weak_ptr<::tether::internal::DrainSequencer> owner);

  std::shared_ptr<::tether::internal::DrainCallState> state_;
  std::weak_ptr<::tether::internal::DrainSequencer> owner_;
};

}  // namespace server
}  // namespace tether

#endif  // TETHER_SERVER_DRAIN_CALL_H_
