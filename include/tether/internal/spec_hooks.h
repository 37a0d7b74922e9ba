// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: checks the shared fields of a stream spec (`StreamSpecBase`:
// positions, cursors, resync, drain notices) and turns them into the core's
// hooks, once for both kinds of stream.
#ifndef TETHER_INTERNAL_SPEC_HOOKS_H_
#define TETHER_INTERNAL_SPEC_HOOKS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/types/optional.h"
#include "tether/function.h"
#include "tether/internal/stream_core.h"
#include "tether/position.h"
#include "tether/stream_spec_base.h"

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

// Checks the fields `f` says a spec sets (and, for a server stream, its
// resume hooks; for a bidi stream `server_resume` is null) and the position
// to start after (`initial`, the field named `initial_field`), then fills
// `hooks`: which fields are set, and those that do not name the message
// types (`initial_cursor`, `resync_on_end`, `resync`, moved out of the
// spec). On an error nothing is moved. Compiled in the library.
absl::Status TakeUntypedFields(
    const PositionFields& f, const ServerResumeFields* server_resume,
    const absl::optional<std::uint64_t>& initial, const char* what,
    const char* initial_field, absl::optional<std::string>& initial_cursor,
    Function<bool(const absl::Status&)>& resync_on_end,
    Function<void(ResyncDone)>& resync, StreamHooks& hooks);

// `TakeUntypedFields` for `spec`. The typed functions stay in the spec:
// `ResponseFunctions` takes them. `configure_attempt` stays too: each kind
// hands it to its own attempts.
template <class Response>
absl::Status TakeSharedFields(StreamSpecBase<Response>& spec,
                              const ServerResumeFields* server_resume,
                              const absl::optional<std::uint64_t>& initial,
                              const char* what, const char* initial_field,
                              StreamHooks& hooks) {
  return TakeUntypedFields(PositionFieldsOf(spec), server_resume, initial, what,
                           initial_field, spec.initial_cursor,
                           spec.resync_on_end, spec.resync, hooks);
}

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_SPEC_HOOKS_H_
