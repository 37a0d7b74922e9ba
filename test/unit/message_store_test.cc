// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// MessageStore on its own: order across growth and reuse of the consumed
// front, every message destroyed exactly once, room given back when empty,
// and messages larger than its stack slot.
#include "tether/internal/message_store.h"

#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tether/internal/delivery_queue.h"

namespace tether {
namespace internal {
namespace {

// Counts how many are alive, so a leak or a double destroy shows.
struct Tracked {
  static int alive;
  explicit Tracked(int v) : value(v) { ++alive; }
  Tracked(Tracked&& other) noexcept : value(other.value) {
    other.value = -1;
    ++alive;
  }
  Tracked& operator=(Tracked&& other) noexcept {
    value = other.value;
    other.value = -1;
    return *this;
  }
  ~Tracked() { --alive; }
  int value;
};
int Tracked::alive = 0;

class Owner final : public DeliveryQueueOwner {
 public:
  void OnQueueSpace() override {}
  void OnCallbackError(absl::Status status) override {
    errors.push_back(std::move(status));
  }
  std::vector<absl::Status> errors;
};

TEST(MessageStoreTest, KeepsOrderThroughGrowthAndFrontReuse) {
  {
    TypedMessageStore<Tracked> store(nullptr);
    int next_in = 0;
    int next_out = 0;
    // Runs of pushes and pops that make it grow, then reuse its front.
    for (int round = 0; round < 50; ++round) {
      for (int i = 0; i < round % 7 + 1; ++i) {
        Tracked t(next_in++);
        store.Push(&t);
      }
      for (int i = 0; i < round % 5 && !store.empty(); ++i) {
        Tracked out(0);
        store.PopInto(&out);
        EXPECT_EQ(out.value, next_out++);
      }
      EXPECT_EQ(store.size(), static_cast<std::size_t>(next_in - next_out));
    }
    while (!store.empty()) {
      Tracked out(0);
      store.PopInto(&out);
      EXPECT_EQ(out.value, next_out++);
    }
    EXPECT_EQ(next_out, next_in);
    EXPECT_EQ(Tracked::alive, 0);
    Tracked t(7);
    store.Push(&t);
  }
  // The store destroyed what it still held.
  EXPECT_EQ(Tracked::alive, 0);
}

TEST(MessageStoreTest, ClearDestroysEverythingAndStaysUsable) {
  TypedMessageStore<std::string> store(nullptr);
  for (int i = 0; i < 10; ++i) {
    std::string m(100, static_cast<char>('a' + i));  // not a short string
    store.Push(&m);
  }
  store.Clear();
  EXPECT_TRUE(store.empty());
  std::string m = "again";
  store.Push(&m);
  std::string out;
  store.PopInto(&out);
  EXPECT_EQ(out, "again");
}

TEST(MessageStoreTest, DeliversLargeMessagesInOrderAndReportsAThrow) {
  using Big = std::array<int, 200>;  // larger than the store's stack slot
  std::vector<int> seen;
  TypedMessageStore<Big> store([&seen](Big&& b) {
    if (b[199] < 0) throw std::runtime_error("negative");
    seen.push_back(b[199]);
  });
  Owner owner;
  DeliveryQueue queue(16, &store, [](const absl::Status&) {}, &owner);
  for (int v : {1, 2, -3, 4}) {
    Big b{};
    b[199] = v;
    queue.Push(&b);
  }
  queue.Drain();
  // The queue goes on delivering (its owner ends the stream); the throw
  // reaches the owner as INTERNAL naming the callback.
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 4}));
  ASSERT_EQ(owner.errors.size(), 1u);
  EXPECT_EQ(owner.errors[0].code(), absl::StatusCode::kInternal);
  EXPECT_NE(owner.errors[0].message().find("on_message"), std::string::npos);
  EXPECT_EQ(queue.delivered(), 4u);
}

}  // namespace
}  // namespace internal
}  // namespace tether
