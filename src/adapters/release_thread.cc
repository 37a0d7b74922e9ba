// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "tether/internal/grpc_read_attempt.h"
#include "tether/internal/mutex.h"

namespace tether {
namespace internal {
namespace {

// One thread that drops what it is handed, holding no lock while it does
// (destructors may block briefly or call back into tether).
//
// Thread safety: `Release` from any thread. Never destroyed.
class Releaser {
 public:
  Releaser() {
    std::thread([this] { Loop(); }).detach();
  }

  void Release(std::shared_ptr<void> ref) {
    MutexLock lock(&mu_);
    queue_.push_back(std::move(ref));
    cv_.Signal();
  }

 private:
  void Loop() {
    std::vector<std::shared_ptr<void>> batch;
    for (;;) {
      {
        MutexLock lock(&mu_);
        while (queue_.empty()) cv_.Wait(&mu_);
        batch.swap(queue_);
      }
      batch.clear();  // may destroy attempts, streams, pools, channels
    }
  }

  Mutex mu_;
  CondVar cv_;  // signalled when queue_ gets an entry
  std::vector<std::shared_ptr<void>> queue_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

void ReleaseOffGrpcThread(std::shared_ptr<void> ref) {
  // Never destroyed: its thread may still run at exit.
  static Releaser* const releaser = new Releaser();
  releaser->Release(std::move(ref));
}

}  // namespace internal
}  // namespace tether
