// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/sequence_gate.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace tether {
namespace internal {

SequenceGate::Admission SequenceGate::Admit(Cursor& cursor,
                                            absl::optional<std::uint64_t> seq,
                                            std::uint64_t attempt) {
  Admission a;
  if (!seq) {
    a.verdict = Verdict::kFail;
    a.error = absl::InternalError(absl::StrCat(
        "tether: attempt ", attempt,
        " received a message without a sequence number (after seq ", last_,
        "); the stream cannot resume safely"));
    return a;
  }
  if (cursor.has_seq && *seq < cursor.last_seq) {
    a.verdict = Verdict::kFail;
    a.error = absl::InternalError(absl::StrCat(
        "tether: sequence numbers went backwards within attempt ", attempt,
        ": seq ", *seq, " after seq ", cursor.last_seq));
    return a;
  }
  cursor.has_seq = true;
  cursor.last_seq = *seq;
  if (has_last_ && *seq <= last_) {
    a.verdict = Verdict::kDuplicate;
    return a;
  }
  // `last_ + 1` cannot overflow here: *seq > last_ implies last_ < max.
  if (has_last_ && *seq > last_ + 1) {
    a.gap = true;
    a.expected = last_ + 1;
    if (policy_ == GapPolicy::kFail) {
      a.verdict = Verdict::kFail;
      a.error = absl::DataLossError(absl::StrCat(
          "tether: sequence gap: expected seq ", a.expected, ", got ", *seq));
      return a;
    }
  }
  has_last_ = true;
  last_ = *seq;
  return a;
}

}  // namespace internal
}  // namespace tether
