// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_RESYNC_POOL_H_
#define TETHER_RESYNC_POOL_H_

#include <cstddef>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "tether/clock.h"
#include "tether/internal/visibility.h"

namespace tether {
namespace internal {
class TETHER_HIDDEN_TYPE StreamMachine;
}  // namespace internal

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
  // A pool whose workers live on `clock` instead of threads: deterministic
  // tests and simulations that bound their resyncs as production does. A
  // resync starts when one of `options.max_threads` workers is free, as a
  // timer due at once (on the thread that advances the clock, a
  // `FakeClock`'s caller), and holds its worker until it calls `done` (or
  // drops it): the way a resync that blocks on its listing holds a thread.
  // A listing that hangs (keeps `done` and never calls it) holds its worker
  // as long; more resyncs than workers wait, in the order they were asked.
  // A task given to `Run` holds its worker until it returns. INVALID_ARGUMENT
  // for options out of range or a null clock.
  //
  //   auto pool = ResyncPool::OnClock(ResyncPoolOptions{}, fake_clock).value();
  //   options.resync_pool = pool;  // resync: clock->RunAfter(2s, [done] {...})
  static absl::StatusOr<std::shared_ptr<ResyncPool>> OnClock(
      ResyncPoolOptions options, std::shared_ptr<Clock> clock);

  ~ResyncPool();
  ResyncPool(const ResyncPool&) = delete;
  ResyncPool& operator=(const ResyncPool&) = delete;

  // Runs `task` on one of the pool's threads, with no tether lock held:
  // at once on an idle thread or a new one, else after the tasks queued
  // before it (an `Inline()` pool: now, on this thread). `task` must not
  // throw.
  void Run(std::function<void()> task);

  int max_threads() const;
  // Tasks running now (on a clock pool: workers taken), and tasks waiting
  // for a thread (a worker).
  std::size_t running() const;
  std::size_t queued() const;

 private:
  friend class internal::StreamMachine;
  struct State;
  using HeldTask = std::function<void(std::function<void()> release)>;
  ResyncPool(int max_threads, std::shared_ptr<Clock> clock);

  // Runs `task(release)` as `Run` runs a task. On a thread pool its thread
  // is free when it returns; on a clock pool its worker is free once
  // `release` was called (idempotent, from any thread, with no tether lock
  // held). Streams run their resyncs this way, releasing with `done`.
  void RunHeld(HeldTask task);

  // Where in its spread window (`resync_jitter`) the next stream that must
  // resync waits, as a fraction in [0, 1): the streams of one pool fill
  // their windows evenly (van der Corput order), so a mass compaction lists
  // as an even ramp. The order starts at the first asker's `draw` (a
  // uniform draw from its seeded random source, so a seeded test repeats).
  double NextSpreadShare(double draw);

  const std::shared_ptr<State> state_;
};

}  // namespace tether

#endif  // TETHER_RESYNC_POOL_H_
