// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_BACKOFF_H_
#define TETHER_BACKOFF_H_

#include <memory>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tether {

// Says how long to wait before the next attempt, and nothing else.
//
// A policy has state (how many failures in a row it has seen). Users hand a
// prototype to the stream options; each stream keeps the prototype and, at
// its first failed attempt, calls `Clone()` and owns the copy from then on,
// so one prototype may serve any number of streams (and a stream that never
// fails holds no copy).
//
// Thread safety: a clone is used by one stream under that stream's lock; the
// prototype is only ever cloned, which is safe from any thread.
class BackoffPolicy {
 public:
  virtual ~BackoffPolicy() = default;

  // A fresh copy of this policy, in its initial state.
  virtual std::unique_ptr<BackoffPolicy> Clone() const = 0;

  // Called after an attempt that made no progress. Returns the delay before
  // the next attempt. The random draw for this attempt happens here, once:
  // the returned value is kept by the caller, never re-drawn.
  virtual absl::Duration OnFailure(absl::BitGenRef gen) = 0;

  // Called when the stream delivered a new message: the next failure starts
  // the schedule again from the beginning.
  virtual void Reset() = 0;
};

// How a random factor is applied to the exponential delay `d`.
enum class Jitter {
  kNone,          // wait exactly d
  kFull,          // wait uniform[0, d) ("full jitter", the AWS recommendation)
  kProportional,  // wait uniform[d * (1 - f), d * (1 + f)), f = jitter_fraction
};

struct ExponentialBackoffOptions {
  // The un-jittered delay after the first failure. Default 100 ms; > 0.
  absl::Duration initial_delay = absl::Milliseconds(100);
  // The un-jittered delay never grows past this. Default 10 s; >= initial.
  absl::Duration max_delay = absl::Seconds(10);
  // Growth per failure. Default 2.0; >= 1.0.
  double multiplier = 2.0;
  // Default kFull.
  Jitter jitter = Jitter::kFull;
  // Only for kProportional. Default 0.2; in [0, 1].
  double jitter_fraction = 0.2;
};

// OK, or INVALID_ARGUMENT naming the first field that is out of range.
absl::Status Validate(const ExponentialBackoffOptions& options);

// The values gRPC uses for its own connection backoff: 1 s, x1.6, +-20 %,
// at most 120 s.
ExponentialBackoffOptions GrpcConnectionBackoffOptions();

// Delay n (n = 1, 2, ...) is min(max_delay, initial_delay * multiplier^(n-1)),
// then jittered as `jitter` says.
class ExponentialBackoff final : public BackoffPolicy {
 public:
  // Returns INVALID_ARGUMENT for invalid options instead of clamping them.
  static absl::StatusOr<std::unique_ptr<ExponentialBackoff>> Create(
      const ExponentialBackoffOptions& options);

  std::unique_ptr<BackoffPolicy> Clone() const override;
  absl::Duration OnFailure(absl::BitGenRef gen) override;
  void Reset() override { failures_ = 0; }

  const ExponentialBackoffOptions& options() const { return options_; }

 private:
  explicit ExponentialBackoff(const ExponentialBackoffOptions& options)
      : options_(options) {}

  ExponentialBackoffOptions options_;
  int failures_ = 0;
};

}  // namespace tether

#endif  // TETHER_BACKOFF_H_
