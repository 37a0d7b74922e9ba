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

  static void Take(BidiOpen& open, const ResumeState& state);
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

// An attempt's listener that closes the attempt's writes at its end, then
// passes the end (trailers included: the core's end decision reads them) on.
template <class Response>
class ClosingListener final : public AttemptListener<Response> {
 public:
  ClosingListener(std::shared_ptr<BidiOutbox::Writes> writes,
                  std::shared_ptr<AttemptListener<Response>> core)
      : writes_(std::move(writes)), core_(std::move(core)) {}
  bool OnMessage(Response&& response) override {
    return core_->OnMessage(std::move(response));
  }
  void OnEnd(const absl::Status& status, const Metadata& trailers) override {
    writes_->Close();
    core_->OnEnd(status, trailers);
  }

 private:
  const std::shared_ptr<BidiOutbox::Writes> writes_;
  const std::shared_ptr<AttemptListener<Response>> core_;
};

// Runs bidi attempts under the stream core (whose per-attempt "request" is a
// `BidiOpen`): attaches each attempt to the outbox in the order the stream
// started them, and closes its writes when it ends.
template <class Request, class Response>
class BidiCoreFactory final : public AttemptFactory<BidiOpen, Response> {
 public:
  BidiCoreFactory(std::shared_ptr<BidiAttemptFactory<Request, Response>> inner,
                  std::shared_ptr<BidiOutbox> box)
      : inner_(std::move(inner)), box_(std::move(box)) {}

  std::shared_ptr<Attempt> StartAttempt(
      const ConnectionPick& connection, const AttemptInfo& info,
      const BidiOpen& open,
      std::shared_ptr<AttemptListener<Response>> listener) override {
    std::shared_ptr<BidiOutbox::Writes> writes =
        BidiOutbox::Attach(box_, info.attempt, open.opens);
    return inner_->StartAttempt(
        connection, info, open.state,
        std::make_shared<TypedBidiWrites<Request>>(writes),
        std::make_shared<ClosingListener<Response>>(writes,
                                                    std::move(listener)));
  }

 private:
  const std::shared_ptr<BidiAttemptFactory<Request, Response>> inner_;
  const std::shared_ptr<BidiOutbox> box_;
};

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
