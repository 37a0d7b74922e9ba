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
#include "tether/internal/grpc_call_context.h"
#include "tether/internal/grpc_read_pump.h"
#include "tether/transport.h"

namespace tether {
namespace internal {

// One server-streaming call on a `grpc::ClientReadReactor`: the request,
// and the read pump (grpc_read_pump.h: reading, pausing, cancelling, the end
// with its trailers, and the lifetime).
template <class Request, class Response>
class GrpcReadAttempt final
    : public GrpcReadPump<grpc::ClientReadReactor<Response>, Response> {
 public:
  using StartFn = std::function<void(const std::shared_ptr<grpc::Channel>&,
                                     grpc::ClientContext*, const Request*,
                                     grpc::ClientReadReactor<Response>*)>;

  static std::shared_ptr<Attempt> Run(
      const StartFn& start, const ConfigureAttemptFn& configure,
      const ConnectionPick& connection, const AttemptInfo& info,
      const Request& request,
      std::shared_ptr<AttemptListener<Response>> listener) {
    std::shared_ptr<GrpcReadAttempt> self(
        new GrpcReadAttempt(request, std::move(listener)));
    self->Begin(self);
    if (configure) configure(self->context_, info);
    start(connection.channel, &self->context_, &self->request_, self.get());
    self->StartReading();
    self->StartCall();
    return self;
  }

 private:
  GrpcReadAttempt(const Request& request,
                  std::shared_ptr<AttemptListener<Response>> listener)
      : GrpcReadAttempt::GrpcReadPump(std::move(listener)), request_(request) {}

  Request request_;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_GRPC_READ_ATTEMPT_H_
