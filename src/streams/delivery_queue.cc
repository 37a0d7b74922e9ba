// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/delivery_queue.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tether/internal/message_store.h"
#include "tether/observer.h"

namespace tether {
namespace internal {
namespace {

// The owners whose callouts the current thread is inside, innermost last.
std::vector<const void*>& ThreadCallouts() {
  thread_local std::vector<const void*> owners;
  return owners;
}

}  // namespace

CalloutScope::CalloutScope(const void* owner) : owner_(owner) {
  ThreadCallouts().push_back(owner);
}

CalloutScope::~CalloutScope() {
  std::vector<const void*>& owners = ThreadCallouts();
  // Innermost first: scopes nest.
  auto it = std::find(owners.rbegin(), owners.rend(), owner_);
  if (it != owners.rend()) owners.erase(std::next(it).base());
}

int CalloutScope::Depth(const void* owner) {
  const std::vector<const void*>& owners = ThreadCallouts();
  return static_cast<int>(std::count(owners.begin(), owners.end(), owner));
}

absl::Status CallbackThrew(const char* callback, std::exception_ptr error) {
  std::string what = "an exception that is not a std::exception";
  try {
    if (error) std::rethrow_exception(error);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  return absl::InternalError(
      absl::StrCat("tether: the application's ", callback, " threw: ", what));
}

DeliveryQueue::DeliveryQueue(std::size_t capacity, MessageStore* store,
                             DoneFn on_done, DeliveryQueueOwner* owner,
                             StreamObserver* observer)
    : capacity_(capacity),
      store_(store),
      on_done_(std::move(on_done)),
      owner_(owner),
      observer_(observer),
      callback_mode_(store->has_on_message()) {}

void DeliveryQueue::TellDelivered() {
  if (observer_ == nullptr) return;
  try {
    observer_->OnMessageDelivered();
  } catch (...) {
    // An observer cannot end or break the stream.
  }
}

bool DeliveryQueue::Push(void* message) {
  MutexLock lock(&mu_);
  if (closed_ || detached_) return true;
  store_->Push(message);
  SignalAllLocked();  // a reader may wait
  if (store_->size() >= capacity_) {
    full_ = true;
    return false;
  }
  return true;
}

bool DeliveryQueue::HasRoom() {
  MutexLock lock(&mu_);
  return store_->size() < capacity_;
}

void DeliveryQueue::Clear() {
  MutexLock lock(&mu_);
  store_->Clear();
}

void DeliveryQueue::Close(absl::Status status) {
  MutexLock lock(&mu_);
  if (closed_) return;
  closed_ = true;
  final_ = std::move(status);
  SignalAllLocked();
}

void DeliveryQueue::ReleaseForDelivery() {
  ++delivered_;
  const bool space = TakeSpaceLocked();
  ++callouts_;
  mu_.Unlock();
  if (space) owner_->OnQueueSpace();
}

absl::Status DeliveryQueue::DeliverOneLocked() {
  return store_->DeliverFront(*this);
}

void DeliveryQueue::Drain() {
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
    if (!store_->empty()) {
      const absl::Status threw = DeliverOneLocked();  // drops the lock
      // Still a callout (counted until the lock is taken again): the end
      // cannot reach the app before this.
      TellDelivered();
      if (!threw.ok()) owner_->OnCallbackError(threw);
      mu_.Lock();
      --callouts_;
      SignalAllLocked();
      continue;
    }
    if (closed_ && !done_started_) {
      // Observer calls still running elsewhere run `on_done` when the last
      // of them leaves (see `Callout`).
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
  SignalAllLocked();
  mu_.Unlock();
}

void DeliveryQueue::Callout(const std::function<void()>& fn) {
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
  SignalAllLocked();
  // The end was held back for this call: run it now, unless a deliverer is
  // busy (it will).
  if (done_waiting_ && callouts_ == CalloutScope::Depth(this) &&
      !done_started_ && !detached_ && store_->empty() && !delivering_) {
    delivering_ = true;
    deliverer_ = std::this_thread::get_id();
    RunDoneLocked();
    delivering_ = false;
    deliverer_ = std::thread::id();
    SignalAllLocked();
  }
}

bool DeliveryQueue::Read(void* out) {
  bool space = false;
  {
    MutexLock lock(&mu_);
    while (store_->empty() && !closed_ && !detached_) WaitLocked();
    if (store_->empty()) return false;
    store_->PopInto(out);
    ++delivered_;
    space = TakeSpaceLocked();
  }
  TellDelivered();
  if (space) owner_->OnQueueSpace();
  return true;
}

absl::Status DeliveryQueue::Finish() {
  MutexLock lock(&mu_);
  const int own = CalloutScope::Depth(this);
  while (!closed_ || callouts_ > own) WaitLocked();
  finished_ = true;
  return final_;
}

void DeliveryQueue::Detach() {
  MutexLock lock(&mu_);
  detached_ = true;
  store_->Clear();
  SignalAllLocked();
  const int own = CalloutScope::Depth(this);
  while (callouts_ > own) WaitLocked();
}

std::uint64_t DeliveryQueue::delivered() {
  MutexLock lock(&mu_);
  return delivered_;
}

void DeliveryQueue::WaitLocked() {
  if (!cv_) cv_ = std::make_unique<CondVar>();
  cv_->Wait(&mu_);
}

void DeliveryQueue::SignalAllLocked() {
  if (cv_) cv_->SignalAll();
}

bool DeliveryQueue::TakeSpaceLocked() {
  if (!full_ || store_->size() >= capacity_) return false;
  full_ = false;
  return true;
}

void DeliveryQueue::RunDoneLocked() {
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

}  // namespace internal
}  // namespace tether
