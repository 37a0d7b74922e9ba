// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_RECONNECTING_BIDI_STREAM_H_
#define TETHER_RECONNECTING_BIDI_STREAM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "tether/function.h"
#include "tether/internal/bidi_outbox.h"
#include "tether/internal/bidi_parts.h"
#include "tether/internal/spec_hooks.h"
#include "tether/internal/stream_core.h"
#include "tether/position.h"
#include "tether/reconnecting_stream.h"
#include "tether/stream_options.h"
#include "tether/stream_spec_base.h"
#include "tether/transport.h"

namespace tether {

// What a bidi stream calls, how each attempt opens, and how it resumes.
// `Request`/`Response` are the generated message types of a bidi method.
// The fields every stream spec has (positions, cursors, resync, drain
// notices, `configure_attempt`) come from `StreamSpecBase`
// (tether/stream_spec_base.h); a bidi stream resumes through
// `open_requests`.
template <class Request, class Response>
struct BidiStreamSpec : StreamSpecBase<Response> {
  // Calls exactly one generated callback bidi method and nothing else
  // (tether calls StartRead/StartWrite/StartCall itself), e.g.
  //   [](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext* ctx,
  //      grpc::ClientBidiReactor<WatchRequest, WatchResponse>* r) {
  //     Watch::NewStub(ch)->async()->Watch(ctx, r);
  //   }
  Function<void(const std::shared_ptr<grpc::Channel>&, grpc::ClientContext*,
                grpc::ClientBidiReactor<Request, Response>*)>
      start;

  // The requests every attempt writes first, built from where it resumes
  // (`has_position`/`has_cursor` false: from the start). Required. Called
  // once per attempt, from any thread, with no tether lock held. If it
  // throws, the stream ends with INTERNAL naming it.
  Function<std::vector<Request>(const ResumeState&)> open_requests;

  // Acknowledgement of the app's own writes: true when `response`
  // acknowledges `write` (compare an id or key; acknowledgements may come
  // in any order). Writes whose acknowledgement has not reached the app are
  // replayed, in order, on the next attempt after the open requests. A
  // response that acknowledges a write already acknowledged to the app is
  // dropped (see the class comment). Called for each response with the
  // waiting writes, oldest first, until one matches (then with the
  // remembered ones), from any thread, with no tether lock held; if it
  // throws, the stream ends with INTERNAL naming it. Empty: a write is done
  // once gRPC has written it (never replayed).
  Function<bool(const Request& write, const Response& response)> acknowledges;

  // Advanced: replaces `start` (test doubles:
  // `tether::fakes::FakeBidiTransport`).
  std::shared_ptr<BidiAttemptFactory<Request, Response>> attempt_factory;

  // Optional: the position the stream already resumes after (the first
  // attempt's `open_requests` sees it). Needs sequence_of or position_of.
  absl::optional<std::uint64_t> initial_position;
};

// A bidi stream that survives its server going away.
//
// Each attempt writes `open_requests(resume state)`, then the app's writes
// the server has not acknowledged yet (in order), then new writes, then the
// half-close once the app called `WritesDone`. Responses pass the same
// position rules as a `ReconnectingStream` (exactly once, in order), and
// the stream has the same guarantees: migration make before break on a
// drain, stall detection, breaker, reopen budget, resync, callbacks or a
// blocking reader.
//
// Flow control: the outbox holds at most `options.max_outbox`
// unacknowledged writes; `Write` then returns RESOURCE_EXHAUSTED, and the
// callback set with `SetOnWritable` runs once when there is room again.
// During a migration the new attempt carries the writes (the old one
// finishes the write it has in flight); if the new one fails and the stream
// falls back to the old one, writes wait for the next attempt. With
// `acknowledges`, the new attempt replays every unacknowledged write, also
// the one the old attempt has in flight (the server sees it twice). Without,
// the new attempt waits until that write is done: written, it is never
// sent again; failed (never written), the new attempt writes it.
//
// At least once: the app's writes reach the server at least once (a replay
// after a lost acknowledgement, or after a server died having executed the
// write, sends it again: make writes idempotent, e.g. with a key). Exactly
// once: each acknowledgement reaches the app once. A write is acknowledged
// when a response that acknowledges it is admitted for the app (on any
// attempt), not when it arrives: one that a move holds and drops leaves
// its write to be replayed. A response that acknowledges a write already
// acknowledged to the app (the old attempt's copy, a replay's) is dropped;
// a replayed write is remembered for that until every attempt that took it
// has ended (at most `max_outbox` of them). Other responses are exactly
// once and in order with positions, as on a `ReconnectingStream`.
//
// Thread safety: `Write`, `WritesDone`, `SetOnWritable`, `Cancel`, `stats`
// and the destructor from any thread, also from inside the stream's
// callbacks. `Read`/`Finish` from one thread at a time. Lifetime as
// `ReconnectingStream` (on_writable too runs never after the destructor).
template <class Request, class Response>
class ReconnectingBidiStream {
 public:
  using Spec = BidiStreamSpec<Request, Response>;
  using MessageCallback = Function<void(Response&&)>;
  using DoneCallback = Function<void(const absl::Status&)>;

  static absl::StatusOr<std::unique_ptr<ReconnectingBidiStream>> Start(
      Target target, Spec spec, ReconnectingStreamOptions options,
      MessageCallback on_message, DoneCallback on_done) {
    return Make(target, spec, options, std::move(on_message),
                std::move(on_done), /*callbacks=*/true);
  }

  static absl::StatusOr<std::unique_ptr<ReconnectingBidiStream>> Open(
      Target target, Spec spec, ReconnectingStreamOptions options) {
    return Make(target, spec, options, nullptr, nullptr, /*callbacks=*/false);
  }

  ReconnectingBidiStream(const ReconnectingBidiStream&) = delete;
  ReconnectingBidiStream& operator=(const ReconnectingBidiStream&) = delete;

  ~ReconnectingBidiStream() {
    outbox_->End();
    core_->Detach();
  }

  // Queues a write for the current attempt (replayed on later attempts
  // until acknowledged). RESOURCE_EXHAUSTED when the outbox is full (see
  // the class comment); FAILED_PRECONDITION after WritesDone or the end.
  absl::Status Write(Request request) {
    return outbox_->Write(std::make_shared<const Request>(std::move(request)));
  }

  // Runs `on_writable` (once) when a `Write` refused for a full outbox may
  // succeed. Replaces the previous one.
  void SetOnWritable(std::function<void()> on_writable) {
    outbox_->SetOnWritable(std::move(on_writable));
  }

  // No more app writes: each attempt half-closes after its open requests
  // and replays.
  void WritesDone() { outbox_->WritesDone(); }

  bool Read(Response* out) { return core_->Read(out); }
  absl::Status Finish() { return core_->Finish(); }
  void Cancel() { core_->Cancel(); }
  StreamStats stats() const { return core_->stats(); }
  // Writes not yet acknowledged (or, without `acknowledges`, not written).
  std::size_t outbox_size() const { return outbox_->size(); }

 private:
  using Core = internal::StreamCore;
  using Box = internal::BidiOutbox;

  ReconnectingBidiStream(std::shared_ptr<Core> core, std::shared_ptr<Box> box)
      : core_(std::move(core)), outbox_(std::move(box)) {}

  // The spec and options by reference: moving them again would compile
  // their moves into every user translation unit once more. What does not
  // name the message types (the checks, the core) is compiled in the
  // library (`StartBidiStream`). `spec` is this stream's own copy: what the
  // parts move out of it before the checks fail is lost to nobody.
  static absl::StatusOr<std::unique_ptr<ReconnectingBidiStream>> Make(
      const Target& target, Spec& spec, ReconnectingStreamOptions& options,
      MessageCallback on_message, DoneCallback on_done, bool callbacks) {
    internal::SpecFacts facts = internal::SpecFactsOf(spec);
    facts.stream = "ReconnectingBidiStream";
    facts.spec = "BidiStreamSpec";
    facts.initial_field = "initial_position";
    facts.callbacks = callbacks;
    facts.start = spec.start || spec.attempt_factory;
    facts.server = false;
    facts.open_requests = static_cast<bool>(spec.open_requests);
    facts.initial = spec.initial_position;
    std::shared_ptr<Box> box = internal::NewBidiOutbox(
        options.max_outbox,
        internal::OpaqueAcknowledges(std::move(spec.acknowledges)),
        options.observer);
    auto core = internal::StartBidiStream(
        target, facts, box,
        new internal::BidiStreamParts<Request, Response>(
            spec, box, std::move(on_message)),
        options, std::move(on_done));
    if (!core.ok()) return core.status();
    return std::unique_ptr<ReconnectingBidiStream>(
        new ReconnectingBidiStream(*std::move(core), std::move(box)));
  }

  std::shared_ptr<Core> core_;
  std::shared_ptr<Box> outbox_;
};

}  // namespace tether

#endif  // TETHER_RECONNECTING_BIDI_STREAM_H_
