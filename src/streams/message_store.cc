// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/message_store.h"

#include <cstddef>
#include <exception>
#include <new>

#include "tether/internal/delivery_queue.h"

namespace tether {
namespace internal {
namespace {

// Room for one message, on the stack when it fits.
class MessageSlot {
 public:
  explicit MessageSlot(const MessageType& type)
      : type_(type),
        room_(type.size <= sizeof(local_) ? local_
                                          : static_cast<unsigned char*>(
                                                ::operator new(type.size))) {}
  ~MessageSlot() {
    if (full_) type_.destroy(room_);
    if (room_ != local_) ::operator delete(room_);
  }
  MessageSlot(const MessageSlot&) = delete;
  MessageSlot& operator=(const MessageSlot&) = delete;

  // Moves `*message` in.
  void Take(void* message) {
    type_.move_construct(room_, message);
    full_ = true;
  }
  void* get() { return room_; }

 private:
  const MessageType& type_;
  alignas(std::max_align_t) unsigned char local_[256];
  unsigned char* const room_;
  bool full_ = false;
};

}  // namespace

MessageStore::~MessageStore() { Clear(); }

void MessageStore::Push(void* message) {
  if (head_ + count_ == capacity_) MakeRoom();
  type_.move_construct(At(head_ + count_), message);
  ++count_;
}

void MessageStore::PopInto(void* out) {
  type_.move_assign(out, At(head_));
  PopFront();
}

void MessageStore::Clear() {
  for (std::size_t i = 0; i < count_; ++i) type_.destroy(At(head_ + i));
  ::operator delete(items_);
  items_ = nullptr;
  capacity_ = head_ = count_ = 0;
}

absl::Status MessageStore::DeliverFront(DeliveryQueue& queue) {
  MessageSlot message(type_);
  message.Take(At(head_));
  PopFront();
  queue.ReleaseForDelivery();
  CalloutScope scope(&queue);
  try {
    type_.deliver(on_message_, message.get());
  } catch (...) {
    return CallbackThrew("on_message", std::current_exception());
  }
  return absl::OkStatus();
}

void MessageStore::PopFront() {
  type_.destroy(At(head_));
  ++head_;
  if (--count_ == 0) Clear();  // the run ended: give the room back
}

void MessageStore::MakeRoom() {
  if (head_ != 0 && head_ >= count_) {
    // The consumed front is at least half the room: reuse it. The run fits
    // in the front half, so no message is moved onto one not yet moved.
    for (std::size_t i = 0; i < count_; ++i) {
      type_.move_construct(At(i), At(head_ + i));
      type_.destroy(At(head_ + i));
    }
    head_ = 0;
    return;
  }
  const std::size_t capacity = capacity_ == 0 ? 4 : capacity_ * 2;
  if (capacity > static_cast<std::size_t>(-1) / type_.size) {
    throw std::bad_alloc();
  }
  auto* items = static_cast<unsigned char*>(::operator new(capacity * type_.size));
  for (std::size_t i = 0; i < count_; ++i) {
    type_.move_construct(items + i * type_.size, At(head_ + i));
    type_.destroy(At(head_ + i));
  }
  ::operator delete(items_);
  items_ = items;
  capacity_ = capacity;
  head_ = 0;
}

}  // namespace internal
}  // namespace tether
