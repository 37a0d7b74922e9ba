// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: one bidi attempt on gRPC's callback API.
#ifndef TETHER_INTERNAL_GRPC_BIDI_ATTEMPT_H_
#define TETHER_INTERNAL_GRPC_BIDI_ATTEMPT_H_

#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "tether/internal/grpc_call_context.h"
#include "tether/internal/grpc_read_pump.h"
#include "tether/internal/tsan.h"
#include "tether/transport.h"

namespace tether {
namespace internal {

// One bidi call on a `grpc::ClientBidiReactor`: the read pump
// (grpc_read_pump.h: reading, pausing, cancelling, the end with its
// trailers, and the lifetime) and the writes.
//
// Writing pulls from `BidiWrites`, one write at a time. A second hold (the
// read pump has the first) keeps `OnDone` away while a write may still be
// started from outside a reaction (the app's `Write` wakes the attempt up).
// It is released when writing is over: after the half-close, a failed
// write, the end of reads, or `Cancel`.
template <class Request, class Response>
class GrpcBidiAttempt final
    : public GrpcReadPump<grpc::ClientBidiReactor<Request, Response>,
                          Response> {
 public:
  using StartFn = std::function<void(
      const std::shared_ptr<grpc::Channel>&, grpc::ClientContext*,
      grpc::ClientBidiReactor<Request, Response>*)>;
  using Next = typename BidiWrites<Request>::Next;

  static std::shared_ptr<Attempt> Run(
      const StartFn& start, const ConfigureAttemptFn& configure,
      const ConnectionPick& connection, const AttemptInfo& info,
      std::shared_ptr<BidiWrites<Request>> writes,
      std::shared_ptr<AttemptListener<Response>> listener) {
    std::shared_ptr<GrpcBidiAttempt> self(
        new GrpcBidiAttempt(std::move(writes), std::move(listener)));
    self->Begin(self);
    if (configure) configure(self->context_, info);
    start(connection.channel, &self->context_, self.get());
    self->AddHold();  // writes
    std::weak_ptr<GrpcBidiAttempt> weak = self;
    self->writes_->SetWakeup([weak] {
      if (auto a = weak.lock()) a->PumpWrites();
    });
    self->StartReading();
    self->PumpWrites();
    HandOff(self.get());
    self->StartCall();
    return self;
  }

  void OnWriteDone(bool ok) override {
    TakeOver(this);
    writes_->Written(ok);
    FinishWrite(ok);
  }

  void OnWritesDoneDone(bool /*ok*/) override {
    TakeOver(this);
    FinishWrite(/*ok=*/false);  // nothing is written after the half-close
  }

 private:
  GrpcBidiAttempt(std::shared_ptr<BidiWrites<Request>> writes,
                  std::shared_ptr<AttemptListener<Response>> listener)
      : GrpcBidiAttempt::GrpcReadPump(std::move(listener)),
        writes_(std::move(writes)) {}

  // A cancel or the end of reads: nothing more is written.
  void ReadsStopped() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
      if (writing_ || write_hold_released_) return;
      write_hold_released_ = true;
    }
    ReleaseWriteHold();
  }

  void ReleaseParts() override { ReleaseOffGrpcThread(std::move(writes_)); }

  // Starts the next write if none is in flight and there is one. From a
  // reaction, `Run`, or the app's thread (the write hold is still held
  // whenever a write starts).
  void PumpWrites() {
    std::shared_ptr<const Request> msg;
    Next next = Next::kNothing;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (writing_ || write_hold_released_ || stopped_) return;
      next = writes_->Take(&msg);
      if (next == Next::kNothing) return;
      writing_ = true;
      in_flight_ = msg;
    }
    HandOff(this);
    if (next == Next::kWrite) {
      this->StartWrite(msg.get());
    } else {
      this->StartWritesDone();
    }
  }

  void FinishWrite(bool ok) {
    bool release = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      in_flight_.reset();
      if ((!ok || stopped_) && !write_hold_released_) {
        release = write_hold_released_ = true;
      }
    }
    if (release) {
      ReleaseWriteHold();
      return;
    }
    if (ok) PumpWrites();
  }

  void ReleaseWriteHold() {
    HandOff(this);
    this->RemoveHold();
  }

  std::shared_ptr<BidiWrites<Request>> writes_;

  std::mutex mu_;  // the writes' state below
  bool writing_ = false;
  bool write_hold_released_ = false;
  bool stopped_ = false;  // cancelled, or reads are over
  std::shared_ptr<const Request> in_flight_;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_GRPC_BIDI_ATTEMPT_H_
