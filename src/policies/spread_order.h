// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Where in a spread window each of many streams acts: the moves off one
// draining connection, the resyncs of one process.
#ifndef TETHER_SRC_POLICIES_SPREAD_ORDER_H_
#define TETHER_SRC_POLICIES_SPREAD_ORDER_H_

#include <algorithm>
#include <cstdint>

#include "absl/time/time.h"
#include "tether/internal/visibility.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

// Hands out points of a spread window as fractions in [0, 1), one per
// stream that asks, as a plain value (no clock, no lock).
//
// The k-th answer is k's van der Corput point (k's bits mirrored behind the
// binary point: 0, 1/2, 1/4, 3/4, 1/8, ...) shifted by `offset`, modulo 1.
// Every prefix of the answers covers the window evenly, so it works without
// knowing how many streams will ask: 10,000 answers put at most 6 or 7 into
// any 1/2,000 of the window, where the mean is 5. Independent random draws
// bunch: 10,000 of them put 14 to 17 into the busiest 1/2,000.
//
// Give each source of points (a connection, a resync pool) its own random
// `offset`, so that the ramps of many clients do not line up.
class SpreadOrder {
 public:
  // `offset` in [0, 1).
  explicit SpreadOrder(double offset) : offset_(offset) {}

  double Next() { return Point(offset_, taken_++); }

  // The k-th answer of an order that starts at `offset`.
  static double Point(double offset, std::uint32_t k) {
    const double point = offset + Mirror(k);
    return point >= 1.0 ? point - 1.0 : point;
  }

 private:
  static double Mirror(std::uint32_t k) {
    double point = 0.0;
    for (double bit = 0.5; k != 0; k >>= 1, bit /= 2) {
      if (k & 1u) point += bit;
    }
    return point;
  }

  double offset_;
  std::uint32_t taken_ = 0;  // wraps after 2^32 answers: still even
};

// The point at `share` of `window`: where a stream given that share waits
// (a share outside [0, 1] is held to the window's ends).
inline absl::Duration PointIn(absl::Duration window, double share) {
  return std::min(window * std::max(share, 0.0), window);
}

// Example: a connection drains and three streams leave it, in a window of
// 10 s; with offset 0.3 they start at 3 s, 8 s and 5.5 s.
//
//   SpreadOrder order(0.3);
//   order.Next();  // 0.3
//   order.Next();  // 0.8
//   order.Next();  // 0.55

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_POLICIES_SPREAD_ORDER_H_
