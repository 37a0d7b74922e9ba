// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: the reading half of a stream's gRPC call, shared by the server
// stream's `ClientReadReactor` and the bidi stream's `ClientBidiReactor`.
#ifndef TETHER_INTERNAL_GRPC_READ_PUMP_H_
#define TETHER_INTERNAL_GRPC_READ_PUMP_H_

#include <memory>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "tether/internal/grpc_call_context.h"
#include "tether/internal/tsan.h"
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

// The reading half of one streaming call on a gRPC reactor (`Reactor` is
// `grpc::ClientReadReactor<Response>` or `grpc::ClientBidiReactor<Request,
// Response>`), and its end: it hands each message to the listener, pauses
// and resumes as the listener asks, cancels, and ends with the status and
// the server's trailers (`AttemptListener::OnEnd`, once, last).
//
// Lifetime: it keeps itself alive (`self_`, from `Begin`) until gRPC calls
// `OnDone`; the stream may hold it longer. `OnDone` hands its last
// references to `ReleaseOffGrpcThread` rather than dropping them on gRPC's
// thread. A call kind with more to do (bidi writes) adds it through
// `ReadsStopped` (a cancel, or the end of reads) and `ReleaseParts` (in
// `OnDone`, before the attempt lets go of itself).
template <class Reactor, class Response>
class GrpcReadPump : public Reactor, public Attempt {
 public:
  void Resume() final {
    if (reads_.Resume()) ReadNext();
  }

  void Cancel() final {
    const ReadPumpState::OnCancel what = reads_.Cancel();
    if (what == ReadPumpState::OnCancel::kNothing) return;
    // `OnDone`, which gives self_ away, has not begun; the caller holds this
    // attempt, so the lock succeeds.
    CancelOffGrpcThread(weak_self_.lock(), &context_);
    if (what == ReadPumpState::OnCancel::kCancelAndRelease) ReleaseHold();
    ReadsStopped();
  }

  void OnReadDone(bool ok) final {
    TakeOver(this);
    if (!ok) {
      ReadsStopped();
      if (reads_.ReadsOver()) ReleaseHold();
      return;
    }
    const bool read_on = listener_->OnMessage(std::move(response_));
    response_ = Response();
    if (read_on) {
      ReadNext();
      return;
    }
    switch (reads_.Paused()) {
      case ReadPumpState::AfterPause::kPaused:
        return;
      case ReadPumpState::AfterPause::kReadNow:
        ReadNext();
        return;
      case ReadPumpState::AfterPause::kReleaseHold:
        ReleaseHold();
        return;
    }
  }

  void OnDone(const grpc::Status& status) final {
    TakeOver(this);
    reads_.Done();
    listener_->OnEnd(ToAbslStatus(status), TrailersOf(context_));
    // Not dropped here, on gRPC's thread: see ReleaseOffGrpcThread. The
    // listener goes first (it may hold the stream and its pool), then what
    // the call kind adds, then the attempt itself, whose context holds the
    // channel.
    ReleaseOffGrpcThread(std::move(listener_));
    ReleaseParts();
    ReleaseOffGrpcThread(std::move(self_));  // may delete this
  }

 protected:
  explicit GrpcReadPump(std::shared_ptr<AttemptListener<Response>> listener)
      : listener_(std::move(listener)) {}

  // Keeps `self` (this attempt) alive until `OnDone`. Call first.
  void Begin(std::shared_ptr<GrpcReadPump> self) {
    weak_self_ = self;
    self_ = std::move(self);
  }

  // Takes the read hold and starts the first read. Call before StartCall.
  void StartReading() {
    this->AddHold();
    ReadNext();
  }

  // Reads are over (a failed read) or the call is being cancelled: may run
  // twice, from any thread. Default: nothing.
  virtual void ReadsStopped() {}
  // In `OnDone`, after the listener's end: hand what the call kind holds
  // to `ReleaseOffGrpcThread`. Default: nothing.
  virtual void ReleaseParts() {}

  grpc::ClientContext context_;

 private:
  void ReadNext() {
    HandOff(this);
    this->StartRead(&response_);
  }

  void ReleaseHold() {
    HandOff(this);
    this->RemoveHold();
  }

  Response response_;
  std::shared_ptr<AttemptListener<Response>> listener_;
  std::shared_ptr<GrpcReadPump> self_;
  std::weak_ptr<GrpcReadPump> weak_self_;
  ReadPumpState reads_;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_GRPC_READ_PUMP_H_
