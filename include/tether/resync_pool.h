// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_RESYNC_POOL_H_
#define TETHER_RESYNC_POOL_H_

#include <cstddef>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"

namespace tether {

struct ResyncPoolOptions {
  // How many resyncs may run at once: the pool's threads. A resync that
  // blocks (a listing that hangs) holds one thread until it returns, so up
  // to `max_threads - 1` hung resyncs delay no other stream's; more resyncs
  // than threads wait, in the order they were asked. Default 8; in
  // [1, 1024].
  int max_threads = 8;
};

// The threads on which streams call their app's `resync` (which may block:
// it lists what the stream missed). Share one among the streams whose
// resyncs should be bounded together (`ReconnectingStreamOptions::
// resync_pool`); streams without one share `Default()`, so by default at
// most 8 resyncs run at once in a process.
//
// Threads start on demand, never more than `max_threads`, and stay for the
// pool's life. The pool lives as long as its last holder (streams hold it);
// then its idle threads end, and a busy one ends when its task returns.
//
// Thread safety: every method from any thread.
//
//   ResyncPoolOptions o;
//   o.max_threads = 2;  // a listing at a time, and one spare
//   options.resync_pool = ResyncPool::Create(o).value();
class ResyncPool {
 public:
  // INVALID_ARGUMENT for options out of range.
  static absl::StatusOr<std::shared_ptr<ResyncPool>> Create(
      ResyncPoolOptions options);
  // The process's pool (default options), created on first use, never
  // destroyed.
  static const std::shared_ptr<ResyncPool>& Default();
  // A pool with no threads: each resync runs on the thread that asks for it
  // (the one where the stream learned it must resync: one of gRPC's, or a
  // test's fake clock), with no tether lock held. Only for a `resync` that
  // never blocks (it answers through `done`, now or later): deterministic
  // tests and simulations. `max_threads()` is 0.
  static std::shared_ptr<ResyncPool> Inline();

  ~ResyncPool();
  ResyncPool(const ResyncPool&) = delete;
  ResyncPool& operator=(const ResyncPool&) = delete;

  // Runs `task` on one of the pool's threads, with no tether lock held:
  // at once on an idle thread or a new one, else after the tasks queued
  // before it (an `Inline()` pool: now, on this thread). `task` must not
  // throw.
  void Run(std::function<void()> task);

  int max_threads() const;
  // Tasks running now, and tasks waiting for a thread.
  std::size_t running() const;
  std::size_t queued() const;

 private:
  struct State;
  explicit ResyncPool(int max_threads);
  const std::shared_ptr<State> state_;
};

}  // namespace tether

#endif  // TETHER_RESYNC_POOL_H_
