// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_UNARY_CALL_H_
#define TETHER_UNARY_CALL_H_

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tether/internal/grpc_call_context.h"
#include "tether/internal/unary_run.h"
#include "tether/target.h"
#include "tether/transport.h"
#include "tether/unary_options.h"

namespace tether {

// Runs unary calls to a dependency with the same policies as its streams: a
// backoff, the classifier (trailers and `grpc-retry-pushback-ms` included),
// the same `CircuitBreaker`, a deadline per attempt and a bound on the whole
// call. Use it for idempotent methods only: an attempt that timed out may
// have been executed by the server.
//
// Thread safety: `Call` may be called from any thread, concurrently; each
// call runs on its own. Lifetime: a call in flight keeps what it needs
// alive; destroying the caller does not cancel it (it ends within
// `overall_timeout`). Callbacks run on gRPC's or the clock's threads, with no
// tether lock held.
//
//   auto caller = tether::UnaryCaller<GetRequest, Account>::Create(
//       pool, tether::StartWith<Ledger>(&Ledger::Stub::async::GetAccount),
//       options).value();
//   absl::StatusOr<Account> account = caller->Call(request);   // blocking
//   caller->Call(request, [](absl::StatusOr<Account> a) { ... });  // async
template <class Request, class Response>
class UnaryCaller {
 public:
  using StartFn =
      typename internal::GrpcUnaryAttemptFactory<Request, Response>::StartFn;
  using DoneFn = std::function<void(absl::StatusOr<Response>)>;

  // Calls through the generated method `start` (see `StartWith`).
  // `configure_attempt` (optional) sets up each attempt's context.
  static absl::StatusOr<std::unique_ptr<UnaryCaller>> Create(
      Target target, StartFn start, UnaryCallOptions options,
      internal::ConfigureAttemptFn configure_attempt = nullptr) {
    if (!start) {
      return absl::InvalidArgumentError("UnaryCaller needs a start function");
    }
    return Create(std::move(target),
                  std::make_shared<
                      internal::GrpcUnaryAttemptFactory<Request, Response>>(
                      std::move(start), std::move(configure_attempt)),
                  std::move(options));
  }

  // Calls through `factory` (a `fakes::FakeUnaryTransport` in tests).
  static absl::StatusOr<std::unique_ptr<UnaryCaller>> Create(
      Target target,
      std::shared_ptr<UnaryAttemptFactory<Request, Response>> factory,
      UnaryCallOptions options) {
    absl::Status s = Validate(options);
    if (!s.ok()) return s;
    if (!target.source()) {
      return absl::InvalidArgumentError("UnaryCaller needs a target");
    }
    if (!factory) {
      return absl::InvalidArgumentError("UnaryCaller needs a factory");
    }
    // Checks the backoff once; each call clones it again.
    absl::StatusOr<internal::UnarySetup> setup = internal::PrepareUnary(options);
    if (!setup.ok()) return setup.status();
    return std::unique_ptr<UnaryCaller>(
        new UnaryCaller(target.source(), std::move(factory), std::move(options)));
  }

  // Starts a call; `done` runs exactly once with the response or the final
  // status, from any thread (possibly this one, before `Call` returns).
  void Call(Request request, DoneFn done) {
    UnaryCallOptions options = options_;
    absl::StatusOr<internal::UnarySetup> setup = internal::PrepareUnary(options);
    if (!setup.ok()) {
      done(setup.status());
      return;
    }
    auto run = std::make_shared<internal::UnaryRun<Request, Response>>(
        source_, factory_, options, *std::move(setup), std::move(request),
        std::move(done));
    run->Start();
  }

  // Blocks until the call ends: within `overall_timeout` (each attempt's
  // gRPC deadline is cut to it). Not for a fake clock: use the callback form
  // there.
  absl::StatusOr<Response> Call(Request request) {
    // std::mutex, not absl::Notification: TSan cannot see Debian's abseil.
    struct Slot {
      std::mutex mu;
      std::condition_variable cv;
      bool ready = false;
      absl::StatusOr<Response> result = absl::UnknownError("not set");
    };
    auto slot = std::make_shared<Slot>();
    Call(std::move(request), [slot](absl::StatusOr<Response> r) {
      std::lock_guard<std::mutex> lock(slot->mu);
      slot->result = std::move(r);
      slot->ready = true;
      slot->cv.notify_all();
    });
    // Bounded in real time too, so that nothing waits for ever.
    std::unique_lock<std::mutex> lock(slot->mu);
    if (!slot->cv.wait_for(
            lock,
            absl::ToChronoNanoseconds(options_.overall_timeout +
                                      absl::Minutes(1)),
            [&] { return slot->ready; })) {
      return absl::DeadlineExceededError(
          "tether: unary call did not end within overall_timeout + 1 min");
    }
    return std::move(slot->result);
  }

 private:
  UnaryCaller(std::shared_ptr<ConnectionSource> source,
              std::shared_ptr<UnaryAttemptFactory<Request, Response>> factory,
              UnaryCallOptions options)
      : source_(std::move(source)),
        factory_(std::move(factory)),
        options_(std::move(options)) {}

  const std::shared_ptr<ConnectionSource> source_;
  const std::shared_ptr<UnaryAttemptFactory<Request, Response>> factory_;
  const UnaryCallOptions options_;
};

}  // namespace tether

#endif  // TETHER_UNARY_CALL_H_
