// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Tests of where the streams leaving one draining connection start their
// moves: `SpreadOrder` (the points, a plain value) and the pool that hands
// them out per connection (`ConnectionSource::SpreadShare`), and where the
// streams a connection lost after they delivered reopen
// (`ConnectionSource::ReopenShare`). Thread-free,
// on the pool core's fake driver and fake clock.
#include "policies/spread_order.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "connections/pool_core.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/pool_core_fixture.h"

namespace tether {
namespace spread_order_test {
namespace {

using internal::LinkState;
using internal::SpreadOrder;
using pool_test::Listener;
using pool_test::PoolCoreTest;

// The most answers that fall into one of `slots` equal parts of [0, 1).
int BusiestSlot(const std::vector<double>& points, int slots) {
  std::vector<int> per(slots, 0);
  for (double p : points) {
    const int slot = std::min(slots - 1, static_cast<int>(p * slots));
    ++per[slot];
  }
  return *std::max_element(per.begin(), per.end());
}

std::vector<double> Take(SpreadOrder& order, int n) {
  std::vector<double> points;
  for (int i = 0; i < n; ++i) points.push_back(order.Next());
  return points;
}

TEST(SpreadOrderTest, HalvesTheGapsInTurnFromTheOffset) {
  SpreadOrder order(0.0);
  EXPECT_THAT(Take(order, 8),
              ::testing::ElementsAre(0.0, 0.5, 0.25, 0.75, 0.125, 0.625,
                                     0.375, 0.875));
  SpreadOrder shifted(0.3);
  const std::vector<double> points = Take(shifted, 3);
  EXPECT_DOUBLE_EQ(points[0], 0.3);
  EXPECT_DOUBLE_EQ(points[1], 0.8);
  EXPECT_DOUBLE_EQ(points[2], 0.55);
}

// However many ask, the answers so far fill the window evenly: n answers
// put at most 7 into any n/5-th of it (5 on average), for every offset
// tried. 10,000 independent draws put 14 or more into the busiest one.
TEST(SpreadOrderTest, EveryPrefixCoversTheWindowEvenly) {
  for (double offset : {0.0, 0.123, 0.5, 0.999}) {
    for (int n : {10, 100, 1000, 4096, 10000, 12345}) {
      SpreadOrder order(offset);
      const std::vector<double> points = Take(order, n);
      for (double p : points) {
        ASSERT_GE(p, 0.0);
        ASSERT_LT(p, 1.0);
      }
      EXPECT_LE(BusiestSlot(points, n / 5), 7)
          << "offset " << offset << ", " << n << " answers";
    }
  }
}

TEST(SpreadOrderTest, AnOffsetOfOneStaysInTheWindow) {
  SpreadOrder order(1.0);  // a uniform draw may round up to 1
  for (double p : Take(order, 64)) {
    EXPECT_GE(p, 0.0);
    EXPECT_LT(p, 1.0);
  }
}

TEST(SpreadOrderTest, PointInTakesTheShareOfTheWindowHeldToItsEnds) {
  const absl::Duration window = absl::Seconds(10);
  EXPECT_EQ(internal::PointIn(window, 0.0), absl::ZeroDuration());
  EXPECT_EQ(internal::PointIn(window, 0.5), absl::Seconds(5));
  EXPECT_EQ(internal::PointIn(window, -0.1), absl::ZeroDuration());
  EXPECT_EQ(internal::PointIn(window, 1.5), window);
}

class PoolSpreadShareTest : public PoolCoreTest {};

// The streams leaving one connection get that connection's even order;
// another connection has an order (and an offset) of its own.
TEST_F(PoolSpreadShareTest, EachDrainingConnectionHandsOutAnEvenSpread) {
  MakeTarget();
  Serve(1);
  std::vector<std::shared_ptr<Listener>> streams;
  for (int i = 0; i < 1000; ++i) {
    streams.push_back(std::make_shared<Listener>());
    ASSERT_EQ(MustPick(streams.back()), 1u);
  }
  core_->OnLinkState(1, LinkState::kIdle);  // GOAWAY: 1 drains
  Serve(2);
  std::vector<double> first;
  for (int i = 0; i < 1000; ++i) {
    const absl::optional<double> share = core_->SpreadShare(1);
    ASSERT_TRUE(share.has_value());
    first.push_back(*share);
  }
  EXPECT_LE(BusiestSlot(first, 200), 7);
  // Consecutive answers are half a window apart, whatever the offset.
  const double gap = first[1] - first[0];
  EXPECT_DOUBLE_EQ(gap < 0 ? gap + 1.0 : gap, 0.5);

  const absl::optional<double> other = core_->SpreadShare(2);
  ASSERT_TRUE(other.has_value());
  EXPECT_NE(*other, first[0]) << "both connections started at one offset";
}

TEST_F(PoolSpreadShareTest, AnIdThatIsNotOpenHasNoAnswer) {
  MakeTarget();
  EXPECT_FALSE(core_->SpreadShare(0).has_value());
  EXPECT_FALSE(core_->SpreadShare(99).has_value());
  EXPECT_FALSE(core_->ReopenShare(0).has_value());
  EXPECT_FALSE(core_->ReopenShare(99).has_value());
}

// Streams that lost a connection together after they delivered (a server
// that cut them) reopen over a part of their window sized to the herd.
class PoolReopenShareTest : public PoolCoreTest {
 protected:
  // Connection 1 carrying `n` streams.
  void Carry(int n) {
    MakeTarget();
    Serve(1);
    for (int i = 0; i < n; ++i) {
      streams_.push_back(std::make_shared<Listener>());
      ASSERT_EQ(MustPick(streams_.back()), 1u);
    }
  }
  std::vector<double> Ask(int n) {
    std::vector<double> shares;
    for (int i = 0; i < n; ++i) {
      const absl::optional<double> share = core_->ReopenShare(1);
      EXPECT_TRUE(share.has_value());
      shares.push_back(share.value_or(-1.0));
    }
    return shares;
  }
  std::vector<std::shared_ptr<Listener>> streams_;
};

TEST_F(PoolReopenShareTest, ALoneStreamReopensAtOnce) {
  Carry(1);
  EXPECT_THAT(Ask(1), ::testing::ElementsAre(0.0));
}

TEST_F(PoolReopenShareTest, AHerdSpreadsOverItsPartOfTheWindow) {
  Carry(64);  // half of the herd that takes the whole window
  const std::vector<double> shares = Ask(64);
  // The first to ask goes mid-way: by then the other ends reached the pool.
  EXPECT_EQ(shares[0], 0.25);
  EXPECT_EQ(shares[1], 0.125);
  EXPECT_GT(*std::min_element(shares.begin(), shares.end()), 0.0);
  EXPECT_LT(*std::max_element(shares.begin(), shares.end()), 0.5);
  std::vector<double> scaled;
  for (double s : shares) scaled.push_back(s * 2);
  EXPECT_EQ(BusiestSlot(scaled, 64), 1) << "not one stream per 64th";
}

TEST_F(PoolReopenShareTest, ABigHerdTakesTheWholeWindowEvenly) {
  Carry(1000);
  // Each stream asks and then releases the connection: the releases of
  // those that asked first do not shrink the herd the later ones share.
  std::vector<double> shares = Ask(1);
  for (int i = 0; i < 500; ++i) core_->Release(1, streams_[i]);
  for (double s : Ask(999)) shares.push_back(s);
  EXPECT_EQ(shares[0], 0.5);
  EXPECT_GE(*std::max_element(shares.begin(), shares.end()), 0.99);
  EXPECT_LE(BusiestSlot(shares, 200), 7);
}

// The herd is what the connection carries when its streams begin to end,
// not the most it ever carried: the one stream left of a hundred reopens
// at once.
TEST_F(PoolReopenShareTest, TheStreamLeftAloneReopensAtOnce) {
  Carry(100);
  for (int i = 1; i < 100; ++i) core_->Release(1, streams_[i]);
  EXPECT_THAT(Ask(1), ::testing::ElementsAre(0.0));
}

// Ends less than `suspect_end_window` apart are one herd and continue its
// order; a later end starts a new herd, sized again.
TEST_F(PoolReopenShareTest, EndsApartByTheWindowAreNewHerds) {
  Carry(64);
  EXPECT_THAT(Ask(2), ::testing::ElementsAre(0.25, 0.125));
  clock()->AdvanceBy(absl::Milliseconds(999));
  EXPECT_THAT(Ask(1), ::testing::ElementsAre(0.375)) << "the same herd";
  clock()->AdvanceBy(absl::Seconds(1));  // the default window
  EXPECT_THAT(Ask(1), ::testing::ElementsAre(0.25)) << "a new herd of 64";
  for (int i = 1; i < 64; ++i) core_->Release(1, streams_[i]);
  clock()->AdvanceBy(absl::Seconds(1));
  EXPECT_THAT(Ask(1), ::testing::ElementsAre(0.0)) << "a herd of one";
}

}  // namespace
}  // namespace spread_order_test
}  // namespace tether
