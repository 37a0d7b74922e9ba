// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: checks the position/cursor/resync fields of a stream spec
// (StreamSpec or BidiStreamSpec: the same field names) and turns them into
// the core's hooks.
#ifndef TETHER_INTERNAL_SPEC_HOOKS_H_
#define TETHER_INTERNAL_SPEC_HOOKS_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/types/optional.h"
#include "tether/internal/stream_core.h"
#include "tether/position.h"

namespace tether {
namespace internal {

// Which position/cursor/resync fields a spec sets (StreamSpec and
// BidiStreamSpec share their names). The checks below are compiled in the
// library, not in every user translation unit (compile time).
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

template <class Spec>
PositionFields PositionFieldsOf(const Spec& spec) {
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

template <class Spec>
absl::Status CheckPositionFields(const Spec& spec, const char* what) {
  return CheckPositionFields(PositionFieldsOf(spec), what);
}

// INVALID_ARGUMENT when the spec gives a position to start after
// (`initial`, its field named `field`) but no integer positions to compare
// it with (sequence_of or position_of).
absl::Status CheckInitialPosition(const PositionFields& f, bool initial,
                                  const char* what, const char* field);

template <class Spec>
absl::Status CheckInitialPosition(const Spec& spec,
                                  const absl::optional<std::uint64_t>& initial,
                                  const char* what, const char* field) {
  return CheckInitialPosition(PositionFieldsOf(spec), initial.has_value(), what,
                              field);
}

// Server streams: the resume hooks (resume_after / resume_from_cursor) go
// with their readers. Bidi streams resume through open_requests instead.
absl::Status CheckServerResumeFields(const PositionFields& f, bool resume_after,
                                     bool resume_from_cursor, const char* what);

template <class Spec>
absl::Status CheckServerResumeFields(const Spec& spec, const char* what) {
  return CheckServerResumeFields(
      PositionFieldsOf(spec), static_cast<bool>(spec.resume_after),
      static_cast<bool>(spec.resume_from_cursor), what);
}

// Moves the position/cursor/resync/drain notice fields of a checked spec into
// `fns` (the typed functions, as they are) and `hooks` (which are set, and the
// rest); not the resume functions, which depend on the kind of stream.
template <class Request, class Response, class Spec>
void TakePositionFields(Spec& spec, StreamHooks& hooks,
                        SpecFunctions<Request, Response>& fns) {
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
  if (spec.trim_delivered || spec.cursor_of || spec.initial_cursor ||
      spec.resync_on_message || spec.resync_on_end || spec.resync ||
      spec.is_drain_notice) {
    StreamHooks::Rare& rare = hooks.MutableRare();
    if (spec.trim_delivered || spec.cursor_of || spec.resync_on_message ||
        spec.is_drain_notice) {
      auto& typed = fns.MutableRare();
      rare.trim_delivered = static_cast<bool>(spec.trim_delivered);
      rare.cursor_of = static_cast<bool>(spec.cursor_of);
      rare.resync_on_message = static_cast<bool>(spec.resync_on_message);
      rare.drain_notice = static_cast<bool>(spec.is_drain_notice);
      rare.deliver_drain_notice = spec.deliver_drain_notice;
      typed.trim_delivered = std::move(spec.trim_delivered);
      typed.cursor_of = std::move(spec.cursor_of);
      typed.resync_on_message = std::move(spec.resync_on_message);
      typed.is_drain_notice = std::move(spec.is_drain_notice);
    }
    rare.initial_cursor = std::move(spec.initial_cursor);
    rare.resync_on_end = std::move(spec.resync_on_end);
    rare.resync = std::move(spec.resync);
  }
}

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_SPEC_HOOKS_H_
