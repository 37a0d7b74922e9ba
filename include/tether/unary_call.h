// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_UNARY_CALL_H_
#define TETHER_UNARY_CALL_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "tether/backoff.h"
#include "tether/circuit_breaker.h"
#include "tether/classification.h"
#include "tether/clock.h"
#include "tether/internal/breaker_gate.h"
#include "tether/internal/grpc_read_attempt.h"
#include "tether/internal/mutex.h"
#include "tether/observer.h"
#include "tether/reconnecting_stream.h"
#include "tether/transport.h"

namespace tether {

// Options of a `UnaryCaller`. Every field has a default; invalid values make
// `UnaryCaller::Create` fail with INVALID_ARGUMENT. Nothing is clamped.
struct UnaryCallOptions {
  // Delay between attempts. A prototype: each call clones it. Default
  // (null): `ExponentialBackoff` defaults (100 ms, x2, max 10 s, full
  // jitter). A server's `grpc-retry-pushback-ms` replaces it (gRFC A6).
  std::shared_ptr<const BackoffPolicy> backoff;

  // What an attempt's end means: kOk ends the call with the response;
  // kDrain and kTransient retry (within the bounds below); kPermanent ends
  // the call with that status. Default (empty): `DefaultClassify`. The
  // input has the trailers and error details (`AttemptEnd`).
  Classifier classifier;

  // Shared with the target's streams (`ReconnectingStreamOptions::breaker`).
  // Each attempt asks for a permit; a refusal ends the call at once with the
  // breaker's UNAVAILABLE (no wait: a unary caller usually has a deadline of
  // its own). Outcomes as for streams: OK is a success; transient ends and
  // failures to connect are failures; drains, permanent errors and the
  // client's own cancels are ignored. Default: none.
  std::shared_ptr<CircuitBreaker> breaker;

  // At most this many attempts per call. Default 5; [1, 100].
  int max_attempts = 5;

  // The deadline of each attempt (a gRPC deadline on its context), cut to
  // what is left of `overall_timeout`. Default 10 s; (0, 1 h].
  absl::Duration attempt_timeout = absl::Seconds(10);

  // The bound on the whole call, backoff included: no attempt starts after
  // it, and a retry whose delay would pass it is not made (the call ends
  // with the last attempt's status). Default 30 s; (0, 24 h].
  absl::Duration overall_timeout = absl::Seconds(30);

  // Time and timers (backoff waits, the overall bound). Default
  // `SystemClock()`; a `FakeClock` in tests.
  std::shared_ptr<Clock> clock;

  // Seed of the random source (jitter). Default 0: from entropy.
  std::uint64_t random_seed = 0;
};

// OK, or INVALID_ARGUMENT naming the first invalid field.
absl::Status Validate(const UnaryCallOptions& options);

// The seam between a `UnaryCaller` and gRPC, for test doubles
// (`tether::fakes::FakeUnaryTransport`).
template <class Request, class Response>
class UnaryAttemptFactory {
 public:
  // The attempt's end: its status, the response (when OK) and the server's
  // trailing metadata.
  using Done = std::function<void(const absl::Status&, Response&&,
                                  const Metadata& trailing_metadata)>;
  virtual ~UnaryAttemptFactory() = default;
  // Starts one unary call on `connection` whose deadline is `timeout` from
  // now. Calls `done` exactly once, from any thread, possibly before this
  // returns.
  virtual void Call(const ConnectionPick& connection, const AttemptInfo& info,
                    const Request& request, absl::Duration timeout,
                    Done done) = 0;
};

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
        backoff_(std::move(setup.backoff)),
        gen_(setup.seed),
        request_(std::move(request)),
        done_(std::move(done)) {}

  void Start() { StartAttempt(AttemptReason::kFirst); }

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
      RetryOrFinish(pick.status(), RetryPushback());
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
    RetryOrFinish(status, end.pushback);
  }

  void RetryOrFinish(const absl::Status& status, const RetryPushback& pushback) {
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
  // One attempt at a time: the fields below are touched by one thread at a
  // time (each step is started by the previous one's end or timer). `mu_`
  // only orders the backoff's and generator's use across those threads.
  Mutex mu_;
  std::unique_ptr<BackoffPolicy> backoff_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 gen_ ABSL_GUARDED_BY(mu_);
  int attempts_ = 0;
  const Request request_;
  DoneFn done_;
};

}  // namespace internal

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
