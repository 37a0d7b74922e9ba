// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// CompactFifo on its own: order, and reuse of its consumed front.
#include "tether/internal/compact_fifo.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether {
namespace internal {
namespace {

using ::testing::ElementsAre;

TEST(CompactFifoTest, KeepsOrderAndReusesItsFront) {
  CompactFifo<int> q;
  EXPECT_TRUE(q.empty());
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 10; ++i) q.push_back(i);
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(q.front(), i);
      q.pop_front();
    }
    for (int i = 10; i < 15; ++i) q.push_back(i);
    std::vector<int> rest(q.begin(), q.end());
    EXPECT_THAT(rest, ElementsAre(5, 6, 7, 8, 9, 10, 11, 12, 13, 14));
    while (!q.empty()) q.pop_front();
    EXPECT_EQ(q.size(), 0u);
    EXPECT_EQ(q.capacity(), 0u);  // an empty queue holds nothing
  }
}

TEST(CompactFifoTest, ClearKeepsItUsable) {
  CompactFifo<int> q;
  q.emplace_back(1);
  q.emplace_back(2);
  q.clear();
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.capacity(), 0u);
  q.push_back(3);
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.front(), 3);
}

}  // namespace
}  // namespace internal
}  // namespace tether
