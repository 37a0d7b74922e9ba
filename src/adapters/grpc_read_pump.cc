// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/grpc_read_pump.h"

#include <memory>
#include <mutex>
#include <utility>

#include "tether/internal/tsan.h"

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

GrpcReadPump::GrpcReadPump(AttemptSink sink) : sink_(std::move(sink)) {}

GrpcReadPump::~GrpcReadPump() = default;

std::shared_ptr<Attempt> GrpcReadPump::Begin(
    GrpcReadPump* attempt, const ConfigureAttemptFn& configure,
    const AttemptInfo& info) {
  // Deleted through `Attempt`'s public virtual destructor.
  std::shared_ptr<Attempt> owner(static_cast<Attempt*>(attempt));
  std::shared_ptr<GrpcReadPump> self(owner, attempt);
  attempt->weak_self_ = self;
  attempt->self_ = std::move(self);
  if (configure) configure(attempt->context_, info);
  return owner;
}

void GrpcReadPump::StartReading() {
  AddReactorHold();
  ReadNext();
}

void GrpcReadPump::Resume() {
  if (reads_.Resume()) ReadNext();
}

void GrpcReadPump::Cancel() {
  const ReadPumpState::OnCancel what = reads_.Cancel();
  if (what == ReadPumpState::OnCancel::kNothing) return;
  // `OnDone`, which gives self_ away, has not begun; the caller holds this
  // attempt, so the lock succeeds.
  CancelOffGrpcThread(weak_self_.lock(), &context_);
  if (what == ReadPumpState::OnCancel::kCancelAndRelease) ReleaseHold();
  ReadsStopped();
}

void GrpcReadPump::ReadDone(bool ok, void* response) {
  TakeOver(this);
  if (!ok) {
    ReadsStopped();
    if (reads_.ReadsOver()) ReleaseHold();
    return;
  }
  if (sink_.OnMessage(response)) {
    ReadNext();
    return;
  }
  switch (reads_.Paused()) {
    case ReadPumpState::AfterPause::kPaused:
      return;
    case ReadPumpState::AfterPause::kReadNow:
      ReadNext();
      return;
    case ReadPumpState::AfterPause::kReleaseHold:
      ReleaseHold();
      return;
  }
}

void GrpcReadPump::Done(const grpc::Status& status) {
  TakeOver(this);
  reads_.Done();
  BeforeEnd();
  sink_.OnEnd(ToAbslStatus(status), TrailersOf(context_));
  // Not dropped here, on gRPC's thread: see ReleaseOffGrpcThread. The sink
  // goes first (it holds the stream and so its pool), then what the call
  // kind adds, then the attempt itself, whose context holds the channel.
  ReleaseOffGrpcThread(std::make_shared<AttemptSink>(std::move(sink_)));
  ReleaseParts();
  ReleaseOffGrpcThread(std::move(self_));  // may delete this
}

void GrpcReadPump::ReadNext() {
  HandOff(this);
  StartReadCall();
}

void GrpcReadPump::ReleaseHold() {
  HandOff(this);
  RemoveReactorHold();
}

}  // namespace internal
}  // namespace tether
