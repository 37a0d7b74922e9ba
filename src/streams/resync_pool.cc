// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/resync_pool.h"

#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tether/internal/mutex.h"

namespace tether {

// Shared by the pool and its threads: a thread outlives the pool while its
// task runs.
struct ResyncPool::State {
  explicit State(int max) : max_threads(max) {}

  // One thread: runs tasks until the pool is gone and the queue is empty.
  void Loop() ABSL_LOCKS_EXCLUDED(mu) {
    for (;;) {
      std::function<void()> task;
      {
        internal::MutexLock lock(&mu);
        if (!TakeLocked(&task)) {
          --threads;
          return;
        }
      }
      task();
      task = nullptr;  // what it holds is released before the count drops
      internal::MutexLock lock(&mu);
      --running;
    }
  }

  // Waits for a task; false once the pool is gone and nothing is queued.
  bool TakeLocked(std::function<void()>* task)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
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

  const int max_threads;
  mutable internal::Mutex mu;
  internal::CondVar cv;  // signalled when a task is queued or the pool closes
  std::deque<std::function<void()>> queue ABSL_GUARDED_BY(mu);
  int threads ABSL_GUARDED_BY(mu) = 0;
  int idle ABSL_GUARDED_BY(mu) = 0;
  std::size_t running ABSL_GUARDED_BY(mu) = 0;
  bool closed ABSL_GUARDED_BY(mu) = false;
};

absl::StatusOr<std::shared_ptr<ResyncPool>> ResyncPool::Create(
    ResyncPoolOptions options) {
  if (options.max_threads < 1 || options.max_threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("ResyncPoolOptions.max_threads must be in [1, 1024], got ",
                     options.max_threads));
  }
  return std::shared_ptr<ResyncPool>(new ResyncPool(options.max_threads));
}

const std::shared_ptr<ResyncPool>& ResyncPool::Default() {
  static const auto* const pool = new std::shared_ptr<ResyncPool>(
      new ResyncPool(ResyncPoolOptions().max_threads));
  return *pool;
}

std::shared_ptr<ResyncPool> ResyncPool::Inline() {
  return std::shared_ptr<ResyncPool>(new ResyncPool(0));
}

ResyncPool::ResyncPool(int max_threads)
    : state_(std::make_shared<State>(max_threads)) {}

ResyncPool::~ResyncPool() {
  internal::MutexLock lock(&state_->mu);
  state_->closed = true;
  state_->cv.SignalAll();
}

void ResyncPool::Run(std::function<void()> task) {
  if (state_->max_threads == 0) {  // Inline()
    {
      internal::MutexLock lock(&state_->mu);
      ++state_->running;
    }
    task();
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
    } else if (state_->threads < state_->max_threads) {
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
