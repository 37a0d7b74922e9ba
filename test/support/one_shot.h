// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_TEST_SUPPORT_ONE_SHOT_H_
#define TETHER_TEST_SUPPORT_ONE_SHOT_H_

#include <condition_variable>
#include <mutex>

#include "absl/time/time.h"

namespace tether {
namespace testsupport {

// An event that happens once (a pool destroyed, a server gone) and that
// threads wait for with a deadline. std::mutex, not absl::Notification:
// Debian's abseil is not TSan-instrumented, so TSan could not see the latter.
class OneShot {
 public:
  void Signal() {
    std::lock_guard<std::mutex> lock(mu_);
    signalled_ = true;
    cv_.notify_all();
  }
  // True once signalled; false if `timeout` passed first.
  bool Wait(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                        [&] { return signalled_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool signalled_ = false;
};

}  // namespace testsupport
}  // namespace tether

#endif  // TETHER_TEST_SUPPORT_ONE_SHOT_H_
