// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: work decided under a lock and done after it is released.
#ifndef TETHER_INTERNAL_DEFERRED_H_
#define TETHER_INTERNAL_DEFERRED_H_

#include <cstddef>
#include <exception>
#include <functional>
#include <utility>
#include <vector>

namespace tether {
namespace internal {

// Calls that a component decides on while it holds its lock, and makes only
// once the lock is released: anything user-supplied (callbacks, observers,
// listeners) and anything that may call back into the component (another
// component, an attempt, a timer cancel). tether never calls out under its
// own locks; this is how the stream, the pool and the breaker keep that rule.
//
//   Deferred later;  // declared before the lock, so it runs after it
//   {
//     absl::MutexLock lock(&mu_);
//     ... decide ...
//     later.Add([observer, info] { observer->OnSomething(info); });
//   }
//   later.Run();  // or let the destructor run it
//
// Calls run in the order they were added, each once. A call may add more
// calls to the same `Deferred`; they run in the same `Run`. A call that
// throws does not keep the ones after it from running: `Run` rethrows the
// first exception once every call has run, and the destructor drops it (an
// exception leaving a destructor would end the process). Not thread-safe: one
// `Deferred` belongs to one thread, usually as a local variable.
class Deferred {
 public:
  Deferred() = default;
  Deferred(const Deferred&) = delete;
  Deferred& operator=(const Deferred&) = delete;
  Deferred(Deferred&&) = default;
  Deferred& operator=(Deferred&&) = default;
  // Runs what is still queued (an early return must not lose work).
  ~Deferred() {
    try {
      Run();
    } catch (...) {
      // Every call has run; there is no one to tell.
    }
  }

  void Add(std::function<void()> call) { calls_.push_back(std::move(call)); }

  bool empty() const { return next_ >= calls_.size(); }

  // Runs every queued call, including the ones added while running; then
  // rethrows the first exception a call threw, if any.
  void Run() {
    std::exception_ptr first;
    while (next_ < calls_.size()) {
      std::function<void()> call = std::move(calls_[next_]);
      ++next_;
      try {
        call();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    calls_.clear();
    next_ = 0;
    if (first) std::rethrow_exception(first);
  }

 private:
  std::vector<std::function<void()>> calls_;
  std::size_t next_ = 0;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_DEFERRED_H_
