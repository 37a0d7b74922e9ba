// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: the typed side of a server stream.
#ifndef TETHER_INTERNAL_SERVER_PARTS_H_
#define TETHER_INTERNAL_SERVER_PARTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "tether/function.h"
#include "tether/internal/grpc_call_context.h"
#include "tether/internal/grpc_read_attempt.h"
#include "tether/internal/stream_core.h"
#include "tether/transport.h"

namespace tether {

template <class Request, class Response>
struct StreamSpec;

namespace internal {

// A server stream's typed side: the request every attempt starts from (a
// copy, resumed by the spec's `resume_after` or `resume_from_cursor`), and
// how an attempt starts: the spec's `attempt_factory` when it gave one, else
// a gRPC call through its `start` (no factory object in between).
template <class Request, class Response>
class ServerStreamParts final : public ResponseParts<Response> {
 public:
  using Spec = StreamSpec<Request, Response>;

  // Moves what it needs out of `spec` (checked by the caller).
  ServerStreamParts(Spec& spec, Function<void(Response&&)> on_message)
      : ResponseParts<Response>(std::move(on_message), spec),
        request_(std::move(spec.request)),
        start_(std::move(spec.start)),
        resume_after_(std::move(spec.resume_after)) {
    if (spec.attempt_factory || spec.configure_attempt ||
        spec.resume_from_cursor) {
      rare_ = new Rare{std::move(spec.attempt_factory),
                       std::move(spec.configure_attempt),
                       std::move(spec.resume_from_cursor)};
    }
  }
  ~ServerStreamParts() override { delete rare_; }

  const void* request() const override { return &request_; }
  void* NewRequestCopy() const override { return new Request(request_); }
  StreamParts::Deleter request_deleter() const override {
    return &DeleteAs<Request>;
  }
  void Resume(void* request, const ResumeState& state) const override {
    Request& r = *static_cast<Request*>(request);
    if (state.has_position) {
      resume_after_(r, state.last);
    } else if (state.has_cursor) {
      rare_->resume_from_cursor(r, state.cursor);
    }
  }
  std::shared_ptr<Attempt> StartAttempt(const ConnectionPick& connection,
                                        const AttemptInfo& info,
                                        const void* request,
                                        AttemptSink sink) override {
    const Request& r = *static_cast<const Request*>(request);
    if (rare_ && rare_->factory) {
      return rare_->factory->StartUntyped(connection, info, request,
                                          std::move(sink));
    }
    return GrpcReadAttempt<Request, Response>::Run(
        start_, rare_ ? rare_->configure : NoConfigureAttempt(), connection,
        info, r, std::move(sink));
  }

 private:
  // Fewer streams set these: behind one pointer (bytes per stream). Owned;
  // a plain pointer for compile time, as `ResponseFunctions::Rare`.
  struct Rare {
    // The spec's `attempt_factory`, untyped: its typed adapter is compiled
    // only where the app defines it (transport.h).
    std::shared_ptr<UntypedAttemptFactory> factory;
    ConfigureAttemptFn configure;
    Function<void(Request&, const std::string&)> resume_from_cursor;
  };

  const Request request_;
  const typename GrpcReadAttempt<Request, Response>::StartFn start_;
  const Function<void(Request&, std::uint64_t)> resume_after_;
  const Rare* rare_ = nullptr;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_SERVER_PARTS_H_
