// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: the only code of a stream that touches gRPC's callback API.
#ifndef TETHER_INTERNAL_GRPC_READ_ATTEMPT_H_
#define TETHER_INTERNAL_GRPC_READ_ATTEMPT_H_

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "tether/internal/grpc_call_context.h"
#include "tether/internal/tsan.h"
#include "tether/transport.h"

namespace tether {
namespace internal {

// One server-streaming call on a `grpc::ClientReadReactor`.
//
// Lifetime: it keeps itself alive (`self_`) until gRPC calls `OnDone`; the
// stream may hold it longer. `OnDone` hands its last references to
// `ReleaseOffGrpcThread` rather than dropping them on gRPC's thread.
// Reading: one read is outstanding at a time; when the listener asks to pause,
// the next read is started by `Resume`. A hold taken before `StartCall` keeps
// `OnDone` from running while a paused read might still be started from outside
// a reaction; it is released when reads are over (a failed read, or `Cancel`
// while paused).
template <class Request, class Response>
class GrpcReadAttempt final : public grpc::ClientReadReactor<Response>,
                              public Attempt {
 public:
  using StartFn = std::function<void(const std::shared_ptr<grpc::Channel>&,
                                     grpc::ClientContext*, const Request*,
                                     grpc::ClientReadReactor<Response>*)>;

  static std::shared_ptr<Attempt> Run(
      const StartFn& start, const ConfigureAttemptFn& configure,
      const ConnectionPick& connection, const AttemptInfo& info,
      const Request& request,
      std::shared_ptr<AttemptListener<Response>> listener) {
    std::shared_ptr<GrpcReadAttempt> self(
        new GrpcReadAttempt(request, std::move(listener)));
    self->self_ = self;
    if (configure) configure(self->context_, info);
    start(connection.channel, &self->context_, &self->request_, self.get());
    self->AddHold();
    HandOff(self.get());
    self->StartRead(&self->response_);
    self->StartCall();
    return self;
  }

  void Resume() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (hold_released_) return;
      if (!paused_) {
        // The listener said "pause" but OnReadDone has not recorded it yet.
        resume_requested_ = true;
        return;
      }
      paused_ = false;
    }
    HandOff(this);
    this->StartRead(&response_);
  }

  void Cancel() override {
    bool release = false;
    std::shared_ptr<void> keep;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_) return;
      cancelled_ = true;
      if (paused_ && !hold_released_) release = hold_released_ = true;
      keep = self_;  // OnDone, which gives self_ away, has not run yet
    }
    CancelOffGrpcThread(std::move(keep), &context_);
    if (release) {
      HandOff(this);
      this->RemoveHold();
    }
  }

  void OnReadDone(bool ok) override {
    TakeOver(this);
    if (!ok) {
      ReleaseHold();
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
        if (!hold_released_) release = hold_released_ = true;
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

  void OnDone(const grpc::Status& status) override {
    TakeOver(this);
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    listener_->OnEnd(ToAbslStatus(status), TrailersOf(context_));
    // Not dropped here, on gRPC's thread: see ReleaseOffGrpcThread. The
    // listener goes first (it may hold the stream and its pool), then the
    // attempt itself, whose context holds the channel.
    ReleaseOffGrpcThread(std::move(listener_));
    ReleaseOffGrpcThread(std::move(self_));  // may delete this
  }

 private:
  GrpcReadAttempt(const Request& request,
                  std::shared_ptr<AttemptListener<Response>> listener)
      : request_(request), listener_(std::move(listener)) {}

  void ReleaseHold() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (hold_released_) return;
      hold_released_ = true;
    }
    HandOff(this);
    this->RemoveHold();
  }

  grpc::ClientContext context_;
  Request request_;
  Response response_;
  std::shared_ptr<AttemptListener<Response>> listener_;
  std::shared_ptr<GrpcReadAttempt> self_;

  std::mutex mu_;
  bool paused_ = false;
  bool resume_requested_ = false;
  bool cancelled_ = false;
  bool hold_released_ = false;
  bool done_ = false;
};

template <class Request, class Response>
class GrpcReadAttemptFactory final : public AttemptFactory<Request, Response> {
 public:
  using StartFn = typename GrpcReadAttempt<Request, Response>::StartFn;
  GrpcReadAttemptFactory(StartFn start, ConfigureAttemptFn configure)
      : start_(std::move(start)), configure_(std::move(configure)) {}

  std::shared_ptr<Attempt> Start(
      const ConnectionPick& connection, const Request& request,
      std::shared_ptr<AttemptListener<Response>> listener) override {
    return StartAttempt(connection, AttemptInfo(), request,
                        std::move(listener));
  }

  std::shared_ptr<Attempt> StartAttempt(
      const ConnectionPick& connection, const AttemptInfo& info,
      const Request& request,
      std::shared_ptr<AttemptListener<Response>> listener) override {
    return GrpcReadAttempt<Request, Response>::Run(
        start_, configure_, connection, info, request, std::move(listener));
  }

 private:
  StartFn start_;
  ConfigureAttemptFn configure_;
};

template <class Request, class Response>
std::shared_ptr<AttemptFactory<Request, Response>> MakeGrpcReadAttemptFactory(
    typename GrpcReadAttemptFactory<Request, Response>::StartFn start,
    ConfigureAttemptFn configure) {
  return std::make_shared<GrpcReadAttemptFactory<Request, Response>>(
      std::move(start), std::move(configure));
}

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_GRPC_READ_ATTEMPT_H_
