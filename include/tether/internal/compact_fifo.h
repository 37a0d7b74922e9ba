// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: a small first-in first-out container for per-stream and
// per-connection queues that are usually empty.
#ifndef TETHER_INTERNAL_COMPACT_FIFO_H_
#define TETHER_INTERNAL_COMPACT_FIFO_H_

#include <cstddef>
#include <utility>
#include <vector>

namespace tether {
namespace internal {

// A FIFO that holds no memory while empty (a vector plus a read index): it
// grows to what a run of items needs, reuses its consumed front while the
// run lasts, and gives its room back when the run ends. A `std::deque`
// allocates a 512-byte block and its map up front, per stream, whether or
// not anything is ever queued; and a queue that kept its room would hold a
// message's worth for every open stream (most are empty at any time).
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
  // Items it has room for without allocating.
  std::size_t capacity() const { return items_.capacity(); }
  // Oldest first.
  typename std::vector<T>::const_iterator begin() const {
    return items_.begin() + static_cast<std::ptrdiff_t>(head_);
  }
  typename std::vector<T>::const_iterator end() const { return items_.end(); }
  void clear() {
    std::vector<T>().swap(items_);  // gives the room back
    head_ = 0;
  }

 private:
  std::vector<T> items_;
  std::size_t head_ = 0;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_COMPACT_FIFO_H_
