// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Internal: which messages of a resumed attempt replay opaque cursors the
// stream already delivered.
#ifndef TETHER_SRC_STREAMS_CURSOR_REPLAY_H_
#define TETHER_SRC_STREAMS_CURSOR_REPLAY_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "absl/types/optional.h"
#include "tether/internal/compact_fifo.h"
#include "tether/internal/visibility.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

// Opaque cursors have no order, so a resumed attempt's replays are found by
// name. An attempt resumes after the last delivered cursor, the one at index
// `from` (cursors are counted as they are delivered). While it catches up, a
// message whose cursor the stream delivered after index `from` (the old
// attempt of a migration delivered it meanwhile) is a replay; its first
// message with a cursor the stream has not delivered since ends the catching
// up. The server must send cursors in order and resume strictly after the
// cursor it is given.
//
// A plain value: no lock and no threads of its own (the stream's lock guards
// it). The log keeps delivered cursors only as far back as an attempt, or a
// start in flight, may replay them, and never more than `kMaxLog`.
//
//   CursorReplay replay(absl::nullopt);
//   CursorReplay::Catchup fresh = replay.BeginStart();  // resumes at "none"
//   replay.Delivered("a", fresh.from);                 // the old attempt
//   replay.IsReplay(fresh, "a");  // true: delivered after its resume point
//   replay.IsReplay(fresh, "b");  // false: new, and the catching up ends
class CursorReplay {
 public:
  // One attempt's place: catching up after the cursor at index `from`.
  struct Catchup {
    bool active = false;
    std::uint64_t from = 0;
  };
  // No attempt keeps anything in the log.
  static constexpr std::uint64_t kKeepNone =
      std::numeric_limits<std::uint64_t>::max();
  // The most delivered cursors kept for replays.
  static constexpr std::size_t kMaxLog = 1 << 16;

  // `initial`: the cursor the stream's request already resumes after.
  explicit CursorReplay(absl::optional<std::string> initial)
      : last_(std::move(initial)) {}

  // The last delivered cursor (where the next attempt resumes), if any.
  const absl::optional<std::string>& last() const { return last_; }

  // A start takes its resume point; the log keeps what is delivered from
  // now on for it until `Delivered` is told the start is over.
  Catchup BeginStart() {
    start_from_ = count_;
    return Catchup{true, count_};
  }

  // Whether `cursor`, arriving on the attempt at `*c`, is a replay. A replay
  // moves `*c` past it; the first cursor that is not ends the catching up.
  bool IsReplay(Catchup& c, const std::string& cursor) const;

  // The stream delivered `cursor`. `keep_after`: the lowest `from` of the
  // attempts still catching up (`kKeepNone`: none); `start_in_flight`: a
  // start (see `BeginStart`) has not committed yet.
  void Delivered(const std::string& cursor, std::uint64_t keep_after,
                 bool start_in_flight);

  // How many cursors the log holds (for tests).
  std::size_t logged() const { return log_.size(); }

 private:
  absl::optional<std::string> last_;
  std::uint64_t count_ = 0;
  std::uint64_t start_from_ = 0;
  // (index, cursor), oldest first. Not a std::deque: that allocates 576
  // bytes up front.
  CompactFifo<std::pair<std::uint64_t, std::string>> log_;
};

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_STREAMS_CURSOR_REPLAY_H_
