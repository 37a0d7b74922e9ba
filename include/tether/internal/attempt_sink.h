// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: the untyped seam between a stream and its attempts. The stream
// machine knows no message types; it hands each attempt an `AttemptSink`
// (where messages and the end go) and, for a bidi attempt, its
// `AttemptWrites` (what to write). The public typed factories
// (tether/transport.h) implement the untyped entry points below, so a stream
// starts an app's factory without naming the message types: the typed
// adapters are compiled only where an app defines a factory (with the
// factory's vtable), not in every translation unit that starts a stream.
#ifndef TETHER_INTERNAL_ATTEMPT_SINK_H_
#define TETHER_INTERNAL_ATTEMPT_SINK_H_

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "tether/classification.h"
#include "tether/internal/visibility.h"

namespace tether {

class Attempt;
struct AttemptInfo;
struct ConnectionPick;
struct ResumeState;
enum class BidiNext;

namespace internal {

class StreamCore;
// One attempt, as the machine sees it (stream_machine.h).
struct TETHER_HIDDEN_TYPE AttemptRecord;

// The core's side of one attempt: what a typed `AttemptListener` forwards
// to. Same contract as `AttemptListener` (one call at a time, `OnEnd` once,
// last). Keeps the stream alive until the attempt drops its listener: the
// attempt decides on which thread that last release happens (never a gRPC
// callback thread; see GrpcReadPump::Done).
class TETHER_API AttemptSink final {
 public:
  AttemptSink(std::shared_ptr<StreamCore> core,
              std::shared_ptr<AttemptRecord> rec);
  ~AttemptSink();
  AttemptSink(AttemptSink&&) noexcept;
  // `*response` (the stream's Response) may be moved from. Returns whether
  // the attempt may read on.
  bool OnMessage(void* response);
  void OnEnd(const absl::Status& status, const Metadata& trailers);

 private:
  std::shared_ptr<StreamCore> core_;
  std::shared_ptr<AttemptRecord> rec_;
};

// What one bidi attempt writes (`BidiWrites<Request>`'s contract), with
// the requests untyped (`std::shared_ptr<const Request>` as `const void`).
// The stream's outbox implements it (`BidiOutbox::Writes`). `Close` is the
// attempt's end: it writes nothing more.
class AttemptWrites {
 public:
  virtual ~AttemptWrites() = default;
  virtual BidiNext Take(std::shared_ptr<const void>* out) = 0;
  virtual void Written(bool ok) = 0;
  virtual void SetWakeup(std::function<void()> wake) = 0;
  virtual void Close() = 0;
};

// How a stream starts an attempt through `AttemptFactory<Request,
// Response>` (`request` is a Request).
class UntypedAttemptFactory {
 public:
  virtual ~UntypedAttemptFactory() = default;
  virtual std::shared_ptr<Attempt> StartUntyped(
      const ConnectionPick& connection, const AttemptInfo& info,
      const void* request, AttemptSink sink) = 0;
};

// How a stream starts an attempt through `BidiAttemptFactory<Request,
// Response>`.
class UntypedBidiAttemptFactory {
 public:
  virtual ~UntypedBidiAttemptFactory() = default;
  virtual std::shared_ptr<Attempt> StartUntyped(
      const ConnectionPick& connection, const AttemptInfo& info,
      const ResumeState& resume, std::shared_ptr<AttemptWrites> writes,
      AttemptSink sink) = 0;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_ATTEMPT_SINK_H_
