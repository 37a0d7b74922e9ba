// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: how a stream hands messages, its end and its events to the app.
#ifndef TETHER_INTERNAL_DELIVERY_QUEUE_H_
#define TETHER_INTERNAL_DELIVERY_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "tether/function.h"
#include "tether/internal/mutex.h"

namespace tether {

class StreamObserver;

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

// What a queue tells the stream that owns it. An interface, not two
// std::function members: 8 bytes per stream instead of 64.
class DeliveryQueueOwner {
 public:
  // The queue was full and has room again: reading may resume.
  virtual void OnQueueSpace() = 0;
  // `on_message` threw (the status names the callback).
  virtual void OnCallbackError(absl::Status status) = 0;

 protected:
  ~DeliveryQueueOwner() = default;
};

class MessageStore;  // message_store.h

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
//
// Not a template: the messages live in a `MessageStore` (message_store.h).
class DeliveryQueue {
 public:
  using DoneFn = Function<void(const absl::Status&)>;

  // `store->has_on_message()` and `on_done` both set (callback mode) or both
  // empty (reader mode). `store`, `owner` and `observer` (null: none; told
  // `OnMessageDelivered` after each message) must outlive the queue.
  DeliveryQueue(std::size_t capacity, MessageStore* store, DoneFn on_done,
                DeliveryQueueOwner* owner, StreamObserver* observer = nullptr);

  // Queues a message (`*message`, a T, is moved from). Returns false when
  // the queue is now full: the producer should stop reading until the
  // owner's `OnQueueSpace`.
  bool Push(void* message);

  bool HasRoom();

  // Drops what was not delivered yet (the app cancelled).
  void Clear();

  // No more messages: `status` goes to `on_done` (or `Finish`) after the
  // queued ones. Later calls do nothing.
  void Close(absl::Status status);

  // Callback mode: delivers what is due, unless another thread already is.
  // Call with no lock held, after `Push` or `Close`.
  void Drain() ABSL_LOCKS_EXCLUDED(mu_);

  // Runs `fn` (an observer call) unless the stream has ended for the app or
  // was detached. Call with no lock held.
  void Callout(const std::function<void()>& fn) ABSL_LOCKS_EXCLUDED(mu_);

  // Reader mode: waits for the next message and moves it into `*out` (a
  // T); false once the stream ended.
  bool Read(void* out) ABSL_LOCKS_EXCLUDED(mu_);

  // Reader mode: waits for the end, and for observer calls running on other
  // threads; no observer call starts after it returns.
  absl::Status Finish() ABSL_LOCKS_EXCLUDED(mu_);

  // No callback starts after this returns, and none is running on another
  // thread. From inside a callout, the calls of this thread are not waited
  // for (they return into the caller's frame).
  void Detach() ABSL_LOCKS_EXCLUDED(mu_);

  // Messages handed to the application so far.
  std::uint64_t delivered() ABSL_LOCKS_EXCLUDED(mu_);

  // For `MessageStore::DeliverFront` only: counts the message taken as
  // delivered and drops the lock (telling the owner when a full queue got
  // room).
  void ReleaseForDelivery() ABSL_UNLOCK_FUNCTION(mu_);

 private:
  // Hands the oldest message to the store's `on_message`; entered with the
  // lock held, returns without it (the store drops it).
  absl::Status DeliverOneLocked()
      ABSL_UNLOCK_FUNCTION(mu_) ABSL_NO_THREAD_SAFETY_ANALYSIS;

  // Tells the observer a message reached the app; call with no lock held.
  void TellDelivered() ABSL_LOCKS_EXCLUDED(mu_);

  // Whether a full queue just got room (the producer should resume).
  bool TakeSpaceLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Runs `on_done` once; called by the thread that is the deliverer. Drops
  // the lock while the callback runs.
  void RunDoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Waits on the queue's condition variable, made by the first thread that
  // waits (a reader, `Finish`, or `Detach` meeting a callout on another
  // thread): a stream in callback mode usually never waits, and does not
  // carry one (bytes per open stream).
  void WaitLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SignalAllLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // In an order that leaves no padding between the flags (bytes per open
  // stream).
  const std::size_t capacity_;
  MessageStore* const store_;  // guarded by mu_ (its contents)
  const DoneFn on_done_;
  DeliveryQueueOwner* const owner_;
  StreamObserver* const observer_;

  Mutex mu_;
  std::unique_ptr<CondVar> cv_ ABSL_GUARDED_BY(mu_);  // see WaitLocked
  absl::Status final_ ABSL_GUARDED_BY(mu_);
  std::thread::id deliverer_ ABSL_GUARDED_BY(mu_);
  std::uint64_t delivered_ ABSL_GUARDED_BY(mu_) = 0;
  // User calls running now (messages, the end, observer calls).
  int callouts_ ABSL_GUARDED_BY(mu_) = 0;
  const bool callback_mode_;
  bool full_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool done_started_ ABSL_GUARDED_BY(mu_) = false;
  // A deliverer found the end due but observer calls running: the last of
  // them runs `on_done`.
  bool done_waiting_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool detached_ ABSL_GUARDED_BY(mu_) = false;
  bool delivering_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_DELIVERY_QUEUE_H_
