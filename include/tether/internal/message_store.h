// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: the messages a stream has read ahead of its app, kept by
// compiled code that never names their type.
#ifndef TETHER_INTERNAL_MESSAGE_STORE_H_
#define TETHER_INTERNAL_MESSAGE_STORE_H_

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "tether/function.h"

namespace tether {
namespace internal {

class DeliveryQueue;

// What `MessageStore` needs to know of the one type it holds: its size and
// four functions. `MessageTypeOf<T>()` writes them; they are all a user
// translation unit compiles for a stream's read-ahead queue.
struct MessageType {
  std::size_t size;  // alignment at most std::max_align_t's (checked)
  // Constructs a message at `to` from `*from`, which is moved from.
  void (*move_construct)(void* to, void* from);
  // Assigns `*from` (moved from) to the message at `to`.
  void (*move_assign)(void* to, void* from);
  void (*destroy)(void* message);
  // Calls `on_message` (a `Function<void(T&&)>`) with `*message`, moved.
  void (*deliver)(const void* on_message, void* message);
};

template <class T>
struct MessageTypeFunctions {
  static void MoveConstruct(void* to, void* from) {
    ::new (to) T(std::move(*static_cast<T*>(from)));
  }
  static void MoveAssign(void* to, void* from) {
    *static_cast<T*>(to) = std::move(*static_cast<T*>(from));
  }
  static void Destroy(void* message) { static_cast<T*>(message)->~T(); }
  static void Deliver(const void* on_message, void* message) {
    (*static_cast<const Function<void(T&&)>*>(on_message))(
        std::move(*static_cast<T*>(message)));
  }
  static constexpr MessageType kType{sizeof(T), &MoveConstruct, &MoveAssign,
                                     &Destroy, &Deliver};
};

template <class T>
const MessageType& MessageTypeOf() {
  static_assert(alignof(T) <= alignof(std::max_align_t),
                "over-aligned message types are not supported");
  return MessageTypeFunctions<T>::kType;
}

// The messages read ahead (of the one type `MessageType` describes, in
// order) and the app's `on_message` (null in reader mode). A FIFO that holds
// no memory while empty: it grows to what a run of messages needs, reuses
// its consumed front while the run lasts, and gives its room back when the
// run ends (most open streams have nothing queued at any time).
//
// Not thread-safe: its queue calls every method with the queue's lock held;
// `DeliverFront` releases it. Messages pass as `void*` pointing at a T.
class MessageStore {
 public:
  // `on_message`, if not null, points at a `Function<void(T&&)>` that
  // outlives the store.
  MessageStore(const MessageType& type, const void* on_message)
      : type_(type), on_message_(on_message) {}
  ~MessageStore();
  MessageStore(const MessageStore&) = delete;
  MessageStore& operator=(const MessageStore&) = delete;

  bool empty() const { return count_ == 0; }
  std::size_t size() const { return count_; }
  // Whether the app gave `on_message` (callback mode).
  bool has_on_message() const { return on_message_ != nullptr; }

  // Moves `*message` (a T) to the back.
  void Push(void* message);
  // Reader mode: moves the oldest message into `*out` (a T).
  void PopInto(void* out);
  void Clear();
  // Callback mode: takes the oldest message, calls
  // `queue.ReleaseForDelivery()` (which drops the queue's lock), then hands
  // the message to `on_message` inside a `CalloutScope` of `queue`. Returns
  // what `on_message` threw, as `CallbackThrew` names it; OK otherwise.
  absl::Status DeliverFront(DeliveryQueue& queue)
      ABSL_NO_THREAD_SAFETY_ANALYSIS;

 private:
  void* At(std::size_t index) const {
    return items_ + index * type_.size;
  }
  void PopFront();
  // Makes room for one more at the back: moves the run to the front when
  // the consumed front is at least half the room, else grows.
  void MakeRoom();

  const MessageType& type_;
  const void* const on_message_;
  unsigned char* items_ = nullptr;  // `capacity_` slots; null while empty
  std::size_t capacity_ = 0;
  std::size_t head_ = 0;   // the oldest message's slot
  std::size_t count_ = 0;  // messages held, from `head_` on
};

// A store of `T`s with its `on_message`.
template <class T>
class TypedMessageStore : public MessageStore {
 public:
  using MessageFn = Function<void(T&&)>;

  explicit TypedMessageStore(MessageFn on_message)
      : MessageStore(MessageTypeOf<T>(), on_message ? &on_message_ : nullptr),
        on_message_(std::move(on_message)) {}

 private:
  const MessageFn on_message_;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_MESSAGE_STORE_H_
