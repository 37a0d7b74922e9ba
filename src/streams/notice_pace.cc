// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "streams/notice_pace.h"

#include <algorithm>

namespace tether {
namespace internal {

absl::Duration NoticePace::Take(absl::Time now) {
  latest_ = std::max(latest_, now);
  now = latest_;
  // The bucket is full again `kRefill` after what it owed so far; a move
  // may start once the debt left is within the burst.
  full_at_ = std::max(full_at_, now) + kRefill;
  const absl::Time start = std::max(now, full_at_ - kBurst * kRefill);
  return start - now;
}

}  // namespace internal
}  // namespace tether
