// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/grpc_bidi_attempt.h"

#include <memory>
#include <mutex>
#include <utility>

#include "tether/internal/tsan.h"

namespace tether {
namespace internal {

GrpcBidiWritePump::GrpcBidiWritePump(std::shared_ptr<BidiOutbox::Writes> writes,
                                     AttemptSink sink)
    : GrpcReadPump(std::move(sink)), writes_(std::move(writes)) {}

GrpcBidiWritePump::~GrpcBidiWritePump() = default;

void GrpcBidiWritePump::StartPumps() {
  AddReactorHold();  // writes
  writes_->SetWakeup([weak = weak_self()] {
    if (auto a = weak.lock()) static_cast<GrpcBidiWritePump*>(a.get())->PumpWrites();
  });
  StartReading();
  PumpWrites();
  HandOff(this);
  StartCallNow();
}

void GrpcBidiWritePump::WriteDone(bool ok) {
  TakeOver(this);
  writes_->Written(ok);
  FinishWrite(ok);
}

void GrpcBidiWritePump::WritesDoneDone() {
  TakeOver(this);
  FinishWrite(/*ok=*/false);  // nothing is written after the half-close
}

void GrpcBidiWritePump::ReadsStopped() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    if (writing_ || write_hold_released_) return;
    write_hold_released_ = true;
  }
  ReleaseWriteHold();
}

void GrpcBidiWritePump::BeforeEnd() { writes_->Close(); }

void GrpcBidiWritePump::ReleaseParts() {
  ReleaseOffGrpcThread(std::move(writes_));
}

void GrpcBidiWritePump::PumpWrites() {
  BidiOutbox::Message msg;
  BidiNext next = BidiNext::kNothing;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (writing_ || write_hold_released_ || stopped_) return;
    next = writes_->Take(&msg);
    if (next == BidiNext::kNothing) return;
    writing_ = true;
    in_flight_ = msg;
  }
  HandOff(this);
  if (next == BidiNext::kWrite) {
    StartWriteCall(msg.get());
  } else {
    StartWritesDoneCall();
  }
}

void GrpcBidiWritePump::FinishWrite(bool ok) {
  bool release = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    in_flight_.reset();
    if ((!ok || stopped_) && !write_hold_released_) {
      release = write_hold_released_ = true;
    }
  }
  if (release) {
    ReleaseWriteHold();
    return;
  }
  if (ok) PumpWrites();
}

void GrpcBidiWritePump::ReleaseWriteHold() {
  HandOff(this);
  RemoveReactorHold();
}

}  // namespace internal
}  // namespace tether
