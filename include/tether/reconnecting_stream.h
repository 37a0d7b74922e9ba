// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_RECONNECTING_STREAM_H_
#define TETHER_RECONNECTING_STREAM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "tether/function.h"
#include "tether/internal/server_parts.h"
#include "tether/internal/spec_hooks.h"
#include "tether/internal/stream_core.h"
#include "tether/position.h"
#include "tether/stream_options.h"
#include "tether/stream_spec_base.h"
#include "tether/target.h"
#include "tether/transport.h"

namespace tether {

// What a server stream calls, and how it resumes. `Request`/`Response` are
// the generated message types of a server-streaming method. The fields
// every stream spec has (positions, cursors, resync, drain notices,
// `configure_attempt`) come from `StreamSpecBase` (tether/stream_spec_base.h).
template <class Request, class Response>
struct StreamSpec : StreamSpecBase<Response> {
  // Starts one attempt with the user's own generated stub on `channel`.
  // Must call exactly one generated callback method and nothing else (tether
  // calls StartRead/StartCall itself). Called once per attempt, from any
  // thread. `tether::StartWith<Service>(&Service::Stub::async::Method)`
  // (tether/generated_method.h) builds it. By hand, for example:
  //   [](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext* ctx,
  //      const WatchRequest* req, grpc::ClientReadReactor<Event>* r) {
  //     SeqStream::NewStub(ch)->async()->Watch(ctx, req, r);
  //   }
  Function<void(const std::shared_ptr<grpc::Channel>&, grpc::ClientContext*,
                const Request*, grpc::ClientReadReactor<Response>*)>
      start;

  // The first request. Reopens send a copy updated by `resume_after`.
  Request request;

  // Writes "resume after seq N" into a copy of `request`. Required with
  // `sequence_of` or `position_of` (and only with them).
  Function<void(Request&, std::uint64_t last_delivered)> resume_after;

  // Writes "resume after cursor C" into a copy of `request`. Required with
  // `cursor_of` (and only with it).
  Function<void(Request&, const std::string& cursor)> resume_from_cursor;

  // Advanced: replaces `start` with another way to run attempts. Test
  // doubles (`tether::fakes::FakeTransport`) plug in here.
  std::shared_ptr<AttemptFactory<Request, Response>> attempt_factory;

  // Optional: the sequence number the request already resumes after (when
  // the app restarts from its own checkpoint). Messages at or below it are
  // duplicates. Default: none; the first message sets the baseline. Needs
  // `sequence_of` or `position_of` (INVALID_ARGUMENT otherwise).
  absl::optional<std::uint64_t> initial_last_seq;
};

// A server stream that survives its server going away.
//
// It runs the call described by a `StreamSpec` as a series of attempts. Each
// reopen resumes after the last *delivered* sequence number; messages at or
// below it are dropped as duplicates, so the application sees every message
// exactly once and in order. Attempt ends are classified (`Classifier`):
// drain and transient ends reopen (at once after progress, else after
// backoff, within the reopen budget), a permanent end or an OK end from the
// server ends the stream. With a `ConnectionPool` target, an attempt whose
// connection starts draining moves to another connection before it ends.
//
// Two ways to consume:
//  - callbacks: `Start(target, spec, options, on_message, on_done)`;
//    `on_message` runs for each message, one at a time, in order; `on_done`
//    runs once, last, with the final status;
//  - a blocking reader: `Open(target, spec, options)`, then `Read()` until it
//    returns false, then `Finish()`.
//
// Thread safety: `Cancel`, `stats` and the destructor may be called from any
// thread, also from inside the stream's own callbacks. `Read`/`Finish` from
// one thread at a time. Callbacks run on gRPC's or the clock's threads and
// must not block for long (reading pauses while they run).
//
// Lifetime: destroying the stream cancels it; once the destructor returns no
// callback of this stream runs any more (from inside a callback, the
// destructor returns at once and that callback is the last). In-flight gRPC
// calls finish in the background and hold what they need.
//
//   auto stream = tether::ReconnectingStream<WatchRequest, Event>::Start(
//       channel, spec, {},
//       [](Event&& e) { Apply(e); },
//       [](const absl::Status& s) {
//         std::fprintf(stderr, "ended: %s\n", s.ToString().c_str());
//       });
template <class Request, class Response>
class ReconnectingStream {
 public:
  using Spec = StreamSpec<Request, Response>;
  using MessageCallback = Function<void(Response&&)>;
  using DoneCallback = Function<void(const absl::Status&)>;
  using Stats = StreamStats;

  // Validates everything, then starts the first attempt. Returns
  // INVALID_ARGUMENT (and starts nothing) for invalid options or an
  // incomplete spec.
  static absl::StatusOr<std::unique_ptr<ReconnectingStream>> Start(
      Target target, Spec spec, ReconnectingStreamOptions options,
      MessageCallback on_message, DoneCallback on_done) {
    return Make(target, spec, options, std::move(on_message),
                std::move(on_done), /*callbacks=*/true);
  }

  // Like `Start`, for the blocking-reader style.
  static absl::StatusOr<std::unique_ptr<ReconnectingStream>> Open(
      Target target, Spec spec, ReconnectingStreamOptions options) {
    return Make(target, spec, options, nullptr, nullptr, /*callbacks=*/false);
  }

  ReconnectingStream(const ReconnectingStream&) = delete;
  ReconnectingStream& operator=(const ReconnectingStream&) = delete;

  // Cancels the stream and waits for its callbacks (see class comment).
  ~ReconnectingStream() { core_->Detach(); }

  // Blocking reader only: waits for the next message. Returns false when the
  // stream has ended; then call `Finish`.
  bool Read(Response* out) { return core_->Read(out); }

  // Blocking reader only: waits for the end and returns the final status.
  absl::Status Finish() { return core_->Finish(); }

  // Ends the stream promptly with CANCELLED, also during a backoff wait.
  // Idempotent; does nothing once the stream has ended.
  void Cancel() { core_->Cancel(); }

  // A snapshot of the stream's counters.
  Stats stats() const { return core_->stats(); }

 private:
  using Core = internal::StreamCore;

  explicit ReconnectingStream(std::shared_ptr<Core> core)
      : core_(std::move(core)) {}

  // The spec and options by reference: moving them again would compile
  // their moves into every user translation unit once more. What does not
  // name the message types (the checks, the core) is compiled in the
  // library (`StartServerStream`). `spec` is this stream's own copy: what
  // the parts move out of it before the checks fail is lost to nobody.
  static absl::StatusOr<std::unique_ptr<ReconnectingStream>> Make(
      const Target& target, Spec& spec, ReconnectingStreamOptions& options,
      MessageCallback on_message, DoneCallback on_done, bool callbacks) {
    internal::SpecFacts facts = internal::SpecFactsOf(spec);
    facts.stream = "ReconnectingStream";
    facts.spec = "StreamSpec";
    facts.initial_field = "initial_last_seq";
    facts.callbacks = callbacks;
    facts.start = spec.start || spec.attempt_factory;
    facts.server_resume = {static_cast<bool>(spec.resume_after),
                           static_cast<bool>(spec.resume_from_cursor)};
    facts.initial = spec.initial_last_seq;
    auto core = internal::StartServerStream(
        target, facts,
        new internal::ServerStreamParts<Request, Response>(
            spec, std::move(on_message)),
        options, std::move(on_done));
    if (!core.ok()) return core.status();
    return std::unique_ptr<ReconnectingStream>(
        new ReconnectingStream(*std::move(core)));
  }

  std::shared_ptr<Core> core_;
};

}  // namespace tether

#endif  // TETHER_RECONNECTING_STREAM_H_
