// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/grpc_read_pump.h"

#include <mutex>

namespace tether {
namespace internal {

ReadPumpState::AfterPause ReadPumpState::Paused() {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_) {
    if (hold_released_) return AfterPause::kPaused;
    hold_released_ = true;
    return AfterPause::kReleaseHold;
  }
  if (resume_requested_) {
    resume_requested_ = false;
    return AfterPause::kReadNow;
  }
  paused_ = true;
  return AfterPause::kPaused;
}

bool ReadPumpState::Resume() {
  std::lock_guard<std::mutex> lock(mu_);
  if (hold_released_) return false;
  if (!paused_) {
    // The listener said "pause" but `Paused` has not recorded it yet.
    resume_requested_ = true;
    return false;
  }
  paused_ = false;
  return true;
}

ReadPumpState::OnCancel ReadPumpState::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_) return OnCancel::kNothing;
  cancelled_ = true;
  if (paused_ && !hold_released_) {
    hold_released_ = true;
    return OnCancel::kCancelAndRelease;
  }
  return OnCancel::kCancel;
}

bool ReadPumpState::ReadsOver() {
  std::lock_guard<std::mutex> lock(mu_);
  if (hold_released_) return false;
  hold_released_ = true;
  return true;
}

void ReadPumpState::Done() {
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
}

}  // namespace internal
}  // namespace tether
