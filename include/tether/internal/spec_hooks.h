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
#include "absl/strings/str_cat.h"
#include "tether/internal/stream_core.h"
#include "tether/position.h"

namespace tether {
namespace internal {

// INVALID_ARGUMENT naming the spec (`what`) and the fields at fault, for:
// more than one of sequence_of/position_of/cursor_of; a resume hook missing
// (or present without its reader); trim_delivered or deliver_progress or
// spacing without position_of; initial_cursor without cursor_of; resync
// without a trigger, a trigger without resync, or resync with cursors.
template <class Spec>
absl::Status CheckPositionFields(const Spec& spec, const char* what) {
  const int readers = (spec.sequence_of ? 1 : 0) + (spec.position_of ? 1 : 0) +
                      (spec.cursor_of ? 1 : 0);
  if (readers > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": set at most one of sequence_of, position_of and cursor_of"));
  }
  if (spec.trim_delivered && !spec.position_of) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ".trim_delivered needs position_of (batches)"));
  }
  if (spec.deliver_progress && !spec.position_of) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ".deliver_progress needs position_of (progress notices)"));
  }
  if (spec.spacing != PositionSpacing::kDense && !spec.position_of) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ".spacing needs position_of"));
  }
  if (spec.initial_cursor && !spec.cursor_of) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ".initial_cursor needs cursor_of"));
  }
  const bool trigger = spec.resync_on_message || spec.resync_on_end;
  if (spec.resync && !trigger) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ".resync is set but neither resync_on_message nor "
              "resync_on_end says when to call it"));
  }
  if (trigger && !spec.resync) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ".", spec.resync_on_message ? "resync_on_message" : "resync_on_end",
        " is set but resync is empty"));
  }
  if (spec.resync && !spec.sequence_of && !spec.position_of) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ".resync needs integer positions (sequence_of or position_of): "
              "it gives the position to resume after"));
  }
  return absl::OkStatus();
}

// Server streams: the resume hooks (resume_after / resume_from_cursor) go
// with their readers. Bidi streams resume through open_requests instead.
template <class Spec>
absl::Status CheckServerResumeFields(const Spec& spec, const char* what) {
  if ((spec.sequence_of || spec.position_of) && !spec.resume_after) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ".", spec.sequence_of ? "sequence_of" : "position_of",
        " is set but resume_after is empty: a reopen could not resume"));
  }
  if (!spec.sequence_of && !spec.position_of && spec.resume_after) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ".resume_after is set but sequence_of and position_of are "
              "empty"));
  }
  if (spec.cursor_of && !spec.resume_from_cursor) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ".cursor_of is set but resume_from_cursor is empty: a "
              "reopen could not resume"));
  }
  if (!spec.cursor_of && spec.resume_from_cursor) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ".resume_from_cursor is set but cursor_of is empty"));
  }
  return absl::OkStatus();
}

// Moves the position/cursor/resync fields of a checked spec into `hooks`
// (not `resume`, which depends on the kind of stream), each wrapped to take
// the type-erased `const void*` (a Response) the core passes.
template <class Response, class Spec>
void TakePositionFields(Spec& spec, StreamHooks& hooks) {
  if (spec.sequence_of) {
    hooks.position_name = "sequence_of";
    hooks.position_of = [f = std::move(spec.sequence_of)](const void* r)
        -> absl::optional<Position> {
      absl::optional<std::uint64_t> seq = f(*static_cast<const Response*>(r));
      if (!seq) return absl::nullopt;
      return Position::Item(*seq);
    };
  } else if (spec.position_of) {
    hooks.position_of = [f = std::move(spec.position_of)](const void* r)
        -> absl::optional<Position> {
      return f(*static_cast<const Response*>(r));
    };
  }
  hooks.spacing = spec.spacing;
  hooks.deliver_progress = spec.deliver_progress;
  if (spec.trim_delivered || spec.cursor_of || spec.initial_cursor ||
      spec.resync_on_message || spec.resync_on_end || spec.resync) {
    StreamHooks::Rare& rare = hooks.MutableRare();
    if (spec.trim_delivered) {
      rare.trim_delivered = [f = std::move(spec.trim_delivered)](
                                void* r, std::uint64_t at) {
        f(*static_cast<Response*>(r), at);
      };
    }
    if (spec.cursor_of) {
      rare.cursor_of = [f = std::move(spec.cursor_of)](const void* r) {
        return f(*static_cast<const Response*>(r));
      };
    }
    rare.initial_cursor = std::move(spec.initial_cursor);
    if (spec.resync_on_message) {
      rare.resync_on_message = [f = std::move(spec.resync_on_message)](
                                   const void* r) {
        return f(*static_cast<const Response*>(r));
      };
    }
    rare.resync_on_end = std::move(spec.resync_on_end);
    rare.resync = std::move(spec.resync);
  }
}

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_SPEC_HOOKS_H_
