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
#include "tether/internal/bidi_outbox.h"
#include "tether/internal/grpc_bidi_attempt.h"
#include "tether/internal/grpc_call_context.h"
#include "tether/internal/stream_core.h"
#include "tether/stream_options.h"
#include "tether/transport.h"

namespace tether {
namespace internal {

// The request a bidi stream's core hands each attempt: where it resumes, and
// the open requests built from there. The core's resume step (`Take`) calls
// the app's `open_requests`, so what that throws ends the stream as any
// other throwing callback does (INTERNAL naming it).
struct BidiOpen {
  using OpenFn =
      std::function<std::vector<BidiOutbox::Message>(const ResumeState&)>;
  std::shared_ptr<const OpenFn> open_requests;
  ResumeState state;
  std::vector<BidiOutbox::Message> opens;

  // An open with no state yet, that builds its requests with `fn`.
  static BidiOpen With(OpenFn fn);
  static void Take(BidiOpen& open, const ResumeState& state);
  // `StreamParts::NewRequestCopy` and `request_deleter` for a `BidiOpen`.
  static void* NewCopy(const BidiOpen& open);
  static void Delete(void* open);
};

// The app's `open_requests`, its requests made opaque.
template <class Request>
BidiOpen::OpenFn OpaqueOpenRequests(
    std::function<std::vector<Request>(const ResumeState&)> open_requests) {
  return [f = std::move(open_requests)](const ResumeState& state) {
    std::vector<Request> typed = f(state);
    std::vector<BidiOutbox::Message> opens;
    opens.reserve(typed.size());
    for (Request& r : typed) {
      opens.push_back(std::make_shared<const Request>(std::move(r)));
    }
    return opens;
  };
}

// The app's `acknowledges` on opaque messages (empty stays empty).
template <class Request, class Response>
BidiOutbox::AckFn OpaqueAcknowledges(
    std::function<bool(const Request&, const Response&)> acknowledges) {
  if (!acknowledges) return nullptr;
  return
      [f = std::move(acknowledges)](const void* write, const void* response) {
        return f(*static_cast<const Request*>(write),
                 *static_cast<const Response*>(response));
      };
}

// One attempt's writes as the typed `BidiWrites` an attempt factory takes.
template <class Request>
class TypedBidiWrites final : public BidiWrites<Request> {
 public:
  explicit TypedBidiWrites(std::shared_ptr<BidiOutbox::Writes> writes)
      : writes_(std::move(writes)) {}
  BidiNext Take(std::shared_ptr<const Request>* out) override {
    BidiOutbox::Message message;
    const BidiNext next = writes_->Take(&message);
    if (next == BidiNext::kWrite) {
      *out = std::static_pointer_cast<const Request>(std::move(message));
    }
    return next;
  }
  void Written(bool ok) override { writes_->Written(ok); }
  void SetWakeup(std::function<void()> wake) override {
    writes_->SetWakeup(std::move(wake));
  }

 private:
  const std::shared_ptr<BidiOutbox::Writes> writes_;
};

// The listener of a bidi attempt: forwards to the core, and closes the
// attempt's writes at its end first.
template <class Response>
class ClosingSinkListener final : public AttemptListener<Response> {
 public:
  ClosingSinkListener(AttemptSink sink,
                      std::shared_ptr<BidiOutbox::Writes> writes)
      : sink_(std::move(sink)), writes_(std::move(writes)) {}
  bool OnMessage(Response&& response) override {
    return sink_.OnMessage(&response);
  }
  void OnEnd(const absl::Status& status, const Metadata& trailers) override {
    writes_->Close();
    sink_.OnEnd(status, trailers);
  }

 private:
  AttemptSink sink_;
  const std::shared_ptr<BidiOutbox::Writes> writes_;
};

// A bidi stream's typed side: each attempt resumes through the open
// requests (`BidiOpen`, the core's per-attempt "request"), is attached to
// the outbox in the order the stream started it (its writes close when it
// ends), and starts through the spec's `attempt_factory` when it gave one,
// else as a gRPC call through its `start` (no factory object in between).
template <class Request, class Response>
class BidiStreamParts final : public ResponseParts<Response> {
 public:
  using StartFn = typename GrpcBidiAttempt<Request, Response>::StartFn;

  BidiStreamParts(
      BidiOpen::OpenFn open_requests, std::shared_ptr<BidiOutbox> box,
      std::shared_ptr<BidiAttemptFactory<Request, Response>> factory,
      StartFn start, ConfigureAttemptFn configure,
      std::function<void(Response&&)> on_message,
      ResponseFunctions<Response> functions)
      : ResponseParts<Response>(std::move(on_message), std::move(functions)),
        open_(BidiOpen::With(std::move(open_requests))),
        box_(std::move(box)),
        factory_(std::move(factory)),
        start_(std::move(start)),
        configure_(std::move(configure)) {}

  const void* request() const override { return &open_; }
  void* NewRequestCopy() const override { return BidiOpen::NewCopy(open_); }
  StreamParts::Deleter request_deleter() const override {
    return &BidiOpen::Delete;
  }
  void Resume(void* request, const ResumeState& state) const override {
    BidiOpen::Take(*static_cast<BidiOpen*>(request), state);
  }
  std::shared_ptr<Attempt> StartAttempt(const ConnectionPick& connection,
                                        const AttemptInfo& info,
                                        const void* request,
                                        AttemptSink sink) override {
    const BidiOpen& open = *static_cast<const BidiOpen*>(request);
    std::shared_ptr<BidiOutbox::Writes> writes =
        BidiOutbox::Attach(box_, info.attempt, open.opens);
    auto typed = std::make_shared<TypedBidiWrites<Request>>(writes);
    auto listener = std::make_shared<ClosingSinkListener<Response>>(
        std::move(sink), std::move(writes));
    if (factory_) {
      return factory_->StartAttempt(connection, info, open.state,
                                    std::move(typed), std::move(listener));
    }
    return GrpcBidiAttempt<Request, Response>::Run(
        start_, configure_, connection, info, std::move(typed),
        std::move(listener));
  }

 private:
  const BidiOpen open_;
  const std::shared_ptr<BidiOutbox> box_;
  const std::shared_ptr<BidiAttemptFactory<Request, Response>> factory_;
  const StartFn start_;
  const ConfigureAttemptFn configure_;
};

// A new outbox (`std::make_shared` compiled once, here).
std::shared_ptr<BidiOutbox> NewBidiOutbox(
    std::size_t max, BidiOutbox::AckFn acknowledges,
    std::shared_ptr<StreamObserver> observer);

// Creates a bidi stream's core around `box`: each attempt resumes through
// the open requests, the end closes the outbox, acknowledgements (when the
// app gave them) go through the outbox, and the outbox's calls to the app go
// through the core's gate. Starts nothing: call `StartFirst`.
absl::StatusOr<std::shared_ptr<StreamCore>> CreateBidiCore(
    std::shared_ptr<ConnectionSource> source, std::shared_ptr<BidiOutbox> box,
    std::unique_ptr<StreamParts> parts, StreamHooks hooks,
    ReconnectingStreamOptions options,
    std::function<void(const absl::Status&)> on_done);

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_BIDI_PARTS_H_
