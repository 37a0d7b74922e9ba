// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "streams/cursor_replay.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace tether {
namespace internal {

bool CursorReplay::IsReplay(Catchup& c, const std::string& cursor) const {
  if (!c.active) return false;
  for (const auto& entry : log_) {
    if (entry.first > c.from && entry.second == cursor) {
      c.from = entry.first;
      return true;
    }
  }
  c.active = false;
  return false;
}

void CursorReplay::Delivered(const std::string& cursor,
                             std::uint64_t keep_after, bool start_in_flight) {
  last_ = cursor;
  ++count_;
  keep_after = std::min(keep_after, count_);
  if (start_in_flight) keep_after = std::min(keep_after, start_from_);
  if (keep_after < count_) log_.emplace_back(count_, cursor);
  while (!log_.empty() &&
         (log_.front().first <= keep_after || log_.size() > kMaxLog)) {
    log_.pop_front();
  }
}

}  // namespace internal
}  // namespace tether
