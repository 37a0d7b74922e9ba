// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Internal: calls made in the order they were decided, from whichever thread
// is free, never under the caller's lock.
#ifndef TETHER_SRC_CONNECTIONS_SERIAL_CALLS_H_
#define TETHER_SRC_CONNECTIONS_SERIAL_CALLS_H_

#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "tether/internal/compact_fifo.h"
#include "tether/internal/mutex.h"
#include "tether/internal/visibility.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

// The pool decides its observer's events under its lock on many threads (a
// pick, gRPC's connectivity watcher, a timer). Handing each one to the
// deciding thread's `Deferred` would let a thread that decided later call
// first: `OnConnectionReady(3)` could reach the observer before
// `OnConnectionOpened(3)`. Instead the deciding section `Post`s (queues
// only; fine under any lock) and, once its lock is released, calls `Run`:
// one thread at a time runs the queue in order, with no lock held while a
// call runs. A `Run` that finds another thread running returns at once; that
// thread runs the new calls too, so a call that `Post`s and `Run`s again
// just queues behind itself.
class SerialCalls {
 public:
  void Post(std::function<void()> call) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    queue_.push_back(std::move(call));
  }

  void Run() ABSL_LOCKS_EXCLUDED(mu_) {
    bool mine = false;  // this thread runs the queue
    for (;;) {
      std::function<void()> call;
      {
        MutexLock lock(&mu_);
        if (running_ && !mine) return;
        mine = true;
        if (queue_.empty()) {
          running_ = false;
          return;
        }
        running_ = true;
        call = std::move(queue_.front());
        queue_.pop_front();
      }
      try {
        call();
      } catch (...) {  // let the next `Run` go on, then report it
        MutexLock lock(&mu_);
        running_ = false;
        throw;
      }
    }
  }

 private:
  Mutex mu_;
  CompactFifo<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // a thread runs the queue
};

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_CONNECTIONS_SERIAL_CALLS_H_
