// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: the only code of a stream that touches gRPC's callback API.
#ifndef TETHER_INTERNAL_GRPC_READ_ATTEMPT_H_
#define TETHER_INTERNAL_GRPC_READ_ATTEMPT_H_

#include <functional>
#include <memory>
#include <utility>

#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "tether/function.h"
#include "tether/internal/grpc_call_context.h"
#include "tether/internal/grpc_read_pump.h"
#include "tether/transport.h"

namespace tether {
namespace internal {

// One server-streaming call on a `grpc::ClientReadReactor`: the request,
// the message being read, and the gRPC calls that name their types; the
// read pump (grpc_read_pump.h, compiled in the library) does the rest:
// reading, pausing, cancelling, the end with its trailers, the lifetime.
template <class Request, class Response>
class GrpcReadAttempt final : public GrpcReadPump,
                              public grpc::ClientReadReactor<Response> {
 public:
  using StartFn = Function<void(const std::shared_ptr<grpc::Channel>&,
                                grpc::ClientContext*, const Request*,
                                grpc::ClientReadReactor<Response>*)>;

  static std::shared_ptr<Attempt> Run(const StartFn& start,
                                      const ConfigureAttemptFn& configure,
                                      const ConnectionPick& connection,
                                      const AttemptInfo& info,
                                      const Request& request,
                                      AttemptSink sink) {
    auto* self = new GrpcReadAttempt(request, std::move(sink));
    std::shared_ptr<Attempt> attempt = Begin(self, configure, info);
    start(connection.channel, &self->context_, &self->request_, self);
    self->StartReading();
    self->StartCall();
    return attempt;
  }

  void OnReadDone(bool ok) override { ReadDone(ok, &response_); }
  void OnDone(const grpc::Status& status) override { Done(status); }

 private:
  GrpcReadAttempt(const Request& request, AttemptSink sink)
      : GrpcReadPump(std::move(sink)), request_(request) {}

  void StartReadCall() override {
    response_ = Response();
    this->StartRead(&response_);
  }
  void AddReactorHold() override { this->AddHold(); }
  void RemoveReactorHold() override { this->RemoveHold(); }

  Request request_;
  Response response_;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_GRPC_READ_ATTEMPT_H_
