// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: how soon a stream moves on a server's drain notice.
#ifndef TETHER_SRC_STREAMS_NOTICE_PACE_H_
#define TETHER_SRC_STREAMS_NOTICE_PACE_H_

#include "absl/time/time.h"

#include "tether/internal/visibility.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

// The pace of one stream's notice-driven moves.
//
// Behind an L7 proxy a move's new call may land on the leaving server
// again; that server sends a notice at once, and the stream moves again.
// Such repeats are no failures (the proxy balances each call), so they
// grow no backoff, but they must not spin when every call lands there (the
// leaving server is the only one left behind the proxy). The rule, a token
// bucket: `kBurst` (8) moves start at once; each further one waits for a
// token, and one comes back every `kRefill` (100 ms), up to `kBurst`. So a
// stream makes at most 8 notice moves in a row at once, then at most 10 a
// second, for as long as the server keeps telling it to move.
//
//   NoticePace pace;
//   absl::Duration wait = pace.Take(clock.Now());  // 0: move now
//
// A plain value: not thread-safe (the stream calls it under its lock).
class NoticePace {
 public:
  static constexpr int kBurst = 8;
  static constexpr absl::Duration kRefill = absl::Milliseconds(100);

  // Takes the token for one move at `now`: returns how long the move waits
  // for it (zero: at once). Times must not go backwards; an earlier `now`
  // is taken as the latest seen.
  absl::Duration Take(absl::Time now);

 private:
  // When the bucket is full again: each move takes `kRefill` of it. Before
  // the first move (InfinitePast) the bucket is full.
  absl::Time full_at_ = absl::InfinitePast();
  absl::Time latest_ = absl::InfinitePast();
};

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_STREAMS_NOTICE_PACE_H_
