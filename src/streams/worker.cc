// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/worker.h"

#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "tether/internal/mutex.h"

namespace tether {
namespace internal {
namespace {

// Thread safety: `Post` from any thread. Never destroyed (its thread may
// still run at exit).
class Worker {
 public:
  Worker() {
    std::thread([this] { Loop(); }).detach();
  }

  void Post(std::function<void()> task) {
    MutexLock lock(&mu_);
    queue_.push_back(std::move(task));
    cv_.Signal();
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> task;
      {
        MutexLock lock(&mu_);
        while (queue_.empty()) cv_.Wait(&mu_);
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  Mutex mu_;
  CondVar cv_;  // signalled when queue_ gets a task
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

void RunOnWorker(std::function<void()> task) {
  static Worker* const worker = new Worker();
  worker->Post(std::move(task));
}

}  // namespace internal
}  // namespace tether
