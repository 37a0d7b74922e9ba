// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/clock.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace tether {
namespace {

// One thread, one ordered map of due times. Good for the few timers a stream
// has (one backoff or hand-off timer at a time).
class SteadyClock final : public Clock {
 public:
  SteadyClock() : thread_([this] { Loop(); }) { thread_.detach(); }

  absl::Time Now() override {
    return absl::UnixEpoch() +
           absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
  }

  TimerId RunAfter(absl::Duration delay, std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mu_);
    TimerId id = ++last_id_;
    absl::Time due = Now() + std::max(delay, absl::ZeroDuration());
    timers_.emplace(std::make_pair(due, id), std::move(fn));
    cv_.notify_one();
    return id;
  }

  bool Cancel(TimerId id) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = timers_.begin(); it != timers_.end(); ++it) {
      if (it->first.second == id) {
        timers_.erase(it);
        return true;
      }
    }
    return false;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (timers_.empty()) {
        cv_.wait(lock);
        continue;
      }
      auto it = timers_.begin();
      absl::Time now = Now();
      if (it->first.first > now) {
        cv_.wait_for(lock, absl::ToChronoNanoseconds(it->first.first - now));
        continue;
      }
      std::function<void()> fn = std::move(it->second);
      timers_.erase(it);
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<absl::Time, TimerId>, std::function<void()>> timers_;
  TimerId last_id_ = 0;
  std::thread thread_;
};

}  // namespace

Clock& SystemClock() {
  static Clock* const clock = new SteadyClock();
  return *clock;
}

}  // namespace tether
