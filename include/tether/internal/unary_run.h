// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: the retry machine of one unary call (attempts, backoff waits,
// the breaker, the end) and the gRPC adapter that runs its attempts.
// `UnaryCaller` (tether/unary_call.h) is its public face.
#ifndef TETHER_INTERNAL_UNARY_RUN_H_
#define TETHER_INTERNAL_UNARY_RUN_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <random>
#include <utility>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "tether/backoff.h"
#include "tether/classification.h"
#include "tether/clock.h"
#include "tether/internal/breaker_gate.h"
#include "tether/internal/budgeted_retry.h"
#include "tether/internal/grpc_call_context.h"
#include "tether/internal/mutex.h"
#include "tether/internal/tsan.h"
#include "tether/transport.h"
#include "tether/unary_options.h"

namespace tether {
namespace internal {

struct UnarySetup {
  std::unique_ptr<BackoffPolicy> backoff;
  std::uint64_t seed = 0;
};
// Fills in defaults (clock, classifier) and clones the backoff.
absl::StatusOr<UnarySetup> PrepareUnary(UnaryCallOptions& options);

// Calls a generated callback-API unary method
// (`Stub::async()->Method(ctx, req, resp, std::function<void(Status)>)`).
template <class Request, class Response>
class GrpcUnaryAttemptFactory final
    : public UnaryAttemptFactory<Request, Response> {
 public:
  using StartFn = std::function<void(
      const std::shared_ptr<grpc::Channel>&, grpc::ClientContext*,
      const Request*, Response*, std::function<void(grpc::Status)>)>;
  using Done = typename UnaryAttemptFactory<Request, Response>::Done;

  GrpcUnaryAttemptFactory(StartFn start, ConfigureAttemptFn configure)
      : start_(std::move(start)), configure_(std::move(configure)) {}

  void Call(const ConnectionPick& connection, const AttemptInfo& info,
            const Request& request, absl::Duration timeout,
            Done done) override {
    // Owned through a raw pointer that the completion takes back, so that
    // the last reference (which holds the context, so the channel) is
    // dropped off gRPC's thread (see ReleaseOffGrpcThread).
    auto* owner = new std::shared_ptr<State>(std::make_shared<State>());
    State& st = **owner;
    st.request = request;
    st.channel = connection.channel;
    st.done = std::move(done);
    st.context.set_deadline(std::chrono::system_clock::now() +
                            absl::ToChronoNanoseconds(timeout));
    if (configure_) configure_(st.context, info);
    HandOff(&st);
    start_(connection.channel, &st.context, &st.request, &st.response,
           [owner](grpc::Status status) {
             std::shared_ptr<State> held = std::move(*owner);
             delete owner;
             TakeOver(held.get());
             Done done = std::move(held->done);
             done(ToAbslStatus(status), std::move(held->response),
                  TrailersOf(held->context));
             ReleaseOffGrpcThread(std::shared_ptr<void>(
                 std::make_shared<Done>(std::move(done))));
             ReleaseOffGrpcThread(std::move(held));
           });
  }

 private:
  struct State {
    grpc::ClientContext context;
    Request request;
    Response response;
    std::shared_ptr<grpc::Channel> channel;
    Done done;
  };
  StartFn start_;
  ConfigureAttemptFn configure_;
};

// One unary call: its attempts, backoff waits and end. Keeps itself alive
// through its pending attempt or timer.
template <class Request, class Response>
class UnaryRun final
    : public ConnectionSource::DrainListener,
      public std::enable_shared_from_this<UnaryRun<Request, Response>> {
 public:
  using DoneFn = std::function<void(absl::StatusOr<Response>)>;

  UnaryRun(std::shared_ptr<ConnectionSource> source,
           std::shared_ptr<UnaryAttemptFactory<Request, Response>> factory,
           const UnaryCallOptions& options, UnarySetup setup, Request request,
           DoneFn done)
      : source_(std::move(source)),
        factory_(std::move(factory)),
        clock_(options.clock),
        classifier_(options.classifier),
        breaker_(options.breaker, options.clock),
        max_attempts_(options.max_attempts),
        attempt_timeout_(options.attempt_timeout),
        deadline_(options.clock->Now() + options.overall_timeout),
        retry_budget_(options.retry_budget),
        backoff_(std::move(setup.backoff)),
        retry_(retry_budget_.get()),
        gen_(setup.seed),
        request_(std::move(request)),
        done_(std::move(done)) {}

  void Start() {
    {
      MutexLock lock(&mu_);
      retry_.OnFirstTry();
    }
    StartAttempt(AttemptReason::kFirst);
  }

  // A unary attempt is short: it is not moved off a draining connection.
  void OnConnectionDraining(std::uint64_t, absl::string_view) override {}

 private:
  std::weak_ptr<ConnectionSource::DrainListener> WeakListener() {
    return std::weak_ptr<ConnectionSource::DrainListener>(
        std::static_pointer_cast<ConnectionSource::DrainListener>(
            this->shared_from_this()));
  }

  void StartAttempt(AttemptReason reason) {
    const absl::Duration left = deadline_ - clock_->Now();
    if (left <= absl::ZeroDuration()) {
      Finish(Bounded(absl::DeadlineExceededError(
          "tether: unary call overall_timeout passed")));
      return;
    }
    absl::optional<BreakerGate::Ticket> ticket;
    if (breaker_.enabled()) {
      absl::StatusOr<BreakerGate::Ticket> permit = breaker_.Acquire();
      if (!permit.ok()) {
        Finish(permit.status());
        return;
      }
      ticket = *std::move(permit);
    }
    absl::StatusOr<ConnectionPick> pick = source_->Pick(WeakListener());
    ++attempts_;
    if (!pick.ok()) {
      if (ticket) {
        breaker_.Record(std::move(*ticket),
                        BreakerGate::ClassifyFailedPick(pick.status()),
                        pick.status());
      }
      RetryOrFinish(pick.status(), RetryPushback(), /*spends_retry=*/false);
      return;
    }
    AttemptInfo info;
    info.attempt = static_cast<std::uint64_t>(attempts_);
    info.connection_id = pick->connection_id;
    info.reason = reason;
    auto self = this->shared_from_this();
    auto held = std::make_shared<absl::optional<BreakerGate::Ticket>>(
        std::move(ticket));
    const std::uint64_t id = pick->connection_id;
    factory_->Call(*pick, info, request_, std::min(attempt_timeout_, left),
                   [self, held, id](const absl::Status& status,
                                    Response&& response,
                                    const Metadata& trailers) {
                     self->OnAttemptDone(id, *held, status, std::move(response),
                                         trailers);
                   });
  }

  void OnAttemptDone(std::uint64_t connection_id,
                     absl::optional<BreakerGate::Ticket>& ticket,
                     const absl::Status& status, Response&& response,
                     const Metadata& trailers) {
    source_->Release(connection_id, WeakListener());
    AttemptEnd end = MakeAttemptEnd(status, trailers);
    EndClass cls = EndClass::kOk;
    try {
      cls = classifier_(end);
    } catch (const std::exception& e) {
      if (ticket) {
        breaker_.Record(std::move(*ticket), BreakerGate::kIgnored, status);
      }
      Finish(absl::InternalError(absl::StrCat(
          "tether: the classifier threw an exception: ", e.what())));
      return;
    } catch (...) {
      if (ticket) {
        breaker_.Record(std::move(*ticket), BreakerGate::kIgnored, status);
      }
      Finish(absl::InternalError("tether: the classifier threw an exception"));
      return;
    }
    if (ticket) {
      breaker_.Record(std::move(*ticket),
                      status.ok() ? BreakerGate::kSuccess
                                  : BreakerGate::Classify(status, cls, false),
                      status);
    }
    if (status.ok() && cls == EndClass::kOk) {
      Finish(std::move(response));
      return;
    }
    if (cls == EndClass::kOk || cls == EndClass::kPermanent ||
        end.pushback.stop) {
      Finish(status.ok() ? absl::InternalError(
                               "tether: the classifier retried an OK end")
                         : status);
      return;
    }
    RetryOrFinish(status, end.pushback, cls == EndClass::kTransient);
  }

  // `spends_retry`: a failure (not a drain, not a failed pick) that takes a
  // retry from the retry budget.
  void RetryOrFinish(const absl::Status& status, const RetryPushback& pushback,
                     bool spends_retry) {
    if (attempts_ >= max_attempts_) {
      Finish(Bounded(status));
      return;
    }
    absl::Duration delay;
    if (pushback.present) {
      delay = pushback.delay;
    } else {
      MutexLock lock(&mu_);
      delay = backoff_->OnFailure(absl::BitGenRef(gen_));
    }
    if (clock_->Now() + delay >= deadline_) {
      Finish(Bounded(status));
      return;
    }
    if (spends_retry) {
      absl::StatusOr<absl::Duration> taken;
      {
        MutexLock lock(&mu_);
        taken = retry_.Take(delay, clock_->Now(), deadline_, Bounded(status));
      }
      if (!taken.ok()) {
        Finish(taken.status());
        return;
      }
      delay = *taken;
    }
    auto self = this->shared_from_this();
    clock_->RunAfter(delay, [self] { self->StartAttempt(AttemptReason::kReopen); });
  }

  // The last status, saying which bound ended the call.
  absl::Status Bounded(const absl::Status& last) const {
    return absl::Status(
        last.code(),
        absl::StrCat(last.message(), " (tether: unary call gave up after ",
                     attempts_, " attempt", attempts_ == 1 ? "" : "s", ")"));
  }

  void Finish(absl::StatusOr<Response> result) {
    DoneFn done = std::move(done_);
    done_ = nullptr;
    if (done) done(std::move(result));
  }

  const std::shared_ptr<ConnectionSource> source_;
  const std::shared_ptr<UnaryAttemptFactory<Request, Response>> factory_;
  const std::shared_ptr<Clock> clock_;
  const Classifier classifier_;
  BreakerGate breaker_;
  const int max_attempts_;
  const absl::Duration attempt_timeout_;
  const absl::Time deadline_;
  const std::shared_ptr<RetryBudget> retry_budget_;  // may be null
  // One attempt at a time: the fields below are touched by one thread at a
  // time (each step is started by the previous one's end or timer). `mu_`
  // only orders the backoff's and generator's use across those threads.
  Mutex mu_;
  std::unique_ptr<BackoffPolicy> backoff_ ABSL_GUARDED_BY(mu_);
  BudgetedRetry retry_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 gen_ ABSL_GUARDED_BY(mu_);
  int attempts_ = 0;
  const Request request_;
  DoneFn done_;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_UNARY_RUN_H_
