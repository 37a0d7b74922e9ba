// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: checks the shared fields of a stream spec (`StreamSpecBase`:
// positions, cursors, resync, drain notices) and turns them into the core's
// hooks, once for both kinds of stream.
#ifndef TETHER_INTERNAL_SPEC_HOOKS_H_
#define TETHER_INTERNAL_SPEC_HOOKS_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/types/optional.h"
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
  bool sparse = false;  // spacing other than kDense
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
  f.sparse = spec.spacing != PositionSpacing::kDense;
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

// Checks the shared fields of `spec` (and, for a server stream, its resume
// hooks; for a bidi stream `server_resume` is null) and the position to
// start after (`initial`, the field named `initial_field`), then moves them
// into `fns` (the typed functions, as they are) and `hooks` (which are set,
// and the rest). On an error nothing is moved. `configure_attempt` stays:
// each kind hands it to its own attempt factory.
template <class Response>
absl::Status TakeSharedFields(StreamSpecBase<Response>& spec,
                              const ServerResumeFields* server_resume,
                              const absl::optional<std::uint64_t>& initial,
                              const char* what, const char* initial_field,
                              StreamHooks& hooks,
                              ResponseFunctions<Response>& fns) {
  const PositionFields f = PositionFieldsOf(spec);
  absl::Status s = CheckPositionFields(f, what);
  if (s.ok() && server_resume != nullptr) {
    s = CheckServerResumeFields(f, server_resume->resume_after,
                                server_resume->resume_from_cursor, what);
  }
  if (s.ok()) {
    s = CheckInitialPosition(f, initial.has_value(), what, initial_field);
  }
  if (!s.ok()) return s;
  hooks.initial_position = initial;
  if (spec.sequence_of) {
    hooks.position_name = "sequence_of";
    hooks.position_of = true;
    fns.sequence_of = std::move(spec.sequence_of);
  } else if (spec.position_of) {
    hooks.position_of = true;
    fns.position_of = std::move(spec.position_of);
  }
  hooks.spacing = spec.spacing;
  hooks.deliver_progress = spec.deliver_progress;
  if (f.trim_delivered || f.cursor_of || f.initial_cursor ||
      f.resync_on_message || f.resync_on_end || f.resync ||
      f.is_drain_notice) {
    StreamHooks::Rare& rare = hooks.MutableRare();
    if (f.trim_delivered || f.cursor_of || f.resync_on_message ||
        f.is_drain_notice) {
      auto& typed = fns.MutableRare();
      rare.trim_delivered = f.trim_delivered;
      rare.cursor_of = f.cursor_of;
      rare.resync_on_message = f.resync_on_message;
      rare.drain_notice = f.is_drain_notice;
      rare.deliver_drain_notice = f.deliver_drain_notice;
      typed.trim_delivered = std::move(spec.trim_delivered);
      typed.cursor_of = std::move(spec.cursor_of);
      typed.resync_on_message = std::move(spec.resync_on_message);
      typed.is_drain_notice = std::move(spec.is_drain_notice);
    }
    rare.initial_cursor = std::move(spec.initial_cursor);
    rare.resync_on_end = std::move(spec.resync_on_end);
    rare.resync = std::move(spec.resync);
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_SPEC_HOOKS_H_
