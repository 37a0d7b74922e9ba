// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/position_gate.h"

#include "absl/strings/str_cat.h"

namespace tether {
namespace internal {

PositionGate::Admission PositionGate::Admit(
    Cursor& cursor, const absl::optional<Position>& pos,
    absl::optional<std::uint64_t> trimmed_at, std::uint64_t attempt) {
  Admission a;
  if (!pos) {
    a.verdict = Verdict::kFail;
    a.error = absl::InternalError(absl::StrCat(
        "tether: attempt ", attempt,
        " received a message without a sequence number (after seq ", last_,
        "); the stream cannot resume safely"));
    return a;
  }
  if (pos->kind() == Position::Kind::kNone) return a;
  const std::uint64_t first = pos->first(), last = pos->last();
  if (first > last) {
    a.verdict = Verdict::kFail;
    a.error = absl::InternalError(absl::StrCat(
        "tether: attempt ", attempt, " received a batch Items(", first, ", ",
        last, ") whose first position is above its last"));
    return a;
  }
  if (cursor.has_seq && first < cursor.last_seq) {
    a.verdict = Verdict::kFail;
    a.error = absl::InternalError(absl::StrCat(
        "tether: positions went backwards within attempt ", attempt, ": ",
        first, " after ", cursor.last_seq));
    return a;
  }
  if (pos->kind() == Position::Kind::kProgress) {
    cursor.has_seq = true;
    cursor.last_seq = last;
    if (has_last_ && last <= last_) {
      a.verdict = Verdict::kStale;
      return a;
    }
    has_last_ = true;
    last_ = last;
    a.verdict = Verdict::kProgress;
    return a;
  }
  if (has_last_ && last <= last_) {
    cursor.has_seq = true;
    cursor.last_seq = last;
    a.verdict = Verdict::kDuplicate;
    return a;
  }
  if (has_last_ && first <= last_) {
    // A batch that straddles the position: deliver only its new items.
    if (!can_trim_) {
      a.verdict = Verdict::kFail;
      a.error = absl::FailedPreconditionError(absl::StrCat(
          "tether: attempt ", attempt, " received a batch Items(", first, ", ",
          last, ") that straddles the last delivered position ", last_,
          " and the spec has no trim_delivered hook: its items at or below ",
          last_, " would be delivered twice"));
      return a;
    }
    if (trimmed_at != last_) {
      a.verdict = Verdict::kTrim;
      a.trim_at = last_;
      return a;
    }
  } else if (has_last_ && spacing_ == PositionSpacing::kDense &&
             first > last_ + 1) {
    // `last_ + 1` cannot overflow here: first > last_.
    a.gap = true;
    a.expected = last_ + 1;
    if (policy_ == GapPolicy::kFail) {
      a.verdict = Verdict::kFail;
      a.error = absl::DataLossError(absl::StrCat(
          "tether: sequence gap: expected seq ", a.expected, ", got ", first));
      return a;
    }
  }
  cursor.has_seq = true;
  cursor.last_seq = last;
  has_last_ = true;
  last_ = last;
  return a;
}

}  // namespace internal
}  // namespace tether
