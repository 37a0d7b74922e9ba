// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: waiting for tether's release thread (see `ReleaseOffGrpcThread`
// in grpc_read_attempt.h) to drop what it was handed.
#ifndef TETHER_INTERNAL_RELEASE_BARRIER_H_
#define TETHER_INTERNAL_RELEASE_BARRIER_H_

#include "absl/time/time.h"

namespace tether {
namespace internal {

// Waits until everything handed to `ReleaseOffGrpcThread` before this call
// has been dropped (its destructors have returned), at most `timeout`.
// Returns whether it has. For tests and orderly shutdown: a process that
// exits while the release thread still tears down a pool races the
// libraries' exit handlers (OpenSSL frees its tables at exit). Never call it
// from something the release thread runs (a destructor dropped there): that
// waits out the whole timeout.
bool WaitForReleases(absl::Duration timeout);

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_RELEASE_BARRIER_H_
