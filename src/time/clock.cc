// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/clock.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

namespace tether {
namespace {

// One thread, one ordered map of due times. Good for the few timers a stream
// has (one backoff or hand-off timer at a time).
class SteadyClock final : public Clock {
 public:
  SteadyClock() : thread_([this] { Loop(); }) { thread_.detach(); }

  absl::Time Now() override {
    const auto since_start =
        std::chrono::steady_clock::now().time_since_epoch();
    return absl::UnixEpoch() + absl::FromChrono(since_start);
  }

  TimerId RunAfter(absl::Duration delay, std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mu_);
    TimerId id = ++last_id_;
    absl::Time due = Now() + std::max(delay, absl::ZeroDuration());
    timers_.emplace(std::make_pair(due, id), std::move(fn));
    due_of_.emplace(id, due);
    cv_.notify_one();
    return id;
  }

  bool Cancel(TimerId id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = due_of_.find(id);
    if (it == due_of_.end()) return false;
    timers_.erase(std::make_pair(it->second, id));
    due_of_.erase(it);
    return true;
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
      due_of_.erase(it->first.second);
      timers_.erase(it);
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  // Ordered by due time; `due_of_` finds a timer by id for `Cancel`.
  std::map<std::pair<absl::Time, TimerId>, std::function<void()>> timers_;
  std::unordered_map<TimerId, absl::Time> due_of_;
  TimerId last_id_ = 0;
  std::thread thread_;
};

}  // namespace

Clock& SystemClock() {
  static Clock* const clock = new SteadyClock();
  return *clock;
}

}  // namespace tether
