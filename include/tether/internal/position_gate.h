// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: the stream's exactly-once, in-order rule for integer positions.
#ifndef TETHER_INTERNAL_POSITION_GATE_H_
#define TETHER_INTERNAL_POSITION_GATE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/optional.h"
#include "tether/position.h"
#include "tether/stream_options.h"

namespace tether {
namespace internal {

// Decides, for each message a stream receives, whether the application gets
// it. The last delivered (or progressed) position is the stream's resume
// position:
//   - `Item(at)`: at or below it is a duplicate (a reopen's or a migration's
//     overlap); with dense spacing, above `last + 1` is a gap (delivered and
//     reported, or fatal under `GapPolicy::kFail`); sparse spacing has no
//     gaps;
//   - `Items(first, last)`: wholly at or below it is a duplicate; a batch
//     that straddles it is delivered once the caller trimmed the items at or
//     below it (`trimmed_at` == the position; else kTrim asks for that);
//   - `Progress(at)`: moves the position when above it (kProgress), else is
//     dropped (kStale);
//   - `None()`: always delivered; nothing moves.
// Within one attempt, positions must not go backwards (a server bug): that,
// a message without a position, or a batch with first > last, fails.
//
// A plain value: not thread-safe (the stream calls it under its lock) and
// calls nothing.
class PositionGate {
 public:
  // What one attempt has seen, for the "never backwards within an attempt"
  // rule. One per attempt, owned by the attempt's record.
  struct Cursor {
    bool has_seq = false;
    std::uint64_t last_seq = 0;
  };

  enum class Verdict {
    kDeliver,    // hand it to the application; the position moved (or None)
    kTrim,       // a batch straddles `trim_at`: trim, then admit again
    kDuplicate,  // at or below the last delivered position: drop it
    kProgress,   // a progress notice moved the position
    kStale,      // a progress notice at or below the position: drop it
    kFail,       // end the stream with `error`; deliver nothing
  };

  struct Admission {
    Verdict verdict = Verdict::kDeliver;
    // kDeliver or kFail: the message skipped positions (expected..got-1).
    bool gap = false;
    std::uint64_t expected = 0;
    std::uint64_t trim_at = 0;  // kTrim only
    absl::Status error;         // kFail only
  };

  PositionGate(absl::optional<std::uint64_t> initial_last,
               PositionSpacing spacing, GapPolicy policy, bool can_trim)
      : has_last_(initial_last.has_value()),
        last_(initial_last.value_or(0)),
        spacing_(spacing),
        policy_(policy),
        can_trim_(can_trim) {}

  // Admits the message with position `pos` (nullopt: it carried none) that
  // attempt number `attempt` received. `trimmed_at`: the position a batch
  // was already trimmed at, if it was. Moves the position on kDeliver and
  // kProgress; the attempt's cursor moves unless the verdict is kTrim.
  Admission Admit(Cursor& cursor, const absl::optional<Position>& pos,
                  absl::optional<std::uint64_t> trimmed_at,
                  std::uint64_t attempt);

  // A resync: the stream resumes after `last` (lower or higher).
  void Reset(std::uint64_t last) {
    has_last_ = true;
    last_ = last;
  }

  bool has_last() const { return has_last_; }
  std::uint64_t last() const { return last_; }

 private:
  bool has_last_;
  std::uint64_t last_;
  PositionSpacing spacing_;
  GapPolicy policy_;
  bool can_trim_;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_POSITION_GATE_H_
