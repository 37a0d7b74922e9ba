// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: checks the shared fields of a stream spec (`StreamSpecBase`:
// positions, cursors, resync, drain notices) and turns them into the core's
// hooks, once for both kinds of stream.
#ifndef TETHER_INTERNAL_SPEC_HOOKS_H_
#define TETHER_INTERNAL_SPEC_HOOKS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "tether/function.h"
#include "tether/internal/stream_core.h"
#include "tether/position.h"
#include "tether/stream_options.h"
#include "tether/stream_spec_base.h"
#include "tether/target.h"

namespace tether {
namespace internal {

// Which of `StreamSpecBase`'s fields a spec sets. The checks below are
// compiled in the library, not in every user translation unit (compile
// time).
struct PositionFields {
  bool sequence_of = false;
  bool position_of = false;
  bool cursor_of = false;
  bool trim_delivered = false;
  bool deliver_progress = false;
  PositionSpacing spacing = PositionSpacing::kDense;
  bool initial_cursor = false;
  bool resync_on_message = false;
  bool resync_on_end = false;
  bool resync = false;
  bool is_drain_notice = false;
  bool deliver_drain_notice = false;
};

template <class Response>
PositionFields PositionFieldsOf(const StreamSpecBase<Response>& spec) {
  PositionFields f;
  f.sequence_of = static_cast<bool>(spec.sequence_of);
  f.position_of = static_cast<bool>(spec.position_of);
  f.cursor_of = static_cast<bool>(spec.cursor_of);
  f.trim_delivered = static_cast<bool>(spec.trim_delivered);
  f.deliver_progress = spec.deliver_progress;
  f.spacing = spec.spacing;
  f.initial_cursor = spec.initial_cursor.has_value();
  f.resync_on_message = static_cast<bool>(spec.resync_on_message);
  f.resync_on_end = static_cast<bool>(spec.resync_on_end);
  f.resync = static_cast<bool>(spec.resync);
  f.is_drain_notice = static_cast<bool>(spec.is_drain_notice);
  f.deliver_drain_notice = spec.deliver_drain_notice;
  return f;
}

// INVALID_ARGUMENT naming the spec (`what`) and the fields at fault, for:
// more than one of sequence_of/position_of/cursor_of; trim_delivered or
// deliver_progress or spacing without position_of; initial_cursor without
// cursor_of; resync without a trigger, a trigger without resync, or resync
// with cursors; deliver_drain_notice without is_drain_notice.
absl::Status CheckPositionFields(const PositionFields& f, const char* what);

// INVALID_ARGUMENT when the spec gives a position to start after
// (`initial`, its field named `field`) but no integer positions to compare
// it with (sequence_of or position_of).
absl::Status CheckInitialPosition(const PositionFields& f, bool initial,
                                  const char* what, const char* field);

// Server streams: the resume hooks (resume_after / resume_from_cursor) go
// with their readers. Bidi streams resume through open_requests instead.
absl::Status CheckServerResumeFields(const PositionFields& f, bool resume_after,
                                     bool resume_from_cursor, const char* what);

// Which resume hooks a server stream's spec sets (a bidi stream resumes
// through its open requests).
struct ServerResumeFields {
  bool resume_after = false;
  bool resume_from_cursor = false;
};

// What a stream's `Make` tells the library about its spec: which fields are
// set, the names its errors use, and where the untyped fields are that the
// stream takes once the spec checks. Filled by `SpecFactsOf` and each kind.
struct SpecFacts {
  // For error messages: the stream's class ("ReconnectingStream"), its
  // spec's ("StreamSpec"), and the field of the position to start after.
  const char* stream = "";
  const char* spec = "";
  const char* initial_field = "";
  // Started with `Start` (needs on_message and on_done), not `Open`.
  bool callbacks = false;
  bool start = false;  // `start` or `attempt_factory` set
  PositionFields fields;
  // A server stream's resume hooks; a bidi stream (`server` false) resumes
  // through its open requests, which it must have.
  bool server = true;
  ServerResumeFields server_resume;
  bool open_requests = false;
  absl::optional<std::uint64_t> initial;
  // Moved into the stream's hooks once everything checks.
  absl::optional<std::string>* initial_cursor = nullptr;
  Function<bool(const absl::Status&)>* resync_on_end = nullptr;
  Function<void(ResyncDone)>* resync = nullptr;
};

// The facts every spec has (`StreamSpecBase`'s); the kind fills the rest.
template <class Response>
SpecFacts SpecFactsOf(StreamSpecBase<Response>& spec) {
  SpecFacts facts;
  facts.fields = PositionFieldsOf(spec);
  facts.initial_cursor = &spec.initial_cursor;
  facts.resync_on_end = &spec.resync_on_end;
  facts.resync = &spec.resync;
  return facts;
}

// Checks what `Start` or `Open` was given, in this order: on_message and
// on_done (with `facts.callbacks`), `options`, `target`, the spec
// (`facts`). Then fills `hooks`: which fields are set, and the fields that
// do not name the message types (moved out of the spec). INVALID_ARGUMENT
// naming what is wrong; then nothing is moved.
absl::Status TakeSpec(const Target& target, SpecFacts& facts,
                      StreamParts& parts,
                      const ReconnectingStreamOptions& options, bool on_done,
                      StreamHooks& hooks);

// Checks `options`, `target` and the spec (`facts`), then creates a server
// stream's core around `parts` and starts its first attempt. `parts` is
// owned from here on, also when this fails. INVALID_ARGUMENT naming what is
// wrong (then nothing starts). Compiled in the library, so that a user
// translation unit compiles none of it.
absl::StatusOr<std::shared_ptr<StreamCore>> StartServerStream(
    const Target& target, SpecFacts& facts, StreamParts* parts,
    ReconnectingStreamOptions& options,
    Function<void(const absl::Status&)> on_done);

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_SPEC_HOOKS_H_
