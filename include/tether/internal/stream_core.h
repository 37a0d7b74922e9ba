// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: the attempts/migration machine behind `ReconnectingStream` and
// `ReconnectingBidiStream`. It knows nothing of gRPC, nor of the stream's
// message types: it is compiled once, in the library
// (src/streams/stream_machine.h), and reaches the typed side through
// `StreamParts` (the request, the attempt factory, the messages read ahead)
// and the type-erased `StreamHooks`. A user translation unit instantiates
// only `ResponseParts` with its kind's parts (compile time). It talks to a
// `ConnectionSource` and leaves the rest to its parts:
//   - `PositionGate` (position_gate.h): which message is delivered;
//   - `ReopenBudget` (reopen_budget.h): when to try again, when to give up;
//   - `DeliveryQueue` (delivery_queue.h): how the app gets messages, its end
//     and observer calls;
//   - `BreakerGate` (breaker_gate.h): the optional circuit breaker;
//   - `AckLedger` (ack_ledger.h): which bidi write a response acknowledges;
//   - `Deferred` (deferred.h): calls decided under the lock, made after it.
#ifndef TETHER_INTERNAL_STREAM_CORE_H_
#define TETHER_INTERNAL_STREAM_CORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "tether/backoff.h"
#include "tether/function.h"
#include "tether/internal/ack_ledger.h"
#include "tether/internal/attempt_sink.h"
#include "tether/internal/message_store.h"
#include "tether/internal/visibility.h"
#include "tether/observer.h"
#include "tether/position.h"
#include "tether/stream_options.h"
#include "tether/stream_spec_base.h"
#include "tether/transport.h"

namespace tether {
namespace internal {

// How a stream reads positions from its responses, resumes, and resyncs.
// The public specs (`StreamSpecBase`'s fields, and each kind's way to
// resume) are translated into this by typed code (spec_hooks.h). The
// functions that take a message or a request live in the typed
// `StreamParts` (no per-hook function wrappers to compile in every
// user TU); the flags below say which the spec gave. All functions are app
// code: the core calls them with no lock held.
struct StreamHooks {
  // Integer positions (`StreamParts::PositionOf`); nullopt: the message
  // carries none (fails the stream; the `sequence_of` contract). Off with
  // `cursor_of` off: every message is delivered and every attempt sends the
  // request unchanged.
  bool position_of = false;
  const char* position_name = "position_of";  // for error messages
  PositionSpacing spacing = PositionSpacing::kDense;
  bool deliver_progress = false;
  // `StreamParts::Resume` writes the resume state into a copy of the
  // request. Called for every attempt but the first when there is a
  // position or cursor to resume from; for every attempt (also the first,
  // also without a position) when `resume_always`.
  bool resume = false;
  bool resume_always = false;
  const char* resume_name = "resume_after";  // for error messages
  absl::optional<std::uint64_t> initial_position;

  // What few streams use lives behind one pointer, allocated only when one
  // of its fields is set (bytes per open stream).
  struct Rare {
    bool trim_delivered = false;  // StreamParts::TrimDelivered
    // Opaque cursors (instead of `position_of`; StreamParts::CursorOf);
    // nullopt: a control message.
    bool cursor_of = false;
    absl::optional<std::string> initial_cursor;
    bool resync_on_message = false;  // StreamParts::ResyncOnMessage
    bool drain_notice = false;       // StreamParts::IsDrainNotice
    bool deliver_drain_notice = false;
    Function<bool(const absl::Status&)> resync_on_end;
    Function<void(ResyncDone)> resync;
    // Internal (not app code): runs under the core's lock once the end is
    // decided. Must not call back into the core.
    std::function<void()> on_end_decided;
    // Bidi streams with acknowledgements: the outbox, asked about each
    // response (see `AckLedger`).
    std::shared_ptr<AckLedger> acks;

    Rare();
    ~Rare();
  };
  std::unique_ptr<Rare> rare;  // null: every field of Rare is empty

  Rare& MutableRare() {
    if (rare == nullptr) rare = std::make_unique<Rare>();
    return *rare;
  }
  // *rare, or a Rare with nothing set. Inline: the stream asks on every
  // message.
  const Rare& rare_or_none() const {
    static const Rare* const kNone = new Rare();
    return rare != nullptr ? *rare : *kNone;
  }

  // Out of line (stream_core.cc), like everything without a message type.
  StreamHooks();
  ~StreamHooks();
  StreamHooks(StreamHooks&&) noexcept;
  StreamHooks& operator=(StreamHooks&&) noexcept;
};

// The typed side of one stream, owned by its core: the request every
// attempt starts from, the attempt factory, and the messages read ahead.
// Called with no core lock held, except `store()`'s methods (see
// `MessageStore`).
class StreamParts {
 public:
  virtual ~StreamParts() = default;
  // The stream's request (a Request), as given.
  virtual const void* request() const = 0;
  // Frees what `NewRequestCopy` or `NewMessage` made.
  using Deleter = void (*)(void*);
  // A heap copy of the request for one attempt, for `Resume` to change;
  // freed with `request_deleter()`.
  virtual void* NewRequestCopy() const = 0;
  virtual Deleter request_deleter() const = 0;
  // Starts one attempt with `request` (a Request, valid for the call).
  virtual std::shared_ptr<Attempt> StartAttempt(
      const ConnectionPick& connection, const AttemptInfo& info,
      const void* request, AttemptSink sink) = 0;
  // The messages read ahead, and the app's `on_message`.
  virtual MessageStore* store() = 0;
  // A heap Response moved from `*message` (the message a migration's old
  // attempt holds, see `migration_hold_fallback`); freed with
  // `message_deleter()`.
  virtual void* NewMessage(void* message) const = 0;
  virtual Deleter message_deleter() const = 0;

  // The spec's functions (see StreamHooks for which are set); app code.
  // `response` is a Response, `request` a copy of the Request.
  virtual absl::optional<Position> PositionOf(const void* response) const = 0;
  virtual void Resume(void* request, const ResumeState& state) const = 0;
  virtual void TrimDelivered(void* response, std::uint64_t at) const = 0;
  virtual absl::optional<std::string> CursorOf(const void* response) const = 0;
  virtual bool ResyncOnMessage(const void* response) const = 0;
  virtual bool IsDrainNotice(const void* response) const = 0;
};

// The spec's typed functions about responses (`StreamSpecBase`'s) that
// `ResponseParts` calls: moved out of the spec as they are, so no wrapper
// is compiled per hook.
template <class Response>
struct ResponseFunctions {
  // Moves the functions out of `spec` (checked by `TakeSpec`).
  explicit ResponseFunctions(StreamSpecBase<Response>& spec)
      : sequence_of(std::move(spec.sequence_of)) {
    if (spec.position_of || spec.trim_delivered || spec.cursor_of ||
        spec.resync_on_message || spec.is_drain_notice) {
      rare = new Rare{std::move(spec.position_of),
                      std::move(spec.trim_delivered), std::move(spec.cursor_of),
                      std::move(spec.resync_on_message),
                      std::move(spec.is_drain_notice)};
    }
  }
  ~ResponseFunctions() { delete rare; }
  ResponseFunctions(const ResponseFunctions&) = delete;
  ResponseFunctions& operator=(const ResponseFunctions&) = delete;

  Function<absl::optional<std::uint64_t>(const Response&)> sequence_of;
  // Fewer streams set these: behind one pointer (bytes per stream). Owned;
  // a plain pointer, since a `std::unique_ptr` compiles some twenty
  // functions into every user translation unit for each response type.
  struct Rare {
    Function<Position(const Response&)> position_of;
    Function<void(Response&, std::uint64_t)> trim_delivered;
    Function<absl::optional<std::string>(const Response&)> cursor_of;
    Function<bool(const Response&)> resync_on_message;
    Function<bool(const Response&)> is_drain_notice;
  };
  Rare* rare = nullptr;
};

template <class T>
void DeleteAs(void* p) {
  delete static_cast<T*>(p);
}

// The typed side both kinds of stream share: the messages read ahead (and
// the app's `on_message`) and the spec's functions about responses. Each
// kind adds how its attempts start and resume (`ServerStreamParts` in
// server_parts.h, `BidiStreamParts` in bidi_parts.h).
template <class Response>
class ResponseParts : public StreamParts {
 public:
  MessageStore* store() final { return &store_; }
  void* NewMessage(void* message) const final {
    return new Response(std::move(*static_cast<Response*>(message)));
  }
  Deleter message_deleter() const final { return &DeleteAs<Response>; }

  absl::optional<Position> PositionOf(const void* response) const final {
    const Response& r = *static_cast<const Response*>(response);
    if (!fns_.sequence_of) return fns_.rare->position_of(r);
    absl::optional<std::uint64_t> seq = fns_.sequence_of(r);
    if (!seq) return absl::nullopt;
    return Position::Item(*seq);
  }
  void TrimDelivered(void* response, std::uint64_t at) const final {
    fns_.rare->trim_delivered(*static_cast<Response*>(response), at);
  }
  absl::optional<std::string> CursorOf(const void* response) const final {
    return fns_.rare->cursor_of(*static_cast<const Response*>(response));
  }
  bool ResyncOnMessage(const void* response) const final {
    return fns_.rare->resync_on_message(
        *static_cast<const Response*>(response));
  }
  bool IsDrainNotice(const void* response) const final {
    return fns_.rare->is_drain_notice(*static_cast<const Response*>(response));
  }

 protected:
  // Moves the functions about responses out of `spec`.
  ResponseParts(Function<void(Response&&)> on_message,
                StreamSpecBase<Response>& spec)
      : store_(std::move(on_message)), fns_(spec) {}

 private:
  TypedMessageStore<Response> store_;
  const ResponseFunctions<Response> fns_;
};

// The attempts of one stream: see src/streams/stream_machine.h for the
// machine itself.
//
// A stream runs one attempt at a time, except during a migration: when the
// connection under the current attempt drains, a replacement starts on
// another connection and the old attempt stays as a fallback until the
// replacement delivers (or the hand-off timeout passes); then the old one is
// cancelled.
//
// Thread safety: every method may be called from any thread, also from
// inside the stream's own callbacks (`Read`/`Finish` from one thread at a
// time). Nothing user-supplied runs under a core lock.
class StreamCore {
 public:
  using DoneFn = Function<void(const absl::Status&)>;

  // `parts` holds the typed side (its store's `on_message` and `on_done`
  // both set, or both empty for the blocking reader). INVALID_ARGUMENT for
  // invalid options. Starts nothing: call `StartFirst`.
  static absl::StatusOr<std::shared_ptr<StreamCore>> Create(
      std::shared_ptr<ConnectionSource> source,
      std::unique_ptr<StreamParts> parts, StreamHooks hooks,
      ReconnectingStreamOptions options, DoneFn on_done);

  virtual ~StreamCore() = default;
  virtual void StartFirst() = 0;
  // Reader mode: the next message into `*out` (a Response); false at the end.
  virtual bool Read(void* out) = 0;
  virtual absl::Status Finish() = 0;
  virtual void Cancel() = 0;
  // Cancels, stops every later callback, and waits for the ones running on
  // other threads.
  virtual void Detach() = 0;
  // Runs `call` through the delivery queue's gate (never after `Detach`).
  virtual void Callout(const std::function<void()>& call) = 0;
  virtual StreamStats stats() = 0;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_STREAM_CORE_H_
