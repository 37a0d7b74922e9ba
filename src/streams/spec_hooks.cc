// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/spec_hooks.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tether {
namespace internal {

absl::Status CheckPositionFields(const PositionFields& spec, const char* what) {
  const int readers = (spec.sequence_of ? 1 : 0) + (spec.position_of ? 1 : 0) +
                      (spec.cursor_of ? 1 : 0);
  if (readers > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": set at most one of sequence_of, position_of and cursor_of"));
  }
  if (spec.trim_delivered && !spec.position_of) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ".trim_delivered needs position_of (batches)"));
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
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     ".resync is set but neither resync_on_message nor "
                     "resync_on_end says when to call it"));
  }
  if (trigger && !spec.resync) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ".",
        spec.resync_on_message ? "resync_on_message" : "resync_on_end",
        " is set but resync is empty"));
  }
  if (spec.resync && !spec.sequence_of && !spec.position_of) {
    return absl::InvalidArgumentError(absl::StrCat(
        what,
        ".resync needs integer positions (sequence_of or position_of): "
        "it gives the position to resume after"));
  }
  if (spec.deliver_drain_notice && !spec.is_drain_notice) {
    return absl::InvalidArgumentError(absl::StrCat(
        what,
        ".deliver_drain_notice needs is_drain_notice (which message is "
        "a notice)"));
  }
  return absl::OkStatus();
}

absl::Status CheckInitialPosition(const PositionFields& spec, bool initial,
                                  const char* what, const char* field) {
  if (initial && !spec.sequence_of && !spec.position_of) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ".", field, " needs sequence_of or position_of"));
  }
  return absl::OkStatus();
}

absl::Status CheckServerResumeFields(const PositionFields& spec,
                                     bool resume_after, bool resume_from_cursor,
                                     const char* what) {
  if ((spec.sequence_of || spec.position_of) && !resume_after) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ".", spec.sequence_of ? "sequence_of" : "position_of",
        " is set but resume_after is empty: a reopen could not resume"));
  }
  if (!spec.sequence_of && !spec.position_of && resume_after) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     ".resume_after is set but sequence_of and position_of are "
                     "empty"));
  }
  if (spec.cursor_of && !resume_from_cursor) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     ".cursor_of is set but resume_from_cursor is empty: a "
                     "reopen could not resume"));
  }
  if (!spec.cursor_of && resume_from_cursor) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ".resume_from_cursor is set but cursor_of is empty"));
  }
  return absl::OkStatus();
}

absl::Status TakeUntypedFields(
    const PositionFields& f, const ServerResumeFields* server_resume,
    const absl::optional<std::uint64_t>& initial, const char* what,
    const char* initial_field, absl::optional<std::string>& initial_cursor,
    Function<bool(const absl::Status&)>& resync_on_end,
    Function<void(ResyncDone)>& resync, StreamHooks& hooks) {
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
  if (f.sequence_of) {
    hooks.position_name = "sequence_of";
    hooks.position_of = true;
  } else if (f.position_of) {
    hooks.position_of = true;
  }
  hooks.spacing = f.spacing;
  hooks.deliver_progress = f.deliver_progress;
  if (f.trim_delivered || f.cursor_of || f.initial_cursor ||
      f.resync_on_message || f.resync_on_end || f.resync || f.is_drain_notice) {
    StreamHooks::Rare& rare = hooks.MutableRare();
    rare.trim_delivered = f.trim_delivered;
    rare.cursor_of = f.cursor_of;
    rare.resync_on_message = f.resync_on_message;
    rare.drain_notice = f.is_drain_notice;
    rare.deliver_drain_notice = f.deliver_drain_notice;
    rare.initial_cursor = std::move(initial_cursor);
    rare.resync_on_end = std::move(resync_on_end);
    rare.resync = std::move(resync);
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace tether
