// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Resume positions: what a response says about where a stream is, where a
// stream resumes from, and how an app gives a new position after a resync.
#ifndef TETHER_POSITION_H_
#define TETHER_POSITION_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace tether {

// What one response says about the stream's position. Returned by the app's
// `position_of` (StreamSpec / BidiStreamSpec).
class Position {
 public:
  enum class Kind {
    kNone,      // a control message without a position
    kItem,      // one item at first() == last()
    kItems,     // a batch of items at first()..last()
    kProgress,  // position only: everything up to last() has been sent
  };

  // A control message without a position (etcd's "watch created"):
  // delivered, the position does not move, never a duplicate.
  static Position None() { return Position(Kind::kNone, 0, 0); }
  // One item at `at`.
  static Position Item(std::uint64_t at) { return Position(Kind::kItem, at, at); }
  // A batch carrying items at positions first..last (first <= last; sparse
  // inside is fine). When the batch straddles the last delivered position
  // (a reopen's or migration's overlap), the spec's `trim_delivered` hook
  // removes the items at or below it; a batch wholly at or below it is a
  // duplicate. first > last ends the stream with INTERNAL.
  static Position Items(std::uint64_t first, std::uint64_t last) {
    return Position(Kind::kItems, first, last);
  }
  // Position only (a progress notice, a bookmark): everything up to `at` has
  // been sent. Moves the resume position; delivered to the app only when the
  // spec's `deliver_progress` is true; never counted as a delivered item.
  static Position Progress(std::uint64_t at) {
    return Position(Kind::kProgress, at, at);
  }

  Kind kind() const { return kind_; }
  std::uint64_t first() const { return first_; }
  std::uint64_t last() const { return last_; }

 private:
  Position(Kind kind, std::uint64_t first, std::uint64_t last)
      : kind_(kind), first_(first), last_(last) {}

  Kind kind_;
  std::uint64_t first_;
  std::uint64_t last_;
};

enum class PositionSpacing {
  // The next expected position is last + 1; skips are gaps (`GapPolicy`
  // applies). The default.
  kDense,
  // Any increase is fine (revisions global to a cluster); no gap reports.
  kSparse,
};

// Where a stream resumes from; given to a bidi stream's `open_requests`.
struct ResumeState {
  bool has_position = false;  // integer positions
  std::uint64_t last = 0;     // last delivered (or progressed) position
  bool has_cursor = false;    // opaque cursors
  std::string cursor;
};

// Resync: the app's `resync` calls this exactly once, from any thread, maybe
// later, with the position to resume after (or an error, which ends the
// stream with that error). Later calls are ignored.
using ResyncDone =
    std::function<void(absl::StatusOr<std::uint64_t> resume_after)>;

}  // namespace tether

#endif  // TETHER_POSITION_H_
