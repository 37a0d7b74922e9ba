// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "tether/internal/grpc_read_attempt.h"

namespace tether {
namespace internal {
namespace {

// One thread that drops what it is handed, holding no lock while it does
// (destructors may block briefly or call back into tether).
class Releaser {
 public:
  Releaser() {
    std::thread([this] { Loop(); }).detach();
  }

  void Release(std::shared_ptr<void> ref) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(ref));
    }
    cv_.notify_one();
  }

 private:
  void Loop() {
    std::vector<std::shared_ptr<void>> batch;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return !queue_.empty(); });
      batch.swap(queue_);
      lock.unlock();
      batch.clear();  // may destroy attempts, streams, pools, channels
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<void>> queue_;
};

}  // namespace

void ReleaseOffGrpcThread(std::shared_ptr<void> ref) {
  // Never destroyed: its thread may still run at exit.
  static Releaser* const releaser = new Releaser();
  releaser->Release(std::move(ref));
}

}  // namespace internal
}  // namespace tether
