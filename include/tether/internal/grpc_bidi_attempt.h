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
#include "tether/internal/bidi_outbox.h"
#include "tether/internal/grpc_call_context.h"
#include "tether/internal/grpc_read_pump.h"
#include "tether/internal/stream_core.h"
#include "tether/transport.h"

namespace tether {
namespace internal {

// The writing half of one bidi call, on top of the read pump
// (grpc_read_pump.h: reading, pausing, cancelling, the end with its
// trailers, and the lifetime). Not a template: compiled once, in the
// library; `GrpcBidiAttempt` below makes the gRPC calls that name the
// message types for it.
//
// Writing pulls from the attempt's `BidiOutbox::Writes`, one write at a
// time. A second hold (the read pump has the first) keeps `OnDone` away
// while a write may still be started from outside a reaction (the app's
// `Write` wakes the attempt up). It is released when writing is over: after
// the half-close, a failed write, the end of reads, or `Cancel`. The writes
// close when the call ends, before the stream hears the end.
class GrpcBidiWritePump : public GrpcReadPump {
 protected:
  GrpcBidiWritePump(std::shared_ptr<BidiOutbox::Writes> writes,
                    AttemptSink sink);
  ~GrpcBidiWritePump() override;

  // After the generated method was called with this reactor: takes the
  // write hold, starts reading and writing, then the call.
  void StartPumps();

  // The reactor's `OnWriteDone` and `OnWritesDoneDone`.
  void WriteDone(bool ok);
  void WritesDoneDone();

  // gRPC's calls on the typed reactor: `StartWrite` of `request` (a
  // Request, kept alive until `WriteDone`), `StartWritesDone`, `StartCall`.
  virtual void StartWriteCall(const void* request) = 0;
  virtual void StartWritesDoneCall() = 0;
  virtual void StartCallNow() = 0;

 private:
  // A cancel or the end of reads: nothing more is written.
  void ReadsStopped() override;
  void BeforeEnd() override;
  void ReleaseParts() override;

  // Starts the next write if none is in flight and there is one. From a
  // reaction, `StartPumps`, or the app's thread (the write hold is still
  // held whenever a write starts).
  void PumpWrites();
  void FinishWrite(bool ok);
  void ReleaseWriteHold();

  std::shared_ptr<BidiOutbox::Writes> writes_;

  std::mutex mu_;  // the writes' state below
  bool writing_ = false;
  bool write_hold_released_ = false;
  bool stopped_ = false;  // cancelled, or reads are over
  BidiOutbox::Message in_flight_;
};

// One bidi call on a `grpc::ClientBidiReactor`: the message being read and
// the gRPC calls that name the message types; the pumps do the rest.
template <class Request, class Response>
class GrpcBidiAttempt final
    : public GrpcBidiWritePump,
      public grpc::ClientBidiReactor<Request, Response> {
 public:
  using StartFn = Function<void(const std::shared_ptr<grpc::Channel>&,
                                grpc::ClientContext*,
                                grpc::ClientBidiReactor<Request, Response>*)>;

  static std::shared_ptr<Attempt> Run(
      const StartFn& start, const ConfigureAttemptFn& configure,
      const ConnectionPick& connection, const AttemptInfo& info,
      std::shared_ptr<BidiOutbox::Writes> writes, AttemptSink sink) {
    auto* self = new GrpcBidiAttempt(std::move(writes), std::move(sink));
    std::shared_ptr<Attempt> attempt = Begin(self, configure, info);
    start(connection.channel, &self->context_, self);
    self->StartPumps();
    return attempt;
  }

  void OnReadDone(bool ok) override { ReadDone(ok, &response_); }
  void OnDone(const grpc::Status& status) override { Done(status); }
  void OnWriteDone(bool ok) override { WriteDone(ok); }
  void OnWritesDoneDone(bool /*ok*/) override { WritesDoneDone(); }

 private:
  GrpcBidiAttempt(std::shared_ptr<BidiOutbox::Writes> writes, AttemptSink sink)
      : GrpcBidiWritePump(std::move(writes), std::move(sink)) {}

  void StartReadCall() override {
    response_ = Response();
    this->StartRead(&response_);
  }
  void AddReactorHold() override { this->AddHold(); }
  void RemoveReactorHold() override { this->RemoveHold(); }
  void StartWriteCall(const void* request) override {
    this->StartWrite(static_cast<const Request*>(request));
  }
  void StartWritesDoneCall() override { this->StartWritesDone(); }
  void StartCallNow() override { this->StartCall(); }

  Response response_;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_GRPC_BIDI_ATTEMPT_H_
