// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: the typed side of a bidi stream, kept to casts. What does not
// need the message types (the outbox, the open requests, wiring the outbox
// to the core) is compiled once, in the library (src/streams/bidi_parts.cc,
// bidi_outbox.cc); a user translation unit instantiates only what is below.
#ifndef TETHER_INTERNAL_BIDI_PARTS_H_
#define TETHER_INTERNAL_BIDI_PARTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tether/function.h"
#include "tether/internal/bidi_outbox.h"
#include "tether/internal/grpc_bidi_attempt.h"
#include "tether/internal/grpc_call_context.h"
#include "tether/internal/spec_hooks.h"
#include "tether/internal/stream_core.h"
#include "tether/stream_options.h"
#include "tether/transport.h"

namespace tether {

template <class Request, class Response>
struct BidiStreamSpec;

namespace internal {

// The request a bidi stream's core hands each attempt: where it resumes, and
// the open requests built from there (by `BidiStreamParts::Resume`, the
// core's resume step, so what the app's `open_requests` throws ends the
// stream as any other throwing callback does: INTERNAL naming it).
struct BidiOpen {
  ResumeState state;
  std::vector<BidiOutbox::Message> opens;

  // Out of line (bidi_parts.cc), like everything that does not name the
  // message types.
  BidiOpen();
  BidiOpen(const BidiOpen&);
  ~BidiOpen();
  // `StreamParts::NewRequestCopy` and `request_deleter` for a `BidiOpen`.
  static void* NewCopy(const BidiOpen& open);
  static void Delete(void* open);
  // Sets `opens` to the `count` requests from `first` on (each `size`
  // bytes, in an array), each made opaque by `share`.
  void SetOpens(void* first, std::size_t count, std::size_t size,
                BidiOutbox::Message (*share)(void* request));
};

// One request of the app's `open_requests` (a Request, moved from), made
// opaque.
template <class Request>
BidiOutbox::Message ShareRequest(void* request) {
  return std::make_shared<const Request>(
      std::move(*static_cast<Request*>(request)));
}

// The app's `acknowledges` on opaque messages (empty stays empty).
template <class Request, class Response>
BidiOutbox::AckFn OpaqueAcknowledges(
    Function<bool(const Request&, const Response&)> acknowledges) {
  if (!acknowledges) return nullptr;
  return
      [f = std::move(acknowledges)](const void* write, const void* response) {
        return f(*static_cast<const Request*>(write),
                 *static_cast<const Response*>(response));
      };
}

// A bidi stream's typed side: each attempt resumes through the app's open
// requests (`BidiOpen`, the core's per-attempt "request"), is attached to
// the outbox in the order the stream started it (its writes close when it
// ends), and starts through the spec's `attempt_factory` when it gave one,
// else as a gRPC call through its `start` (no factory object in between).
template <class Request, class Response>
class BidiStreamParts final : public ResponseParts<Response> {
 public:
  using StartFn = typename GrpcBidiAttempt<Request, Response>::StartFn;

  using Spec = BidiStreamSpec<Request, Response>;

  // Moves what it needs out of `spec` (checked by the caller; its
  // `acknowledges` already went to `box`).
  BidiStreamParts(Spec& spec, std::shared_ptr<BidiOutbox> box,
                  Function<void(Response&&)> on_message)
      : ResponseParts<Response>(std::move(on_message), spec),
        open_requests_(std::move(spec.open_requests)),
        box_(std::move(box)),
        factory_(std::move(spec.attempt_factory)),
        start_(std::move(spec.start)),
        configure_(std::move(spec.configure_attempt)) {}

  const void* request() const override { return &open_; }
  void* NewRequestCopy() const override { return BidiOpen::NewCopy(open_); }
  StreamParts::Deleter request_deleter() const override {
    return &BidiOpen::Delete;
  }
  void Resume(void* request, const ResumeState& state) const override {
    BidiOpen& open = *static_cast<BidiOpen*>(request);
    open.state = state;
    std::vector<Request> typed = open_requests_(state);
    open.SetOpens(typed.data(), typed.size(), sizeof(Request),
                  &ShareRequest<Request>);
  }
  std::shared_ptr<Attempt> StartAttempt(const ConnectionPick& connection,
                                        const AttemptInfo& info,
                                        const void* request,
                                        AttemptSink sink) override {
    const BidiOpen& open = *static_cast<const BidiOpen*>(request);
    std::shared_ptr<BidiOutbox::Writes> writes =
        BidiOutbox::Attach(box_, info.attempt, open.opens);
    if (factory_) {
      return factory_->StartUntyped(connection, info, open.state,
                                    std::move(writes), std::move(sink));
    }
    return GrpcBidiAttempt<Request, Response>::Run(
        start_, configure_, connection, info, std::move(writes),
        std::move(sink));
  }

 private:
  const BidiOpen open_;  // no state, no opens: `Resume` fills a copy
  const Function<std::vector<Request>(const ResumeState&)> open_requests_;
  const std::shared_ptr<BidiOutbox> box_;
  // The spec's `attempt_factory`, untyped: its typed adapters are compiled
  // only where the app defines it (transport.h).
  const std::shared_ptr<UntypedBidiAttemptFactory> factory_;
  const StartFn start_;
  const ConfigureAttemptFn configure_;
};

// A new outbox (`std::make_shared` compiled once, here).
std::shared_ptr<BidiOutbox> NewBidiOutbox(
    std::size_t max, BidiOutbox::AckFn acknowledges,
    std::shared_ptr<StreamObserver> observer);

// Checks what `Start` or `Open` was given (`TakeSpec`), then creates a bidi
// stream's core around `box` and `parts` (owned from here on, also when
// this fails) and starts its first attempt: each attempt resumes through
// the open requests, the end closes the outbox, acknowledgements (when the
// app gave them) go through the outbox, and the outbox's calls to the app
// go through the core's gate. INVALID_ARGUMENT naming what is wrong (then
// nothing starts).
absl::StatusOr<std::shared_ptr<StreamCore>> StartBidiStream(
    const Target& target, SpecFacts& facts, std::shared_ptr<BidiOutbox> box,
    StreamParts* parts, ReconnectingStreamOptions& options,
    Function<void(const absl::Status&)> on_done);

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_BIDI_PARTS_H_
