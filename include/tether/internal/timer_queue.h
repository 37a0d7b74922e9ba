// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: the waiting timers of a clock, by due time, cancellable by id.
#ifndef TETHER_INTERNAL_TIMER_QUEUE_H_
#define TETHER_INTERNAL_TIMER_QUEUE_H_

#include <algorithm>
#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "tether/clock.h"

namespace tether {
namespace internal {

// Timers in due order (equal due times in the order they were added), each
// found by its id for `Cancel`. Both of tether's clocks keep their timers
// here: `SystemClock()` and `fakes::FakeClock`.
//
// The rule: a binary heap of (due, id) and a hash map from id to callback.
// `Cancel` only erases the callback; its heap entry goes stale and is
// skipped when it reaches the top (and all stale entries are dropped at once
// when they outnumber the live ones). So adding, cancelling and taking a
// timer cost no allocation of their own (a callback's captures may), which
// matters to a stream that arms and cancels timers on every attempt and to
// a simulation that runs millions of timers.
//
// Neither the map nor the heap keeps the room of a crowd that has gone:
// once the live timers fill less than an eighth of it (and it is larger than
// `kKeptRoom`), the room is given back. A process that armed a timer for
// each of 100,000 opening streams does not hold their slots for its life;
// since the room must fall eightfold between two shrinks and doubles as it
// grows, the shrinks cost O(1) per timer over time.
//
// Not thread-safe: the clock that owns it guards it with its lock.
class TimerQueue {
 public:
  using TimerId = Clock::TimerId;

  // Adds a timer due at `due`; returns its id (1, 2, ...: never reused).
  TimerId Add(absl::Time due, std::function<void()> fn) {
    const TimerId id = ++last_id_;
    heap_.push_back(Entry{due, id});
    std::push_heap(heap_.begin(), heap_.end(), Later());
    fns_.emplace(id, std::move(fn));
    return id;
  }

  // Removes timer `id`; false when it is not waiting (ran, cancelled or
  // unknown). Its callback moves to `*dropped` when given (the caller may
  // destroy it with no lock held).
  bool Cancel(TimerId id, std::function<void()>* dropped = nullptr) {
    auto it = fns_.find(id);
    if (it == fns_.end()) return false;
    if (dropped) *dropped = std::move(it->second);
    fns_.erase(it);
    if (heap_.size() > 2 * fns_.size() + 64) Compact();
    MaybeShrink();
    return true;
  }

  // The due time of the earliest waiting timer; InfiniteFuture when none.
  absl::Time NextDue() {
    DropStale();
    return heap_.empty() ? absl::InfiniteFuture() : heap_.front().due;
  }

  // Takes the earliest waiting timer if it is due at or before `t`: its due
  // time and callback. False when none is.
  bool TakeDue(absl::Time t, absl::Time* due, std::function<void()>* fn) {
    DropStale();
    if (heap_.empty() || heap_.front().due > t) return false;
    const Entry top = heap_.front();
    std::pop_heap(heap_.begin(), heap_.end(), Later());
    heap_.pop_back();
    auto it = fns_.find(top.id);
    *due = top.due;
    *fn = std::move(it->second);
    fns_.erase(it);
    MaybeShrink();
    return true;
  }

  // How many timers are waiting.
  std::size_t size() const { return fns_.size(); }

  // Timers the map and the heap have room for now (at least `size()`).
  std::size_t room() const {
    return std::max(fns_.capacity(), heap_.capacity());
  }

  // Below this room nothing is given back.
  static constexpr std::size_t kKeptRoom = 256;

 private:
  struct Entry {
    absl::Time due;
    TimerId id;
  };
  // The heap's order: the top is the earliest (due, id). A function object,
  // not a function, so that the heap's algorithms inline it.
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      if (a.due != b.due) return a.due > b.due;
      return a.id > b.id;
    }
  };

  // Pops cancelled entries off the top.
  void DropStale() {
    while (!heap_.empty() && !fns_.contains(heap_.front().id)) {
      std::pop_heap(heap_.begin(), heap_.end(), Later());
      heap_.pop_back();
    }
  }

  // Gives back the room of timers that have gone (see the class comment).
  void MaybeShrink() {
    if (fns_.capacity() > kKeptRoom && fns_.size() * 8 < fns_.capacity()) {
      fns_.rehash(0);  // to fit what is left
    }
    if (heap_.capacity() > kKeptRoom && fns_.size() * 8 < heap_.capacity()) {
      Compact();
      heap_.shrink_to_fit();
    }
  }

  // Keeps only the live entries.
  void Compact() {
    heap_.erase(std::remove_if(heap_.begin(), heap_.end(),
                               [this](const Entry& e) {
                                 return !fns_.contains(e.id);
                               }),
                heap_.end());
    std::make_heap(heap_.begin(), heap_.end(), Later());
  }

  std::vector<Entry> heap_;
  absl::flat_hash_map<TimerId, std::function<void()>> fns_;
  TimerId last_id_ = 0;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_TIMER_QUEUE_H_
