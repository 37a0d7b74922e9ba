// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// CursorReplay on its own, on one thread: replays found by name while an
// attempt catches up, the end of the catching up, what the log keeps.
#include "streams/cursor_replay.h"

#include <string>

#include "gtest/gtest.h"

namespace tether {
namespace internal {
namespace {

using Catchup = CursorReplay::Catchup;

TEST(CursorReplayTest, TheInitialCursorIsTheFirstResumePoint) {
  EXPECT_FALSE(CursorReplay(absl::nullopt).last().has_value());
  CursorReplay replay(std::string("c0"));
  EXPECT_EQ(replay.last(), "c0");
  replay.Delivered("c1", CursorReplay::kKeepNone, false);
  EXPECT_EQ(replay.last(), "c1");
}

TEST(CursorReplayTest, AnAttemptNotCatchingUpSeesNoReplays) {
  CursorReplay replay(absl::nullopt);
  replay.Delivered("a", CursorReplay::kKeepNone, false);
  Catchup none;
  EXPECT_FALSE(replay.IsReplay(none, "a"));
}

// A migration: the replacement resumes after what was delivered when its
// start began; the old attempt delivers on meanwhile.
TEST(CursorReplayTest, WhatTheOldAttemptDeliveredMeanwhileIsAReplay) {
  CursorReplay replay(absl::nullopt);
  replay.Delivered("a", CursorReplay::kKeepNone, false);
  Catchup fresh = replay.BeginStart();  // resumes after "a"
  replay.Delivered("b", CursorReplay::kKeepNone, /*start_in_flight=*/true);
  replay.Delivered("c", fresh.from, false);  // committed: fresh catches up
  EXPECT_TRUE(replay.IsReplay(fresh, "b"));
  EXPECT_TRUE(replay.IsReplay(fresh, "c"));
  EXPECT_TRUE(fresh.active);
  EXPECT_FALSE(replay.IsReplay(fresh, "d"));  // new: the catching up ends
  EXPECT_FALSE(fresh.active);
  EXPECT_FALSE(replay.IsReplay(fresh, "b"));  // no longer looked up
}

TEST(CursorReplayTest, ReplaysMustComeInOrder) {
  CursorReplay replay(absl::nullopt);
  Catchup fresh = replay.BeginStart();
  replay.Delivered("a", fresh.from, true);
  replay.Delivered("b", fresh.from, true);
  EXPECT_TRUE(replay.IsReplay(fresh, "b"));
  // "a" was delivered before "b": not after the attempt's place any more.
  EXPECT_FALSE(replay.IsReplay(fresh, "a"));
}

TEST(CursorReplayTest, TheLogKeepsOnlyWhatSomeoneMayReplay) {
  CursorReplay replay(absl::nullopt);
  for (int i = 0; i < 100; ++i) {
    replay.Delivered(std::to_string(i), CursorReplay::kKeepNone, false);
  }
  EXPECT_EQ(replay.logged(), 0u);  // nobody catches up: nothing kept
  Catchup fresh = replay.BeginStart();
  replay.Delivered("x", CursorReplay::kKeepNone, /*start_in_flight=*/true);
  replay.Delivered("y", fresh.from, false);
  EXPECT_EQ(replay.logged(), 2u);
  EXPECT_TRUE(replay.IsReplay(fresh, "x"));
  // The attempt moved past "x": the log may drop it.
  replay.Delivered("z", fresh.from, false);
  EXPECT_EQ(replay.logged(), 2u);  // "y", "z"
  fresh.active = false;            // caught up (or ended)
  replay.Delivered("w", CursorReplay::kKeepNone, false);
  EXPECT_EQ(replay.logged(), 0u);
}

TEST(CursorReplayTest, TheLogIsBounded) {
  CursorReplay replay(absl::nullopt);
  Catchup stuck = replay.BeginStart();  // never catches up
  const std::size_t n = CursorReplay::kMaxLog + 10;
  for (std::size_t i = 0; i < n; ++i) {
    replay.Delivered(std::to_string(i), stuck.from, false);
  }
  EXPECT_EQ(replay.logged(), CursorReplay::kMaxLog);
  // The oldest ones are gone: no longer recognised as replays.
  Catchup probe = stuck;
  EXPECT_FALSE(replay.IsReplay(probe, "0"));
  probe = stuck;
  EXPECT_TRUE(replay.IsReplay(probe, std::to_string(n - 1)));
}

}  // namespace
}  // namespace internal
}  // namespace tether
