// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: how a stream hands messages, its end and its events to the app.
#ifndef TETHER_INTERNAL_DELIVERY_QUEUE_H_
#define TETHER_INTERNAL_DELIVERY_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "tether/internal/mutex.h"

namespace tether {
namespace internal {

// Marks, for the current thread, that a callout of `owner` is running, so
// that `owner` destroyed or finished from inside its own callout does not
// wait for itself. RAII; nests.
class CalloutScope {
 public:
  explicit CalloutScope(const void* owner);
  ~CalloutScope();
  CalloutScope(const CalloutScope&) = delete;
  CalloutScope& operator=(const CalloutScope&) = delete;
  // How many callouts of `owner` the current thread is inside.
  static int Depth(const void* owner);

 private:
  const void* owner_;
};

// What a user callback's exception becomes: INTERNAL naming the callback.
absl::Status CallbackThrew(const char* callback, std::exception_ptr error);

// A FIFO that allocates nothing while empty and, once used, only what its
// longest run held (a vector plus a read index; no per-message allocation).
// A `std::deque` allocates a 512-byte block and its map up front, per
// stream, whether or not anything is ever queued.
template <class T>
class CompactFifo {
 public:
  bool empty() const { return head_ == items_.size(); }
  std::size_t size() const { return items_.size() - head_; }
  T& front() { return items_[head_]; }
  void push_back(T value) {
    if (head_ != 0 && items_.size() == items_.capacity() &&
        head_ * 2 >= items_.size()) {
      // Reuse the consumed front instead of growing.
      items_.erase(items_.begin(),
                   items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    items_.push_back(std::move(value));
  }
  template <class... Args>
  void emplace_back(Args&&... args) {
    push_back(T(std::forward<Args>(args)...));
  }
  void pop_front() {
    if (++head_ == items_.size()) clear();
  }
  // Oldest first.
  typename std::vector<T>::const_iterator begin() const {
    return items_.begin() + static_cast<std::ptrdiff_t>(head_);
  }
  typename std::vector<T>::const_iterator end() const { return items_.end(); }
  void clear() {
    items_.clear();  // keeps the capacity
    head_ = 0;
  }

 private:
  std::vector<T> items_;
  std::size_t head_ = 0;
};

// The application side of one stream: a bounded queue of messages read ahead,
// the final status, and the rule that user code runs on one thread at a time
// for messages, never under a lock, and never after the end or a detach.
//
// Callback mode (`on_message` and `on_done` given): whichever thread calls
// `Drain` and finds nobody delivering becomes the deliverer and hands out
// messages in order, then `on_done` exactly once, last. Reader mode: `Read`
// and `Finish` wait for them.
//
// Observer calls go through `Callout`: they never run after `on_done` began
// (or after `Finish` returned, or after `Detach`), and `on_done` waits for
// none of them: the last callout to leave runs it instead. So nothing ever
// waits for user code except `Detach`, which waits only for user code on
// *other* threads.
//
// Exceptions: one thrown by `on_message` is caught, the message counts as
// delivered, and the owner is told (the stream then ends with INTERNAL
// naming the callback); one thrown by `on_done` or an observer is caught and
// dropped.
//
// Thread safety: all methods may be called from any thread. Producers
// (`Push`, `Close`, `Clear`) may hold their own lock (the stream's): they take
// only this queue's lock and call nothing. Everything else must be called
// with no lock held. The queue calls its owner with no lock.

// What a queue tells the stream that owns it. An interface, not two
// std::function members: 8 bytes per stream instead of 64 (issue 12).
class DeliveryQueueOwner {
 public:
  // The queue was full and has room again: reading may resume.
  virtual void OnQueueSpace() = 0;
  // `on_message` threw (the status names the callback).
  virtual void OnCallbackError(absl::Status status) = 0;

 protected:
  ~DeliveryQueueOwner() = default;
};

template <class T>
class DeliveryQueue {
 public:
  using MessageFn = std::function<void(T&&)>;
  using DoneFn = std::function<void(const absl::Status&)>;

  // `on_message` and `on_done` both set (callback mode) or both empty
  // (reader mode). `owner` must outlive the queue.
  DeliveryQueue(std::size_t capacity, MessageFn on_message, DoneFn on_done,
                DeliveryQueueOwner* owner)
      : capacity_(capacity),
        on_message_(std::move(on_message)),
        on_done_(std::move(on_done)),
        owner_(owner),
        callback_mode_(static_cast<bool>(on_message_)) {}

  // Queues a message. Returns false when the queue is now full: the producer
  // should stop reading until the owner's `OnQueueSpace`.
  bool Push(T message) {
    MutexLock lock(&mu_);
    if (closed_ || detached_) return true;
    items_.push_back(std::move(message));
    cv_.SignalAll();  // a reader may wait
    if (items_.size() >= capacity_) {
      full_ = true;
      return false;
    }
    return true;
  }

  bool HasRoom() {
    MutexLock lock(&mu_);
    return items_.size() < capacity_;
  }

  // Drops what was not delivered yet (the app cancelled).
  void Clear() {
    MutexLock lock(&mu_);
    items_.clear();
  }

  // No more messages: `status` goes to `on_done` (or `Finish`) after the
  // queued ones. Later calls do nothing.
  void Close(absl::Status status) {
    MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    final_ = std::move(status);
    cv_.SignalAll();
  }

  // Callback mode: delivers what is due, unless another thread already is.
  // Call with no lock held, after `Push` or `Close`.
  void Drain() ABSL_LOCKS_EXCLUDED(mu_) {
    if (!callback_mode_) return;
    mu_.Lock();
    if (delivering_) {
      mu_.Unlock();
      return;
    }
    delivering_ = true;
    deliverer_ = std::this_thread::get_id();
    for (;;) {
      if (detached_) break;
      if (!items_.empty()) {
        T message = std::move(items_.front());
        items_.pop_front();
        ++delivered_;
        const bool space = TakeSpaceLocked();
        ++callouts_;
        mu_.Unlock();
        if (space) owner_->OnQueueSpace();
        absl::Status threw;
        {
          CalloutScope scope(this);
          try {
            on_message_(std::move(message));
          } catch (...) {
            threw = CallbackThrew("on_message", std::current_exception());
          }
        }
        if (!threw.ok()) owner_->OnCallbackError(threw);
        mu_.Lock();
        --callouts_;
        cv_.SignalAll();
        continue;
      }
      if (closed_ && !done_started_) {
        // Observer calls still running elsewhere run `on_done` when the
        // last of them leaves (see `Callout`).
        if (callouts_ > CalloutScope::Depth(this)) {
          done_waiting_ = true;
          break;
        }
        RunDoneLocked();
        continue;
      }
      break;
    }
    delivering_ = false;
    deliverer_ = std::thread::id();
    cv_.SignalAll();
    mu_.Unlock();
  }

  // Runs `fn` (an observer call) unless the stream has ended for the app or
  // was detached. Call with no lock held.
  void Callout(const std::function<void()>& fn) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      if (done_started_ || detached_ || finished_) return;
      ++callouts_;
    }
    {
      CalloutScope scope(this);
      try {
        fn();
      } catch (...) {
        // An observer cannot end or break the stream.
      }
    }
    MutexLock lock(&mu_);
    --callouts_;
    cv_.SignalAll();
    // The end was held back for this call: run it now, unless a deliverer
    // is busy (it will).
    if (done_waiting_ && callouts_ == CalloutScope::Depth(this) &&
        !done_started_ && !detached_ && items_.empty() && !delivering_) {
      delivering_ = true;
      deliverer_ = std::this_thread::get_id();
      RunDoneLocked();
      delivering_ = false;
      deliverer_ = std::thread::id();
      cv_.SignalAll();
    }
  }

  // Reader mode: waits for the next message; false once the stream ended.
  bool Read(T* out) ABSL_LOCKS_EXCLUDED(mu_) {
    bool space = false;
    {
      MutexLock lock(&mu_);
      while (items_.empty() && !closed_ && !detached_) cv_.Wait(&mu_);
      if (items_.empty()) return false;
      *out = std::move(items_.front());
      items_.pop_front();
      ++delivered_;
      space = TakeSpaceLocked();
    }
    if (space) owner_->OnQueueSpace();
    return true;
  }

  // Reader mode: waits for the end, and for observer calls running on other
  // threads; no observer call starts after it returns.
  absl::Status Finish() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    const int own = CalloutScope::Depth(this);
    while (!closed_ || callouts_ > own) cv_.Wait(&mu_);
    finished_ = true;
    return final_;
  }

  // No callback starts after this returns, and none is running on another
  // thread. From inside a callout, the calls of this thread are not waited
  // for (they return into the caller's frame).
  void Detach() {
    MutexLock lock(&mu_);
    detached_ = true;
    items_.clear();
    cv_.SignalAll();
    const int own = CalloutScope::Depth(this);
    while (callouts_ > own) cv_.Wait(&mu_);
  }

  // Messages handed to the application so far.
  std::uint64_t delivered() {
    MutexLock lock(&mu_);
    return delivered_;
  }

 private:
  // Whether a full queue just got room (the producer should resume).
  bool TakeSpaceLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!full_ || items_.size() >= capacity_) return false;
    full_ = false;
    return true;
  }

  // Runs `on_done` once; called by the thread that is the deliverer. Drops
  // the lock while the callback runs.
  void RunDoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    done_started_ = true;
    absl::Status status = final_;
    ++callouts_;
    mu_.Unlock();
    {
      CalloutScope scope(this);
      try {
        on_done_(status);
      } catch (...) {
        // Nothing is left to tell.
      }
    }
    mu_.Lock();
    --callouts_;
  }

  const std::size_t capacity_;
  const MessageFn on_message_;
  const DoneFn on_done_;
  DeliveryQueueOwner* const owner_;
  const bool callback_mode_;

  Mutex mu_;
  CondVar cv_;
  CompactFifo<T> items_ ABSL_GUARDED_BY(mu_);
  bool full_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_ ABSL_GUARDED_BY(mu_);
  bool done_started_ ABSL_GUARDED_BY(mu_) = false;
  // A deliverer found the end due but observer calls running: the last of
  // them runs `on_done`.
  bool done_waiting_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool detached_ ABSL_GUARDED_BY(mu_) = false;
  bool delivering_ ABSL_GUARDED_BY(mu_) = false;
  std::thread::id deliverer_ ABSL_GUARDED_BY(mu_);
  // User calls running now (messages, the end, observer calls).
  int callouts_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t delivered_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_DELIVERY_QUEUE_H_
