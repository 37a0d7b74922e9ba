// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/spec_hooks.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tether/internal/message_store.h"

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

absl::Status TakeSpec(const Target& target, SpecFacts& facts,
                      StreamParts& parts,
                      const ReconnectingStreamOptions& options, bool on_done,
                      StreamHooks& hooks) {
  if (facts.callbacks && (!parts.store()->has_on_message() || !on_done)) {
    return absl::InvalidArgumentError(absl::StrCat(
        facts.stream, "::Start needs both on_message and on_done"));
  }
  absl::Status s = Validate(options);
  if (!s.ok()) return s;
  if (!target.source()) {
    return absl::InvalidArgumentError(
        absl::StrCat(facts.stream, " needs a target"));
  }
  if (!facts.start) {
    return absl::InvalidArgumentError(absl::StrCat(
        facts.spec, ".start is empty (and no attempt_factory was given)"));
  }
  if (!facts.server && !facts.open_requests) {
    return absl::InvalidArgumentError(absl::StrCat(
        facts.spec,
        ".open_requests is empty: an attempt would not know what to write "
        "first (return an empty vector for nothing)"));
  }
  const PositionFields& f = facts.fields;
  s = CheckPositionFields(f, facts.spec);
  if (s.ok() && facts.server) {
    s = CheckServerResumeFields(f, facts.server_resume.resume_after,
                                facts.server_resume.resume_from_cursor,
                                facts.spec);
  }
  if (s.ok()) {
    s = CheckInitialPosition(f, facts.initial.has_value(), facts.spec,
                             facts.initial_field);
  }
  if (!s.ok()) return s;
  hooks.initial_position = facts.initial;
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
    rare.initial_cursor = std::move(*facts.initial_cursor);
    rare.resync_on_end = std::move(*facts.resync_on_end);
    rare.resync = std::move(*facts.resync);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<StreamCore>> StartServerStream(
    const Target& target, SpecFacts& facts, StreamParts* parts,
    ReconnectingStreamOptions& options,
    Function<void(const absl::Status&)> on_done) {
  std::unique_ptr<StreamParts> owned(parts);
  StreamHooks hooks;
  absl::Status s = TakeSpec(target, facts, *owned, options,
                            static_cast<bool>(on_done), hooks);
  if (!s.ok()) return s;
  hooks.resume = facts.server_resume.resume_after ||
                 facts.server_resume.resume_from_cursor;
  absl::StatusOr<std::shared_ptr<StreamCore>> core =
      StreamCore::Create(target.source(), std::move(owned), std::move(hooks),
                         std::move(options), std::move(on_done));
  if (core.ok()) (*core)->StartFirst();
  return core;
}

}  // namespace internal
}  // namespace tether
