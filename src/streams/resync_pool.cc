// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/resync_pool.h"

#include <atomic>
#include <cstdint>
#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "policies/spread_order.h"
#include "tether/internal/mutex.h"

namespace tether {

// Shared by the pool and its workers: a worker outlives the pool while its
// task runs (a thread) or holds it (a clock pool's task until its release).
//
// Three kinds: threads (`clock` null, `max_threads` > 0), inline
// (`max_threads` 0: the caller's thread) and workers on a clock (`clock`
// set). Threads and clock workers keep one rule, `HasRoomLocked`: a task
// waits only while `max_threads` tasks hold workers.
struct ResyncPool::State {
  State(int max, std::shared_ptr<Clock> c)
      : max_threads(max), clock(std::move(c)) {}

  // Whether a task may take a worker while `taken` are taken.
  bool HasRoomLocked(std::size_t taken) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return taken < static_cast<std::size_t>(max_threads);
  }

  // One thread: runs tasks until the pool is gone and the queue is empty.
  void Loop() ABSL_LOCKS_EXCLUDED(mu) {
    for (;;) {
      HeldTask task;
      {
        internal::MutexLock lock(&mu);
        if (!TakeLocked(&task)) {
          --threads;
          return;
        }
      }
      task([] {});  // the thread is the worker: free when the task returns
      task = nullptr;  // what it holds is released before the count drops
      internal::MutexLock lock(&mu);
      --running;
    }
  }

  // Waits for a task; false once the pool is gone and nothing is queued.
  bool TakeLocked(HeldTask* task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    while (queue.empty() && !closed) {
      ++idle;
      cv.Wait(&mu);
      --idle;
    }
    if (queue.empty()) return false;
    *task = std::move(queue.front());
    queue.pop_front();
    ++running;
    return true;
  }

  // A clock pool: runs `task` (which holds a worker already) on the clock,
  // with a release that frees the worker once and starts the next task.
  static void StartOnClock(const std::shared_ptr<State>& state,
                           HeldTask task) ABSL_LOCKS_EXCLUDED(state->mu) {
    auto released = std::make_shared<std::atomic<bool>>(false);
    std::function<void()> release = [state, released] {
      if (released->exchange(true)) return;
      HeldTask next;
      {
        internal::MutexLock lock(&state->mu);
        --state->running;
        if (!state->queue.empty() && state->HasRoomLocked(state->running)) {
          next = std::move(state->queue.front());
          state->queue.pop_front();
          ++state->running;
        }
      }
      if (next) StartOnClock(state, std::move(next));
    };
    state->clock->RunAfter(
        absl::ZeroDuration(),
        [task = std::move(task), release = std::move(release)] {
          task(release);
        });
  }

  const int max_threads;
  const std::shared_ptr<Clock> clock;
  mutable internal::Mutex mu;
  internal::CondVar cv;  // signalled when a task is queued or the pool closes
  std::deque<HeldTask> queue ABSL_GUARDED_BY(mu);
  int threads ABSL_GUARDED_BY(mu) = 0;
  int idle ABSL_GUARDED_BY(mu) = 0;
  std::size_t running ABSL_GUARDED_BY(mu) = 0;
  bool closed ABSL_GUARDED_BY(mu) = false;
  // The resync spread's order, its offset from the first ask. Kept as the
  // two values of an `internal::SpreadOrder` (`SpreadOrder::Point`): that
  // type has hidden visibility and `State` does not, so it cannot hold one.
  // A leaf lock: streams ask under their own.
  internal::Mutex spread_mu;
  double spread_offset ABSL_GUARDED_BY(spread_mu) = 0.0;
  std::uint32_t spread_taken ABSL_GUARDED_BY(spread_mu) = 0;
};

namespace {

absl::Status CheckMaxThreads(const ResyncPoolOptions& options) {
  if (options.max_threads < 1 || options.max_threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("ResyncPoolOptions.max_threads must be in [1, 1024], got ",
                     options.max_threads));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<ResyncPool>> ResyncPool::Create(
    ResyncPoolOptions options) {
  absl::Status valid = CheckMaxThreads(options);
  if (!valid.ok()) return valid;
  return std::shared_ptr<ResyncPool>(
      new ResyncPool(options.max_threads, nullptr));
}

absl::StatusOr<std::shared_ptr<ResyncPool>> ResyncPool::OnClock(
    ResyncPoolOptions options, std::shared_ptr<Clock> clock) {
  absl::Status valid = CheckMaxThreads(options);
  if (!valid.ok()) return valid;
  if (!clock) {
    return absl::InvalidArgumentError(
        "ResyncPool::OnClock: the clock must not be null");
  }
  return std::shared_ptr<ResyncPool>(
      new ResyncPool(options.max_threads, std::move(clock)));
}

const std::shared_ptr<ResyncPool>& ResyncPool::Default() {
  static const auto* const pool = new std::shared_ptr<ResyncPool>(
      new ResyncPool(ResyncPoolOptions().max_threads, nullptr));
  return *pool;
}

std::shared_ptr<ResyncPool> ResyncPool::Inline() {
  return std::shared_ptr<ResyncPool>(new ResyncPool(0, nullptr));
}

ResyncPool::ResyncPool(int max_threads, std::shared_ptr<Clock> clock)
    : state_(std::make_shared<State>(max_threads, std::move(clock))) {}

double ResyncPool::NextSpreadShare(double draw) {
  internal::MutexLock lock(&state_->spread_mu);
  if (state_->spread_taken == 0) state_->spread_offset = draw;
  return internal::SpreadOrder::Point(state_->spread_offset,
                                      state_->spread_taken++);
}

ResyncPool::~ResyncPool() {
  internal::MutexLock lock(&state_->mu);
  state_->closed = true;
  state_->cv.SignalAll();
}

void ResyncPool::Run(std::function<void()> task) {
  RunHeld([task = std::move(task)](std::function<void()> release) {
    task();
    release();
  });
}

void ResyncPool::RunHeld(HeldTask task) {
  if (state_->clock) {
    {
      internal::MutexLock lock(&state_->mu);
      if (!state_->HasRoomLocked(state_->running)) {
        state_->queue.push_back(std::move(task));
        return;
      }
      ++state_->running;
    }
    State::StartOnClock(state_, std::move(task));
    return;
  }
  if (state_->max_threads == 0) {  // Inline()
    {
      internal::MutexLock lock(&state_->mu);
      ++state_->running;
    }
    task([] {});
    task = nullptr;
    internal::MutexLock lock(&state_->mu);
    --state_->running;
    return;
  }
  bool spawn = false;
  {
    internal::MutexLock lock(&state_->mu);
    state_->queue.push_back(std::move(task));
    // Each queued task needs a thread of its own: an idle one that has not
    // been claimed by an earlier task, or a new one.
    if (state_->queue.size() <= static_cast<std::size_t>(state_->idle)) {
      state_->cv.Signal();
    } else if (state_->HasRoomLocked(
                   static_cast<std::size_t>(state_->threads))) {
      ++state_->threads;
      spawn = true;
    }
  }
  if (spawn) std::thread([state = state_] { state->Loop(); }).detach();
}

int ResyncPool::max_threads() const { return state_->max_threads; }

std::size_t ResyncPool::running() const {
  internal::MutexLock lock(&state_->mu);
  return state_->running;
}

std::size_t ResyncPool::queued() const {
  internal::MutexLock lock(&state_->mu);
  return state_->queue.size();
}

}  // namespace tether
