// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: the reading half of a stream's gRPC call, shared by the server
// stream's `ClientReadReactor` and the bidi stream's `ClientBidiReactor`.
#ifndef TETHER_INTERNAL_GRPC_READ_PUMP_H_
#define TETHER_INTERNAL_GRPC_READ_PUMP_H_

#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "tether/internal/grpc_call_context.h"
#include "tether/internal/stream_core.h"
#include "tether/transport.h"

namespace tether {
namespace internal {

// What a call's reads may do next: one read is outstanding at a time; when
// the listener asks to pause, the next read is started by `Resume`. The
// reactor holds `OnDone` back (a gRPC hold) while a paused read might still
// be started from outside a reaction; the hold goes once reads are over (a
// failed read, or a cancel while paused).
//
// A plain value with verdicts, no gRPC: the reactor acts on them. Thread
// safety: every method from any thread (one mutex). Compiled in the library.
class ReadPumpState {
 public:
  // After the listener said "pause".
  enum class AfterPause {
    kPaused,       // wait for `Resume`
    kReadNow,      // `Resume` came first: read on
    kReleaseHold,  // cancelled: release the read hold, read no more
  };
  AfterPause Paused();

  // `Resume`: true when the caller starts the next read now.
  bool Resume();

  // What `Cancel` does.
  enum class OnCancel {
    kNothing,           // `OnDone` has begun: nothing to cancel
    kCancel,            // cancel the call
    kCancelAndRelease,  // cancel, and release the read hold (it was paused)
  };
  OnCancel Cancel();

  // A read failed: true (once) when the caller releases the read hold.
  bool ReadsOver();

  // `OnDone` has begun: a later `Cancel` does nothing.
  void Done();

 private:
  std::mutex mu_;
  bool paused_ = false;
  bool resume_requested_ = false;
  bool cancelled_ = false;
  bool hold_released_ = false;
  bool done_ = false;
};

// The reading half of one streaming call on a gRPC reactor, and its end:
// it hands each message to the stream (`AttemptSink`), pauses and resumes as
// the stream asks, cancels, and ends with the status and the server's
// trailers (`AttemptSink::OnEnd`, once, last).
//
// Not a template: it is compiled once, in the library. The typed reactor
// (`GrpcReadAttempt`, `GrpcBidiAttempt`) derives from it and from gRPC's
// reactor, forwards its reactions (`ReadDone`, `Done`) and makes the few
// gRPC calls that name the message types for it (`StartReadCall`, ...).
//
// Lifetime: it keeps itself alive (`self_`, from `Begin`) until gRPC calls
// `OnDone`; the stream may hold it longer. `Done` hands its last references
// to `ReleaseOffGrpcThread` rather than dropping them on gRPC's thread. A
// call kind with more to do (bidi writes) adds it through `ReadsStopped` (a
// cancel, or the end of reads), `BeforeEnd` (in `OnDone`, before the stream
// hears the end) and `ReleaseParts` (in `OnDone`, before the attempt lets
// go of itself).
//
// Thread safety: `Resume` and `Cancel` from any thread; the reactions as
// gRPC runs them. TSan hand-offs (tsan.h) are on this object's address.
class GrpcReadPump : public Attempt {
 public:
  void Resume() final;
  void Cancel() final;

 protected:
  explicit GrpcReadPump(AttemptSink sink);
  ~GrpcReadPump() override;

  // Owns `attempt` (just made with `new`) from here on: keeps it alive
  // until `OnDone`, then sets up its context (`configure`, may be empty).
  // Returns the stream's reference. Call first. (The shared pointer is made
  // here, in the library, not in every user translation unit.)
  static std::shared_ptr<Attempt> Begin(GrpcReadPump* attempt,
                                        const ConfigureAttemptFn& configure,
                                        const AttemptInfo& info);

  // Takes the read hold and starts the first read. Call before StartCall.
  void StartReading();

  // The reactor's `OnReadDone`: `response` is the message read (a
  // Response; moved from by the stream).
  void ReadDone(bool ok, void* response);
  // The reactor's `OnDone`.
  void Done(const grpc::Status& status);

  // Reads are over (a failed read) or the call is being cancelled: may run
  // twice, from any thread. Default: nothing.
  virtual void ReadsStopped() {}
  // In `OnDone`, before the stream hears the end. Default: nothing.
  virtual void BeforeEnd() {}
  // In `OnDone`, after the stream heard the end: hand what the call kind
  // holds to `ReleaseOffGrpcThread`. Default: nothing.
  virtual void ReleaseParts() {}

  // gRPC's calls on the typed reactor: `StartRead` into a fresh message,
  // `AddHold`, `RemoveHold`.
  virtual void StartReadCall() = 0;
  virtual void AddReactorHold() = 0;
  virtual void RemoveReactorHold() = 0;

  // This attempt, while someone holds it.
  const std::weak_ptr<GrpcReadPump>& weak_self() const { return weak_self_; }

  grpc::ClientContext context_;

 private:
  void ReadNext();
  void ReleaseHold();

  AttemptSink sink_;
  std::shared_ptr<GrpcReadPump> self_;
  std::weak_ptr<GrpcReadPump> weak_self_;
  ReadPumpState reads_;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_GRPC_READ_PUMP_H_
