// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// PositionGate on its own: each verdict from the rules in its header.
#include "tether/internal/position_gate.h"

#include <cstdint>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether {
namespace internal {
namespace {

using ::testing::HasSubstr;
using Verdict = PositionGate::Verdict;

PositionGate Dense(absl::optional<std::uint64_t> initial = absl::nullopt,
                   GapPolicy policy = GapPolicy::kDeliverAndReport) {
  return PositionGate(initial, PositionSpacing::kDense, policy,
                      /*can_trim=*/true);
}

TEST(PositionGateTest, ItemsMoveThePositionAndRepeatsAreDuplicates) {
  PositionGate gate = Dense();
  PositionGate::Cursor c;
  EXPECT_FALSE(gate.has_last());
  EXPECT_EQ(gate.Admit(c, Position::Item(1), {}, 1).verdict, Verdict::kDeliver);
  EXPECT_EQ(gate.Admit(c, Position::Item(2), {}, 1).verdict, Verdict::kDeliver);
  EXPECT_EQ(gate.last(), 2u);
  PositionGate::Cursor next;  // a reopen replays 2
  EXPECT_EQ(gate.Admit(next, Position::Item(2), {}, 2).verdict,
            Verdict::kDuplicate);
  EXPECT_EQ(gate.Admit(next, Position::Item(3), {}, 2).verdict,
            Verdict::kDeliver);
  EXPECT_EQ(gate.last(), 3u);
}

TEST(PositionGateTest, DenseGapsAreReportedOrFatal) {
  PositionGate gate = Dense(5);
  PositionGate::Cursor c;
  PositionGate::Admission a = gate.Admit(c, Position::Item(9), {}, 1);
  EXPECT_EQ(a.verdict, Verdict::kDeliver);
  EXPECT_TRUE(a.gap);
  EXPECT_EQ(a.expected, 6u);
  PositionGate strict = Dense(5, GapPolicy::kFail);
  PositionGate::Cursor d;
  a = strict.Admit(d, Position::Item(9), {}, 1);
  EXPECT_EQ(a.verdict, Verdict::kFail);
  EXPECT_EQ(a.error.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(strict.last(), 5u);  // nothing moved
}

TEST(PositionGateTest, SparsePositionsHaveNoGaps) {
  PositionGate gate(std::uint64_t{5}, PositionSpacing::kSparse,
                    GapPolicy::kFail, false);
  PositionGate::Cursor c;
  PositionGate::Admission a = gate.Admit(c, Position::Item(900), {}, 1);
  EXPECT_EQ(a.verdict, Verdict::kDeliver);
  EXPECT_FALSE(a.gap);
}

TEST(PositionGateTest, AStraddlingBatchIsTrimmedThenDelivered) {
  PositionGate gate = Dense(4);
  PositionGate::Cursor c;
  PositionGate::Admission a = gate.Admit(c, Position::Items(3, 6), {}, 1);
  EXPECT_EQ(a.verdict, Verdict::kTrim);
  EXPECT_EQ(a.trim_at, 4u);
  EXPECT_FALSE(c.has_seq);  // the cursor waits for the trimmed batch
  a = gate.Admit(c, Position::Items(3, 6), std::uint64_t{4}, 1);
  EXPECT_EQ(a.verdict, Verdict::kDeliver);
  EXPECT_EQ(gate.last(), 6u);
  PositionGate no_trim(std::uint64_t{4}, PositionSpacing::kDense,
                       GapPolicy::kDeliverAndReport, /*can_trim=*/false);
  PositionGate::Cursor d;
  a = no_trim.Admit(d, Position::Items(3, 6), {}, 1);
  EXPECT_EQ(a.verdict, Verdict::kFail);
  EXPECT_THAT(std::string(a.error.message()), HasSubstr("trim_delivered"));
}

TEST(PositionGateTest, ProgressMovesOnlyForward) {
  PositionGate gate = Dense(10);
  PositionGate::Cursor c;
  EXPECT_EQ(gate.Admit(c, Position::Progress(8), {}, 1).verdict,
            Verdict::kStale);
  EXPECT_EQ(gate.Admit(c, Position::Progress(20), {}, 1).verdict,
            Verdict::kProgress);
  EXPECT_EQ(gate.last(), 20u);
  EXPECT_EQ(gate.Admit(c, Position::Item(20), {}, 1).verdict,
            Verdict::kDuplicate);
}

TEST(PositionGateTest, NoneIsAlwaysDeliveredAndMovesNothing) {
  PositionGate gate = Dense(10);
  PositionGate::Cursor c;
  EXPECT_EQ(gate.Admit(c, Position::None(), {}, 1).verdict, Verdict::kDeliver);
  EXPECT_EQ(gate.last(), 10u);
  EXPECT_FALSE(c.has_seq);
}

TEST(PositionGateTest, ServerBugsFail) {
  PositionGate gate = Dense();
  PositionGate::Cursor c;
  PositionGate::Admission a = gate.Admit(c, absl::nullopt, {}, 3);
  EXPECT_EQ(a.verdict, Verdict::kFail);
  EXPECT_THAT(std::string(a.error.message()),
              HasSubstr("attempt 3 received a message without a sequence"));
  a = gate.Admit(c, Position::Items(9, 3), {}, 3);
  EXPECT_EQ(a.verdict, Verdict::kFail);
  ASSERT_EQ(gate.Admit(c, Position::Item(7), {}, 3).verdict, Verdict::kDeliver);
  a = gate.Admit(c, Position::Item(5), {}, 3);  // backwards in one attempt
  EXPECT_EQ(a.verdict, Verdict::kFail);
  EXPECT_THAT(std::string(a.error.message()), HasSubstr("went backwards"));
}

TEST(PositionGateTest, ExtremePositions) {
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  PositionGate gate = Dense(max - 1);
  PositionGate::Cursor c;
  EXPECT_EQ(gate.Admit(c, Position::Item(max), {}, 1).verdict,
            Verdict::kDeliver);
  EXPECT_EQ(gate.Admit(c, Position::Item(max), {}, 1).verdict,
            Verdict::kDuplicate);
  PositionGate zero = Dense(0);
  PositionGate::Cursor d;
  PositionGate::Admission a = zero.Admit(d, Position::Item(max), {}, 1);
  EXPECT_TRUE(a.gap);
  EXPECT_EQ(a.expected, 1u);
}

TEST(PositionGateTest, ResetMovesThePositionEitherWay) {
  PositionGate gate = Dense(50);
  gate.Reset(7);
  PositionGate::Cursor c;
  EXPECT_EQ(gate.Admit(c, Position::Item(8), {}, 2).verdict, Verdict::kDeliver);
  gate.Reset(100);
  PositionGate::Cursor d;
  EXPECT_EQ(gate.Admit(d, Position::Item(90), {}, 3).verdict,
            Verdict::kDuplicate);
}

}  // namespace
}  // namespace internal
}  // namespace tether
