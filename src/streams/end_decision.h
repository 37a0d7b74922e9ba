// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: what a stream does when one of its attempts ends.
#ifndef TETHER_SRC_STREAMS_END_DECISION_H_
#define TETHER_SRC_STREAMS_END_DECISION_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tether/classification.h"
#include "tether/internal/visibility.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

// The facts about one attempt's end that decide what the stream does next.
// Gathered by the stream under its lock, after the app's classifier (and
// `resync_on_end`) ran outside it.
struct EndFacts {
  // The attempt's place in the stream when it ended.
  enum class Role {
    kCurrent,   // the attempt the stream reads from
    kFallback,  // a move's old attempt, still running beside its replacement
    kRetiring,  // cancelled by the stream and forgotten: only its end is left
  };
  Role role = Role::kCurrent;
  bool finishing = false;  // the stream's own end is already decided
  absl::Status status;     // the attempt's final status
  // The classifier's verdict; kResync when the end asked for a resync (the
  // classifier was not asked).
  EndClass cls = EndClass::kOk;
  bool by_client = false;        // the stream had cancelled it
  absl::Status callback_error;   // the classifier or resync_on_end threw
  bool announced_drain = false;  // a drain (or a drain notice) announced it
  bool progressed = false;       // it delivered at least one new message
  // The current attempt is a move's replacement whose old attempt still
  // runs (the stream can fall back to it).
  bool has_fallback = false;
  bool pushback_stop = false;  // the server's trailers ask for no retry
  // A move off this attempt was waiting in the spread window
  // (`migration_jitter`), and the attempt had proved healthy.
  bool spread_wait = false;
};

struct EndDecision {
  enum class Action {
    kNothing,  // a retiring attempt, or the stream's end is already decided
    kEnd,      // end the stream with `status`
    kResync,   // cancel everything and call the app's resync
    // The fallback ended before its replacement delivered: the replacement
    // runs on alone.
    kDropFallback,
    // The replacement failed: the stream falls back to the old attempt and
    // moves again after a failure's delay.
    kFallBack,
    // Open the next attempt after a delay: the one after progress
    // (`after_progress`) or a failure's.
    kReopen,
  };
  Action action = Action::kNothing;
  absl::Status status;  // kEnd
  bool after_progress = false;
  // Whether the server's pushback replaces the delay (not after the stream's
  // own cancel), and whether a start already in flight makes the reopen
  // unnecessary.
  bool use_pushback = true;
  bool unless_starting = true;
  // Tell the connection source that the connection ended without notice (a
  // drain-class end that no drain announced).
  bool report_unannounced = false;
  // The reopen is a retry after a failure (a transient end without
  // progress): it takes one from the process's retry budget. Drains, the
  // stream's own cancels (stalls, moves) and reopens after progress take
  // nothing.
  bool spends_retry = false;
  // kReopen: start the next attempt now, with no delay and no failure
  // counted. The server ended, as a drain, an attempt whose move was
  // waiting in the spread window: the move it waited for starts at once,
  // and the window adds no stall.
  bool at_once = false;
};

// The rules, in order: nothing once the stream's end is decided; a callback
// that threw ends the stream (INTERNAL naming it); an end that asks for a
// resync resyncs; a fallback's end leaves its replacement alone; a retiring
// attempt's end is nothing; the stream's own cancel reopens at once; the
// classifier's kOk ends the stream OK, kPermanent and a pushback of "no
// retry" end it with the status; a replacement's failure falls back; a
// drain that ends an attempt whose spread move waits reopens at once; else
// the stream reopens after progress or after a failure.
EndDecision DecideEnd(const EndFacts& facts);

// gRFC A6: the server's pushback (`pushback_present`, `pushback`) replaces
// the reopen budget's delay (`delay`, or the budget's verdict to give up,
// which stands). A pushback that would outlast `max_time` (infinite: no
// bound) without progress gives up at once: counted from `failing_since`
// while the stream is failing, else from `now` (the attempt made progress,
// and the wait would be time without any).
absl::StatusOr<absl::Duration> WithPushback(
    absl::StatusOr<absl::Duration> delay, bool pushback_present,
    absl::Duration pushback, absl::Time now, bool failing,
    absl::Time failing_since, absl::Duration max_time);

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_STREAMS_END_DECISION_H_
