// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/server/drain_call.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/time/clock.h"
#include "server/drain_call_state.h"
#include "server/drain_sequencer.h"

namespace tether {
namespace internal {

bool DrainCallState::MarkNoticeDue() {
  MutexLock lock(&mu_);
  if (notice_due_) return false;
  notice_due_ = true;
  cv_.notify_all();
  return true;
}

bool DrainCallState::MarkEndDue(const grpc::Status& status) {
  MutexLock lock(&mu_);
  if (end_.has_value()) return false;
  end_ = status;
  cv_.notify_all();
  return true;
}

bool DrainCallState::ClaimLocked(bool& ran) {
  if (closed_ || ran) return false;
  ran = true;
  runners_.push_back(std::this_thread::get_id());
  return true;
}

void DrainCallState::ReleaseClaim() {
  MutexLock lock(&mu_);
  auto it =
      std::find(runners_.begin(), runners_.end(), std::this_thread::get_id());
  if (it != runners_.end()) runners_.erase(it);
  cv_.notify_all();
}

void DrainCallState::RunNoticeHook() {
  if (!hooks_.send_notice) return;
  {
    MutexLock lock(&mu_);
    if (!notice_due_ || !ClaimLocked(notice_ran_)) return;
  }
  hooks_.send_notice();
  ReleaseClaim();
}

void DrainCallState::RunEndHook() {
  if (!hooks_.end) return;
  grpc::Status status;
  {
    MutexLock lock(&mu_);
    if (!end_.has_value() || !ClaimLocked(end_ran_)) return;
    status = *end_;
  }
  hooks_.end(status);
  ReleaseClaim();
}

void DrainCallState::Close() {
  const std::thread::id self = std::this_thread::get_id();
  MutexLock lock(&mu_);
  closed_ = true;
  // A hook that runs on another thread may still use what it captured;
  // the wait ends when that hook returns (hooks must not block).
  while (std::any_of(runners_.begin(), runners_.end(),
                     [&](std::thread::id t) { return t != self; })) {
    cv_.wait(mu_);
  }
}

bool DrainCallState::notice_due() const {
  MutexLock lock(&mu_);
  return notice_due_;
}

bool DrainCallState::TakeNotice() {
  MutexLock lock(&mu_);
  if (!notice_due_ || notice_taken_) return false;
  notice_taken_ = true;
  return true;
}

absl::optional<grpc::Status> DrainCallState::end_status() const {
  MutexLock lock(&mu_);
  return end_;
}

bool DrainCallState::SignalledLocked() const {
  return (notice_due_ && !notice_taken_) || end_.has_value();
}

bool DrainCallState::WaitForSignal(absl::Duration timeout) {
  const auto deadline =
      std::chrono::steady_clock::now() +
      absl::ToChronoNanoseconds(std::max(
          absl::ZeroDuration(), std::min(timeout, absl::Hours(24 * 365))));
  MutexLock lock(&mu_);
  while (!SignalledLocked()) {
    if (cv_.wait_until(mu_, deadline) == std::cv_status::timeout) {
      return SignalledLocked();
    }
  }
  return true;
}

}  // namespace internal

namespace server {

DrainCall::DrainCall(std::shared_ptr<internal::DrainCallState> state,
                     std::weak_ptr<internal::DrainSequencer> owner)
    : state_(std::move(state)), owner_(std::move(owner)) {}

DrainCall::~DrainCall() {
  state_->Close();
  if (auto owner = owner_.lock()) owner->Unregister(state_);
}

bool DrainCall::notice_due() const { return state_->notice_due(); }
bool DrainCall::TakeNotice() { return state_->TakeNotice(); }
absl::optional<grpc::Status> DrainCall::end_status() const {
  return state_->end_status();
}
bool DrainCall::WaitForSignal(absl::Duration timeout) {
  return state_->WaitForSignal(timeout);
}

}  // namespace server
}  // namespace tether
