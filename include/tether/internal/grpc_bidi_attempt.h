// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: one bidi attempt on gRPC's callback API.
#ifndef TETHER_INTERNAL_GRPC_BIDI_ATTEMPT_H_
#define TETHER_INTERNAL_GRPC_BIDI_ATTEMPT_H_

#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "tether/internal/grpc_read_attempt.h"
#include "tether/internal/tsan.h"
#include "tether/transport.h"

namespace tether {
namespace internal {

// One bidi call on a `grpc::ClientBidiReactor`.
//
// Reading works as in `GrpcReadAttempt` (one read outstanding; a hold keeps
// `OnDone` away while a paused read may still be started from outside a
// reaction). Writing pulls from `BidiWrites`, one write at a time; a second
// hold keeps `OnDone` away while a write may still be started from outside
// a reaction (the app's `Write` wakes the attempt up). It is released when
// writing is over: after the half-close, a failed write, the end of reads,
// or `Cancel`.
template <class Request, class Response>
class GrpcBidiAttempt final : public grpc::ClientBidiReactor<Request, Response>,
                              public Attempt {
 public:
  using StartFn = std::function<void(const std::shared_ptr<grpc::Channel>&,
                                     grpc::ClientContext*,
                                     grpc::ClientBidiReactor<Request, Response>*)>;
  using Next = typename BidiWrites<Request>::Next;

  static std::shared_ptr<Attempt> Run(
      const StartFn& start,
      const std::function<void(grpc::ClientContext&)>& configure,
      const ConnectionPick& connection,
      std::shared_ptr<BidiWrites<Request>> writes,
      std::shared_ptr<AttemptListener<Response>> listener) {
    std::shared_ptr<GrpcBidiAttempt> self(
        new GrpcBidiAttempt(std::move(writes), std::move(listener)));
    self->self_ = self;
    if (configure) configure(self->context_);
    start(connection.channel, &self->context_, self.get());
    self->AddHold();  // reads
    self->AddHold();  // writes
    std::weak_ptr<GrpcBidiAttempt> weak = self;
    self->writes_->SetWakeup([weak] {
      if (auto a = weak.lock()) a->PumpWrites();
    });
    HandOff(self.get());
    self->StartRead(&self->response_);
    self->PumpWrites();
    HandOff(self.get());
    self->StartCall();
    return self;
  }

  void Resume() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (read_hold_released_) return;
      if (!paused_) {
        resume_requested_ = true;
        return;
      }
      paused_ = false;
    }
    HandOff(this);
    this->StartRead(&response_);
  }

  void Cancel() override {
    bool release_read = false;
    bool release_write = false;
    std::shared_ptr<void> keep;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_) return;
      cancelled_ = true;
      if (paused_ && !read_hold_released_) {
        release_read = read_hold_released_ = true;
      }
      if (!writing_ && !write_hold_released_) {
        release_write = write_hold_released_ = true;
      }
      keep = self_;  // OnDone, which gives self_ away, has not run yet
    }
    CancelOffGrpcThread(std::move(keep), &context_);
    if (release_read) {
      HandOff(this);
      this->RemoveHold();
    }
    if (release_write) {
      HandOff(this);
      this->RemoveHold();
    }
  }

  void OnReadDone(bool ok) override {
    TakeOver(this);
    if (!ok) {
      bool release_write = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        reads_over_ = true;
        if (!writing_ && !write_hold_released_) {
          release_write = write_hold_released_ = true;
        }
      }
      if (release_write) {
        HandOff(this);
        this->RemoveHold();
      }
      ReleaseReadHold();
      return;
    }
    if (listener_->OnMessage(std::move(response_))) {
      response_ = Response();
      HandOff(this);
      this->StartRead(&response_);
      return;
    }
    response_ = Response();
    bool release = false;
    bool read_now = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) {
        if (!read_hold_released_) release = read_hold_released_ = true;
      } else if (resume_requested_) {
        resume_requested_ = false;
        read_now = true;
      } else {
        paused_ = true;
      }
    }
    if (release) this->RemoveHold();
    if (read_now) {
      HandOff(this);
      this->StartRead(&response_);
    }
  }

  void OnWriteDone(bool ok) override {
    TakeOver(this);
    writes_->Written(ok);
    FinishWrite(ok);
  }

  void OnWritesDoneDone(bool /*ok*/) override {
    TakeOver(this);
    FinishWrite(/*ok=*/false);  // nothing is written after the half-close
  }

  void OnDone(const grpc::Status& status) override {
    TakeOver(this);
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    // With the trailers: the classifier sees them, pushback applies.
    listener_->OnEnd(ToAbslStatus(status), TrailersOf(context_));
    // See GrpcReadAttempt::OnDone.
    ReleaseOffGrpcThread(std::move(listener_));
    ReleaseOffGrpcThread(std::move(writes_));
    ReleaseOffGrpcThread(std::move(self_));  // may delete this
  }

 private:
  GrpcBidiAttempt(std::shared_ptr<BidiWrites<Request>> writes,
                  std::shared_ptr<AttemptListener<Response>> listener)
      : writes_(std::move(writes)), listener_(std::move(listener)) {}

  // Starts the next write if none is in flight and there is one. From a
  // reaction, `Run`, or the app's thread (the write hold is still held
  // whenever a write starts).
  void PumpWrites() {
    std::shared_ptr<const Request> msg;
    Next next = Next::kNothing;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (writing_ || write_hold_released_ || cancelled_ || reads_over_) {
        return;
      }
      next = writes_->Take(&msg);
      if (next == Next::kNothing) return;
      writing_ = true;
      in_flight_ = msg;
    }
    HandOff(this);
    if (next == Next::kWrite) {
      this->StartWrite(msg.get());
    } else {
      this->StartWritesDone();
    }
  }

  void FinishWrite(bool ok) {
    bool release = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      in_flight_.reset();
      if ((!ok || cancelled_ || reads_over_) && !write_hold_released_) {
        release = write_hold_released_ = true;
      }
    }
    if (release) {
      HandOff(this);
      this->RemoveHold();
      return;
    }
    if (ok) PumpWrites();
  }

  void ReleaseReadHold() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (read_hold_released_) return;
      read_hold_released_ = true;
    }
    HandOff(this);
    this->RemoveHold();
  }

  grpc::ClientContext context_;
  Response response_;
  std::shared_ptr<BidiWrites<Request>> writes_;
  std::shared_ptr<AttemptListener<Response>> listener_;
  std::shared_ptr<GrpcBidiAttempt> self_;

  std::mutex mu_;
  bool paused_ = false;
  bool resume_requested_ = false;
  bool cancelled_ = false;
  bool read_hold_released_ = false;
  bool reads_over_ = false;
  bool writing_ = false;
  bool write_hold_released_ = false;
  std::shared_ptr<const Request> in_flight_;
  bool done_ = false;
};

template <class Request, class Response>
class GrpcBidiAttemptFactory final
    : public BidiAttemptFactory<Request, Response> {
 public:
  using StartFn = typename GrpcBidiAttempt<Request, Response>::StartFn;
  using ConfigureFn =
      std::function<void(grpc::ClientContext&, const AttemptInfo&)>;
  GrpcBidiAttemptFactory(StartFn start, ConfigureFn configure)
      : start_(std::move(start)), configure_(std::move(configure)) {}

  std::shared_ptr<Attempt> Start(
      const ConnectionPick& connection, const ResumeState& resume,
      std::shared_ptr<BidiWrites<Request>> writes,
      std::shared_ptr<AttemptListener<Response>> listener) override {
    return StartAttempt(connection, AttemptInfo(), resume, std::move(writes),
                        std::move(listener));
  }

  std::shared_ptr<Attempt> StartAttempt(
      const ConnectionPick& connection, const AttemptInfo& info,
      const ResumeState& /*resume*/,
      std::shared_ptr<BidiWrites<Request>> writes,
      std::shared_ptr<AttemptListener<Response>> listener) override {
    std::function<void(grpc::ClientContext&)> configure;
    if (configure_) {
      // `Run` calls it before it returns.
      configure = [this, &info](grpc::ClientContext& context) {
        configure_(context, info);
      };
    }
    return GrpcBidiAttempt<Request, Response>::Run(
        start_, configure, connection, std::move(writes), std::move(listener));
  }

 private:
  StartFn start_;
  ConfigureFn configure_;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_GRPC_BIDI_ATTEMPT_H_
