// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: the stream's exactly-once, in-order rule for sequence numbers.
#ifndef TETHER_INTERNAL_SEQUENCE_GATE_H_
#define TETHER_INTERNAL_SEQUENCE_GATE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/optional.h"
#include "tether/stream_options.h"

namespace tether {
namespace internal {

// Decides, for each message a stream receives, whether the application gets
// it: the last *delivered* sequence number is the stream's resume position;
// a message at or below it is a duplicate (a reopen's or a migration's
// overlap), one above `last + 1` is a gap (delivered and reported, or fatal
// under `GapPolicy::kFail`). Within one attempt, positions must not go
// backwards (a server bug): that, or a message without a position, fails.
//
// A plain value: not thread-safe (the stream calls it under its lock) and
// calls nothing.
class SequenceGate {
 public:
  // What one attempt has seen, for the "never backwards within an attempt"
  // rule. One per attempt, owned by the attempt's record.
  struct Cursor {
    bool has_seq = false;
    std::uint64_t last_seq = 0;
  };

  enum class Verdict {
    kDeliver,    // hand it to the application; the position moves
    kDuplicate,  // at or below the last delivered position: drop it
    kFail,       // end the stream with `error`; deliver nothing
  };

  struct Admission {
    Verdict verdict = Verdict::kDeliver;
    // kDeliver or kFail: the message skipped positions (expected..got-1).
    bool gap = false;
    std::uint64_t expected = 0;
    absl::Status error;  // kFail only
  };

  SequenceGate(absl::optional<std::uint64_t> initial_last, GapPolicy policy)
      : has_last_(initial_last.has_value()),
        last_(initial_last.value_or(0)),
        policy_(policy) {}

  // Admits the message with position `seq` (nullopt: it carried none) that
  // attempt number `attempt` received. Moves the position on kDeliver.
  Admission Admit(Cursor& cursor, absl::optional<std::uint64_t> seq,
                  std::uint64_t attempt);

  bool has_last() const { return has_last_; }
  std::uint64_t last() const { return last_; }

 private:
  bool has_last_;
  std::uint64_t last_;
  GapPolicy policy_;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_SEQUENCE_GATE_H_
