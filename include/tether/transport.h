// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The seams between a stream's state machine and gRPC. Production code never
// needs these types directly: `ReconnectingStream` wires gRPC's callback API
// and a `ConnectionPool` (or a single channel) behind them. They are public so
// that `tether::tether_mocks` (and you) can replace gRPC with scripted fakes.
#ifndef TETHER_TRANSPORT_H_
#define TETHER_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "tether/classification.h"
#include "tether/internal/attempt_sink.h"
#include "tether/observer.h"
#include "tether/position.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace tether {

// One connection an attempt runs on.
struct ConnectionPick {
  // Unique per source, never 0.
  std::uint64_t connection_id = 0;
  // The channel to start the call on; null for fakes that need none.
  std::shared_ptr<grpc::Channel> channel;
};

// Hands out connections to streams and tells them when one goes away.
//
// Thread safety: all methods may be called concurrently from any thread.
// Streams call them with no lock of their own held, so an implementation may
// call its own observers from inside them. It must never call a
// `DrainListener` while holding a lock that its methods take: a listener
// calls back into `Pick` and `Release`.
class ConnectionSource {
 public:
  // A stream's ear on the source: told when a connection it holds a pick on
  // starts draining, and (once per `NotifyWhenAvailable`) when a usable
  // connection appears.
  class DrainListener {
   public:
    virtual ~DrainListener() = default;
    virtual void OnConnectionDraining(std::uint64_t connection_id,
                                      absl::string_view why) = 0;
    // A connection became usable (READY, SERVING where health-checked, not
    // draining or suspect) after a time with none. Default: nothing.
    virtual void OnConnectionAvailable() {}
  };

  // What a stream knows about an attempt that ended, or that it gave up on,
  // without the source having announced a drain.
  struct EndReport {
    // The attempt's end (UNAVAILABLE, CANCELLED not by the client, ...), or
    // the status tether gave a stalled attempt.
    absl::Status status;
    // Nothing had arrived on the attempt: a connection that fails new calls
    // at once is going away (or broken); one stream's end after it delivered
    // says little about the connection.
    bool before_first_message = false;
    // tether gave up on the attempt: nothing arrived for `stall_timeout`.
    bool stalled = false;
  };

  virtual ~ConnectionSource() = default;

  // Picks a connection for a new attempt: one that is READY and not draining
  // when there is one, else a new or connecting one. Every successful pick is
  // paired with one `Release`. `listener` is held weakly and is told if the
  // picked connection starts draining while the pick is held.
  virtual absl::StatusOr<ConnectionPick> Pick(
      std::weak_ptr<DrainListener> listener) = 0;

  // The attempt that picked `connection_id` for `listener` has ended.
  virtual void Release(std::uint64_t connection_id,
                       const std::weak_ptr<DrainListener>& listener) = 0;

  // An attempt on `connection_id` ended with a drain-class status (UNAVAILABLE,
  // or CANCELLED not by the client) that the source had not announced. If the
  // connection still looks READY it is suspect: the source must not pick it
  // again.
  virtual void ReportDrainEnd(std::uint64_t connection_id,
                              const absl::Status& status) = 0;

  // An attempt on `connection_id` ended (or stalled) in a way that may mean
  // the connection is going away although the source announced nothing. The
  // source weighs the evidence (see `ConnectionPool`) and may stop picking the
  // connection. Default: `ReportDrainEnd(connection_id, report.status)`.
  virtual void ReportUnannouncedEnd(std::uint64_t connection_id,
                                    const EndReport& report) {
    ReportDrainEnd(connection_id, report.status);
  }

  // Asks to be told once, through `listener->OnConnectionAvailable()`, when a
  // usable connection appears after a time with none (a stream waiting out
  // its backoff then reopens at once instead of at its timer). Held weakly.
  // Default: never tells (the stream's own timers still run).
  virtual void NotifyWhenAvailable(std::weak_ptr<DrainListener> /*listener*/) {}

  // Whether `connection_id` is connected (READY) right now. A stream counts
  // an attempt that stayed open for its settle time as healthy only while
  // this holds: a call may sit open on a connection that never connected.
  // Default: true (a source that cannot tell).
  virtual bool IsConnected(std::uint64_t /*connection_id*/) { return true; }

  // Where a stream leaving draining `connection_id` starts its replacement
  // within its spread window (`migration_jitter`), as a fraction in [0, 1);
  // asked once per stream told of the drain. A source that answers can fill
  // the window evenly for the streams leaving one connection, where their
  // independent draws would bunch (`ConnectionPool` does). Default: no
  // answer (the stream draws its point at random).
  virtual absl::optional<double> SpreadShare(
      std::uint64_t /*connection_id*/) {
    return absl::nullopt;
  }

  // Where a stream whose attempt on `connection_id` ended after it delivered
  // (a server that cut its streams, a lost connection) reopens within its
  // `reopen_after_progress_jitter`, as a fraction in [0, 1); asked once per
  // such end. A source that answers can size the spread to the herd: one
  // stream reopens at once, the many that one connection loses together
  // spread out (`ConnectionPool` does). Default: no answer (the stream
  // draws its delay at random).
  virtual absl::optional<double> ReopenShare(
      std::uint64_t /*connection_id*/) {
    return absl::nullopt;
  }
};

// A source with exactly one channel: every pick is that channel (id 1). It
// never announces a drain. Use a `ConnectionPool` for drain awareness.
std::shared_ptr<ConnectionSource> SingleChannelSource(
    std::shared_ptr<grpc::Channel> channel);

// One running attempt (one gRPC call), as the stream sees it.
//
// Thread safety: both methods may be called from any thread, concurrently
// with the attempt's listener callbacks, and after the attempt has ended (then
// they do nothing).
class Attempt {
 public:
  virtual ~Attempt() = default;
  // Continues reading after `AttemptListener::OnMessage` returned false.
  virtual void Resume() = 0;
  // Cancels the call. `AttemptListener::OnEnd` still follows, exactly once.
  virtual void Cancel() = 0;
};

// Receives one attempt's messages and its end.
//
// The attempt calls `OnMessage` for each message, one at a time, never
// concurrently with another call for the same attempt, and `OnEnd` exactly
// once, last. The end has one entry point, so a listener that wraps another
// cannot pass the status on and lose the trailers.
template <class Response>
class AttemptListener {
 public:
  virtual ~AttemptListener() = default;
  // Returns true to keep reading; false pauses the attempt until `Resume`.
  virtual bool OnMessage(Response&& response) = 0;
  // The end, with the server's trailing metadata (empty when there is none,
  // e.g. a call that never reached a server, or a cancelled one).
  virtual void OnEnd(const absl::Status& status,
                     const Metadata& trailing_metadata) = 0;
};

namespace internal {

// The listener a factory's attempt is given: forwards to the stream.
template <class Response>
class SinkListener final : public AttemptListener<Response> {
 public:
  explicit SinkListener(AttemptSink sink) : sink_(std::move(sink)) {}
  bool OnMessage(Response&& response) override {
    return sink_.OnMessage(&response);
  }
  void OnEnd(const absl::Status& status, const Metadata& trailers) override {
    sink_.OnEnd(status, trailers);
  }

 private:
  AttemptSink sink_;
};

}  // namespace internal

// Starts attempts. The production factory calls the user's generated stub.
template <class Request, class Response>
class AttemptFactory : public internal::UntypedAttemptFactory {
 public:
  // Starts one call on `connection` with `request`, knowing which attempt
  // this is (`info`: number, reason, resume position, connection).
  // Callbacks to `listener` may begin before this returns, on this or
  // another thread.
  virtual std::shared_ptr<Attempt> StartAttempt(
      const ConnectionPick& connection, const AttemptInfo& info,
      const Request& request,
      std::shared_ptr<AttemptListener<Response>> listener) = 0;

 private:
  // How the stream calls it (internal/attempt_sink.h).
  std::shared_ptr<Attempt> StartUntyped(const ConnectionPick& connection,
                                        const AttemptInfo& info,
                                        const void* request,
                                        internal::AttemptSink sink) final {
    return StartAttempt(
        connection, info, *static_cast<const Request*>(request),
        std::make_shared<internal::SinkListener<Response>>(std::move(sink)));
  }
};

// What a bidi attempt does next (`BidiWrites<Request>::Next`).
enum class BidiNext {
  kWrite,       // `*out` is the next request; call `Written` once written
  kWritesDone,  // half-close the call (once)
  kNothing,     // nothing now: take again after the wake-up
};

// What one bidi attempt writes, in order: the open requests built from where
// it resumes, then the app's writes not yet acknowledged (replays), then new
// ones, then (after the app's `WritesDone`) a half-close. The attempt pulls:
// one write at a time.
//
// Thread safety: all methods may be called from any thread; the attempt
// calls `Take`/`Written` one at a time.
template <class Request>
class BidiWrites {
 public:
  using Next = BidiNext;
  virtual ~BidiWrites() = default;
  virtual Next Take(std::shared_ptr<const Request>* out) = 0;
  // The request `Take` gave was written (`ok`) or the call's write side
  // failed (`!ok`: nothing more is written).
  virtual void Written(bool ok) = 0;
  // `wake` runs, with no tether lock held and on any thread, whenever `Take`
  // may have something new. Set it once, before the first `Take`.
  virtual void SetWakeup(std::function<void()> wake) = 0;
};

namespace internal {

// One bidi attempt's writes as the typed `BidiWrites` a factory takes.
template <class Request>
class TypedBidiWrites final : public BidiWrites<Request> {
 public:
  explicit TypedBidiWrites(std::shared_ptr<AttemptWrites> writes)
      : writes_(std::move(writes)) {}
  BidiNext Take(std::shared_ptr<const Request>* out) override {
    std::shared_ptr<const void> request;
    const BidiNext next = writes_->Take(&request);
    if (next == BidiNext::kWrite) {
      *out = std::static_pointer_cast<const Request>(std::move(request));
    }
    return next;
  }
  void Written(bool ok) override { writes_->Written(ok); }
  void SetWakeup(std::function<void()> wake) override {
    writes_->SetWakeup(std::move(wake));
  }

 private:
  const std::shared_ptr<AttemptWrites> writes_;
};

// The listener a factory's bidi attempt is given: forwards to the stream,
// and closes the attempt's writes at its end first.
template <class Response>
class ClosingSinkListener final : public AttemptListener<Response> {
 public:
  ClosingSinkListener(AttemptSink sink, std::shared_ptr<AttemptWrites> writes)
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
  const std::shared_ptr<AttemptWrites> writes_;
};

}  // namespace internal

// Starts bidi attempts. The production factory calls the user's generated
// stub (`ClientBidiReactor`); `tether::fakes::FakeBidiTransport` plugs in
// here.
template <class Request, class Response>
class BidiAttemptFactory : public internal::UntypedBidiAttemptFactory {
 public:
  // Starts one call on `connection` that resumes from `resume` and writes
  // what `writes` gives, knowing which attempt this is (`info`: number,
  // reason, resume position, connection). Callbacks to `listener` may begin
  // before this returns, on this or another thread.
  virtual std::shared_ptr<Attempt> StartAttempt(
      const ConnectionPick& connection, const AttemptInfo& info,
      const ResumeState& resume, std::shared_ptr<BidiWrites<Request>> writes,
      std::shared_ptr<AttemptListener<Response>> listener) = 0;

 private:
  // How the stream calls it (internal/attempt_sink.h).
  std::shared_ptr<Attempt> StartUntyped(
      const ConnectionPick& connection, const AttemptInfo& info,
      const ResumeState& resume,
      std::shared_ptr<internal::AttemptWrites> writes,
      internal::AttemptSink sink) final {
    return StartAttempt(
        connection, info, resume,
        std::make_shared<internal::TypedBidiWrites<Request>>(writes),
        std::make_shared<internal::ClosingSinkListener<Response>>(
            std::move(sink), writes));
  }
};

}  // namespace tether

#endif  // TETHER_TRANSPORT_H_
