// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_OBSERVER_H_
#define TETHER_OBSERVER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tether/classification.h"

namespace tether {

// Why a stream opened a new attempt.
enum class AttemptReason {
  kFirst,        // the stream's first attempt
  kReopen,       // the previous attempt ended and was classified retryable
  kMigration,    // the previous attempt's connection is draining (make before
                 // break: the old attempt still runs until this one delivers)
  kResync,       // the resume position could not be used; the stream starts
                 // again from a position the application supplied
  kDrainNotice,  // the server sent its drain notice on the previous attempt
                 // (make before break, as kMigration)
};

absl::string_view AttemptReasonName(AttemptReason r);

// Which kind of stream an observer watches (a metrics label).
enum class StreamKind {
  kServerStream,  // `ReconnectingStream`: "server_stream"
  kBidi,          // `ReconnectingBidiStream`: "bidi"
};

absl::string_view StreamKindName(StreamKind k);

// How a stream ended, as `StreamObserver::OnStreamEnded` reports it.
enum class StreamEnd {
  kFinished,   // the server ended the stream OK: "finished"
  kCancelled,  // the app cancelled or destroyed it: "cancelled"
  kGaveUp,     // the reopen budget was spent: "gave_up"
  kFailed,     // a permanent status, a callback that threw, a failed
               // resync, an open breaker with `fail_fast_on_open_breaker`:
               // "failed"
};

absl::string_view StreamEndName(StreamEnd e);

// Which attempt this is: handed to the observer and, before each attempt
// starts, to `StreamSpec::configure_attempt` (per-attempt metadata,
// deadlines, tracing).
struct AttemptInfo {
  std::uint64_t attempt = 0;        // 1, 2, ... per stream
  std::uint64_t connection_id = 0;  // the connection the attempt runs on
  AttemptReason reason = AttemptReason::kFirst;
  // The resume position written into the request, if any.
  bool resumed = false;
  std::uint64_t resume_after_seq = 0;
};

// Receives every event of a stream, for metrics and logs.
//
// All methods have empty defaults; override what you need. Methods are called
// without any tether lock held, from gRPC threads or the clock's thread, and
// for one stream they may run concurrently with each other (an old and a new
// attempt overlap during a migration) but never concurrently with that
// stream's message callback for the same message. Implementations must be
// thread-safe and must not block. One observer may serve many streams; it
// must outlive them (streams hold a `std::shared_ptr`).
class StreamObserver {
 public:
  virtual ~StreamObserver() = default;

  virtual void OnAttemptStarted(const AttemptInfo& /*info*/) {}
  // The first message of an attempt arrived (duplicate or not).
  virtual void OnFirstMessage(const AttemptInfo& /*info*/,
                              absl::Duration /*since_start*/) {}
  // An attempt ended. `cancelled_by_client` attempts (tether's own
  // migrations, the app's cancel) are reported with class `kOk` and
  // `by_client` true; they are never failures.
  virtual void OnAttemptEnded(const AttemptInfo& /*info*/,
                              const absl::Status& /*status*/,
                              EndClass /*classified*/, bool /*by_client*/) {}
  // A message with `seq <= last_delivered` was dropped.
  virtual void OnDuplicateDropped(std::uint64_t /*seq*/,
                                  std::uint64_t /*last_delivered*/) {}
  // A message skipped sequence numbers: `expected` was due, `got` arrived.
  virtual void OnGap(std::uint64_t /*expected*/, std::uint64_t /*got*/) {}
  // The stream waits `delay` before its next attempt.
  virtual void OnBackoff(absl::Duration /*delay*/,
                         const absl::Status& /*last_status*/) {}
  // The retry budget (`ReconnectingStreamOptions::retry_budget`) had no
  // retry for this reopen: it waits `added` longer than its backoff (the
  // `OnBackoff` that follows has the whole delay).
  virtual void OnRetryBudgetWait(absl::Duration /*added*/) {}
  // The reopen budget is spent; the stream ends with `status`.
  virtual void OnGaveUp(const absl::Status& /*status*/) {}
  // Nothing arrived on an attempt for `stall_timeout` (`silent_for`): the
  // stream moves to another connection and reports this one.
  virtual void OnStalled(const AttemptInfo& /*info*/,
                         absl::Duration /*silent_for*/) {}
  // The stream could not resume from its position (`why`: the end or the
  // message that said so) and the app's `resync` gave `resume_after`; the
  // next attempt resumes after it.
  virtual void OnResync(const absl::Status& /*why*/,
                        std::uint64_t /*resume_after*/) {}
  // A connection this stream uses started draining.
  virtual void OnConnectionDraining(std::uint64_t /*connection_id*/,
                                    absl::string_view /*why*/) {}
  // Attempt `info` received the server's drain notice
  // (`StreamSpec::is_drain_notice`): the stream moves off it, and its next
  // attempt starts for `AttemptReason::kDrainNotice`.
  virtual void OnDrainNotice(const AttemptInfo& /*info*/) {}
  // A message was handed to the app (after its `on_message` returned, or
  // by `Read`). Called once per message, on the delivering thread: keep it
  // cheap.
  virtual void OnMessageDelivered() {}
  // The stream's end is decided: `status` goes to the app next. Once per
  // stream; not called for a stream destroyed before its end.
  virtual void OnStreamEnded(const absl::Status& /*status*/,
                             StreamEnd /*how*/) {}
  // Bidi streams: the outbox (writes not yet acknowledged, or without
  // `acknowledges` not yet written) grew or shrank by `delta`. Calls for
  // one stream may arrive in another order than the changes (sum the
  // deltas; do not read an order into them). Not called after the end.
  virtual void OnOutboxChanged(std::int64_t /*delta*/) {}
  // Bidi streams: `Write` returned RESOURCE_EXHAUSTED (the outbox held
  // `max_outbox` writes).
  virtual void OnWriteRefused() {}
};

}  // namespace tether

#endif  // TETHER_OBSERVER_H_
