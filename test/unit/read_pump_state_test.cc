// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// ReadPumpState on its own, on one thread: the verdicts a gRPC reactor acts
// on when its listener pauses, the app resumes, the call is cancelled, reads
// fail, and the call ends.
#include "tether/internal/grpc_read_pump.h"

#include "gtest/gtest.h"

namespace tether {
namespace internal {
namespace {

using AfterPause = ReadPumpState::AfterPause;
using OnCancel = ReadPumpState::OnCancel;

TEST(ReadPumpStateTest, APauseWaitsForResumeWhichReadsOnOnce) {
  ReadPumpState s;
  EXPECT_EQ(s.Paused(), AfterPause::kPaused);
  EXPECT_TRUE(s.Resume());
  EXPECT_FALSE(s.Resume());  // reading already: the next one is a request
  EXPECT_EQ(s.Paused(), AfterPause::kReadNow);
}

TEST(ReadPumpStateTest, AResumeBeforeThePauseIsRecordedReadsOnAtThePause) {
  ReadPumpState s;
  EXPECT_FALSE(s.Resume());
  EXPECT_EQ(s.Paused(), AfterPause::kReadNow);
  EXPECT_EQ(s.Paused(), AfterPause::kPaused);  // the request was used up
}

TEST(ReadPumpStateTest, ACancelWhilePausedReleasesTheHoldOnce) {
  ReadPumpState s;
  EXPECT_EQ(s.Paused(), AfterPause::kPaused);
  EXPECT_EQ(s.Cancel(), OnCancel::kCancelAndRelease);
  EXPECT_EQ(s.Cancel(), OnCancel::kCancel);  // cancels again, holds nothing
  EXPECT_FALSE(s.Resume());                  // no read after the release
  EXPECT_FALSE(s.ReadsOver());
}

TEST(ReadPumpStateTest, ACancelWhileReadingReleasesAtTheNextPause) {
  ReadPumpState s;
  EXPECT_EQ(s.Cancel(), OnCancel::kCancel);
  EXPECT_EQ(s.Paused(), AfterPause::kReleaseHold);
  EXPECT_EQ(s.Paused(), AfterPause::kPaused);  // released already
}

TEST(ReadPumpStateTest, ACancelWhileReadingReleasesWhenTheReadFails) {
  ReadPumpState s;
  EXPECT_EQ(s.Cancel(), OnCancel::kCancel);
  EXPECT_TRUE(s.ReadsOver());
  EXPECT_FALSE(s.ReadsOver());
  EXPECT_EQ(s.Paused(), AfterPause::kPaused);
}

TEST(ReadPumpStateTest, NothingIsCancelledOnceTheEndHasBegun) {
  ReadPumpState s;
  EXPECT_TRUE(s.ReadsOver());
  s.Done();
  EXPECT_EQ(s.Cancel(), OnCancel::kNothing);
  EXPECT_FALSE(s.Resume());
}

}  // namespace
}  // namespace internal
}  // namespace tether
