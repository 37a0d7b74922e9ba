// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// The options of a `UnaryCaller` and the seam test doubles plug into
// (tether/unary_call.h has the caller).
#ifndef TETHER_UNARY_OPTIONS_H_
#define TETHER_UNARY_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tether/backoff.h"
#include "tether/circuit_breaker.h"
#include "tether/classification.h"
#include "tether/clock.h"
#include "tether/retry_budget.h"
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

  // Shared with the target's streams (`ReconnectingStreamOptions::
  // retry_budget`): a retry after a transient end takes one retry from it and
  // waits when there is none (the call ends if the wait would pass
  // `overall_timeout`). Retries after drains take nothing. Default: none.
  std::shared_ptr<RetryBudget> retry_budget;

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

}  // namespace tether

#endif  // TETHER_UNARY_OPTIONS_H_
