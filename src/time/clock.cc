// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/clock.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <thread>
#include <unordered_map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "tether/internal/mutex.h"

namespace tether {
namespace {

// The longest single wait of the timer thread. Far-off due times are reached
// by waking up and waiting again, so no wait ever converts a huge duration
// to `std::chrono` (which overflows past about 292 years of nanoseconds).
constexpr absl::Duration kMaxWait = absl::Hours(1);

// `SystemClock()`: `steady_clock` time, one thread, one ordered map of due
// times. Good for the few timers a stream has (one backoff or hand-off timer
// at a time) and a pool's idle timers.
//
// A due time may be anything `absl::Time + Duration` gives, including
// `InfiniteFuture()` (a delay of `InfiniteDuration()`): such a timer never
// fires but can be cancelled. The thread waits on `steady_clock` (a
// `std::condition_variable_any`: abseil 20220623's `CondVar` times out on the
// wall clock), at most `kMaxWait` at a time.
//
// Thread safety: all methods from any thread; callbacks run on the thread,
// with no lock held. Never destroyed (the thread is detached).
class SteadyClock final : public Clock {
 public:
  SteadyClock() {
    std::thread([this] { Loop(); }).detach();
  }

  absl::Time Now() override {
    const auto since_start =
        std::chrono::steady_clock::now().time_since_epoch();
    return absl::UnixEpoch() + absl::FromChrono(since_start);
  }

  TimerId RunAfter(absl::Duration delay, std::function<void()> fn) override {
    // absl::Time + Duration saturates: InfiniteDuration gives InfiniteFuture.
    const absl::Time due = Now() + std::max(delay, absl::ZeroDuration());
    TimerId id;
    {
      internal::MutexLock lock(&mu_);
      id = ++last_id_;
      timers_.emplace(std::make_pair(due, id), std::move(fn));
      due_of_.emplace(id, due);
    }
    cv_.notify_one();
    return id;
  }

  bool Cancel(TimerId id) override {
    std::function<void()> drop;  // destroyed after the lock is released
    internal::MutexLock lock(&mu_);
    auto it = due_of_.find(id);
    if (it == due_of_.end()) return false;
    auto timer = timers_.find(std::make_pair(it->second, id));
    drop = std::move(timer->second);
    timers_.erase(timer);
    due_of_.erase(it);
    return true;
  }

 private:
  void Loop() {
    mu_.Lock();
    for (;;) {
      if (timers_.empty() ||
          timers_.begin()->first.first == absl::InfiniteFuture()) {
        cv_.wait(mu_);  // nothing will ever fall due without a new timer
        continue;
      }
      auto it = timers_.begin();
      const absl::Time now = Now();
      if (it->first.first > now) {
        const absl::Duration wait = std::min(it->first.first - now, kMaxWait);
        cv_.wait_for(mu_, absl::ToChronoNanoseconds(wait));
        continue;
      }
      std::function<void()> fn = std::move(it->second);
      due_of_.erase(it->first.second);
      timers_.erase(it);
      mu_.Unlock();
      fn();
      fn = nullptr;  // its captures are released with no lock held too
      mu_.Lock();
    }
  }

  internal::Mutex mu_;
  // Waits on steady_clock; signalled when a timer is added.
  std::condition_variable_any cv_;
  // Ordered by due time; `due_of_` finds a timer by id for `Cancel`.
  std::map<std::pair<absl::Time, TimerId>, std::function<void()>> timers_
      ABSL_GUARDED_BY(mu_);
  std::unordered_map<TimerId, absl::Time> due_of_ ABSL_GUARDED_BY(mu_);
  TimerId last_id_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

Clock& SystemClock() {
  static Clock* const clock = new SteadyClock();
  return *clock;
}

}  // namespace tether
