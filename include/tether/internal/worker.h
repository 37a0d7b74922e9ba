// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: one tether thread for app code that may block (a stream's
// `resync`), never a gRPC callback thread or the clock's timer thread.
#ifndef TETHER_INTERNAL_WORKER_H_
#define TETHER_INTERNAL_WORKER_H_

#include <functional>

namespace tether {
namespace internal {

// Runs `task` on tether's worker thread (one per process, started on first
// use), after the tasks queued before it, with no tether lock held. A task
// that blocks delays the ones after it (other streams' resyncs), nothing
// else.
void RunOnWorker(std::function<void()> task);

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_WORKER_H_
