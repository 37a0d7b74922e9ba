// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tether/internal/grpc_call_context.h"
#include "tether/internal/mutex.h"
#include "tether/internal/release_barrier.h"

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

Releaser& TheReleaser() {
  // Never destroyed: its thread may still run at exit.
  static Releaser* const releaser = new Releaser();
  return *releaser;
}

// Runs `fn` on the release thread, in FIFO order with the releases: the
// thread drops a reference whose deleter calls it.
template <class Fn>
void RunOnReleaseThread(Fn fn) {
  TheReleaser().Release(
      std::shared_ptr<void>(nullptr, [fn = std::move(fn)](void*) { fn(); }));
}

}  // namespace

void ReleaseOffGrpcThread(std::shared_ptr<void> ref) {
  TheReleaser().Release(std::move(ref));
}

void CancelOffGrpcThread(std::shared_ptr<void> owner,
                         grpc::ClientContext* context) {
  if (!owner) {  // nothing keeps the context alive past this call
    context->TryCancel();
    return;
  }
  // `owner` is dropped there too, with the closure.
  RunOnReleaseThread(
      [owner = std::move(owner), context] { context->TryCancel(); });
}

bool WaitForReleases(absl::Duration timeout) {
  // A marker queued behind everything released so far: the queue is a
  // FIFO, dropped in order, so once the marker is dropped so is all before
  // it.
  struct Done {
    Mutex mu;
    CondVar cv;
    bool done ABSL_GUARDED_BY(mu) = false;
  };
  auto done = std::make_shared<Done>();
  RunOnReleaseThread([done] {
    MutexLock lock(&done->mu);
    done->done = true;
    done->cv.SignalAll();
  });
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&done->mu);
  while (!done->done) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    done->cv.WaitWithTimeout(&done->mu, left);
  }
  return done->done;
}

}  // namespace internal
}  // namespace tether
