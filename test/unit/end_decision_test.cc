// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// DecideEnd and WithPushback on their own: facts in, a decision out.
#include "streams/end_decision.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether {
namespace internal {
namespace {

using ::testing::HasSubstr;
using Action = EndDecision::Action;
using Role = EndFacts::Role;

EndFacts Failed(EndClass cls = EndClass::kTransient) {
  EndFacts f;
  f.status = absl::UnavailableError("down");
  f.cls = cls;
  return f;
}

TEST(DecideEndTest, NothingOnceTheStreamsEndIsDecided) {
  EndFacts f = Failed();
  f.finishing = true;
  f.callback_error = absl::InternalError("threw");
  EXPECT_EQ(DecideEnd(f).action, Action::kNothing);
}

TEST(DecideEndTest, AThrowingCallbackEndsTheStreamUnlessWeCancelled) {
  EndFacts f = Failed();
  f.callback_error = absl::InternalError("classifier threw");
  EndDecision d = DecideEnd(f);
  EXPECT_EQ(d.action, Action::kEnd);
  EXPECT_EQ(d.status.code(), absl::StatusCode::kInternal);
  f.by_client = true;
  EXPECT_EQ(DecideEnd(f).action, Action::kReopen);
}

TEST(DecideEndTest, AResyncEndResyncsFromTheCurrentOrTheFallback) {
  EndFacts f = Failed(EndClass::kResync);
  EXPECT_EQ(DecideEnd(f).action, Action::kResync);
  f.role = Role::kFallback;
  EXPECT_EQ(DecideEnd(f).action, Action::kResync);
  f.role = Role::kRetiring;
  EXPECT_EQ(DecideEnd(f).action, Action::kNothing);
}

TEST(DecideEndTest, TheFallbacksEndLeavesTheReplacementAndMayReport) {
  EndFacts f = Failed(EndClass::kDrain);
  f.role = Role::kFallback;
  EndDecision d = DecideEnd(f);
  EXPECT_EQ(d.action, Action::kDropFallback);
  EXPECT_TRUE(d.report_unannounced);  // a drain nobody announced
  f.announced_drain = true;
  EXPECT_FALSE(DecideEnd(f).report_unannounced);
}

TEST(DecideEndTest, ARetiringAttemptsEndIsNothing) {
  EndFacts f = Failed(EndClass::kDrain);
  f.role = Role::kRetiring;
  EndDecision d = DecideEnd(f);
  EXPECT_EQ(d.action, Action::kNothing);
  EXPECT_FALSE(d.report_unannounced);
}

TEST(DecideEndTest, OurOwnCancelReopensAtOnceWithoutPushback) {
  EndFacts f = Failed(EndClass::kOk);
  f.by_client = true;
  EndDecision d = DecideEnd(f);
  EXPECT_EQ(d.action, Action::kReopen);
  EXPECT_TRUE(d.after_progress);
  EXPECT_FALSE(d.use_pushback);
  EXPECT_FALSE(d.unless_starting);
  EXPECT_FALSE(d.report_unannounced);
}

TEST(DecideEndTest, OkPermanentAndStopEndTheStream) {
  EndFacts ok = Failed(EndClass::kOk);
  ok.status = absl::OkStatus();
  EXPECT_EQ(DecideEnd(ok).action, Action::kEnd);
  EXPECT_TRUE(DecideEnd(ok).status.ok());
  EndFacts permanent = Failed(EndClass::kPermanent);
  permanent.status = absl::NotFoundError("gone");
  EXPECT_EQ(DecideEnd(permanent).status.code(), absl::StatusCode::kNotFound);
  EndFacts stop = Failed(EndClass::kTransient);
  stop.pushback_stop = true;
  EndDecision d = DecideEnd(stop);
  EXPECT_EQ(d.action, Action::kEnd);
  EXPECT_EQ(d.status.code(), absl::StatusCode::kUnavailable);
}

TEST(DecideEndTest, AFailedReplacementFallsBack) {
  EndFacts f = Failed();
  f.has_fallback = true;
  EXPECT_EQ(DecideEnd(f).action, Action::kFallBack);
}

TEST(DecideEndTest, OtherwiseReopenAfterProgressOrAfterAFailure) {
  EndFacts f = Failed(EndClass::kDrain);
  EndDecision d = DecideEnd(f);
  EXPECT_EQ(d.action, Action::kReopen);
  EXPECT_FALSE(d.after_progress);
  EXPECT_TRUE(d.use_pushback);
  EXPECT_TRUE(d.unless_starting);
  EXPECT_TRUE(d.report_unannounced);
  f.progressed = true;
  EXPECT_TRUE(DecideEnd(f).after_progress);
}

TEST(DecideEndTest, OnlyATransientEndWithoutProgressSpendsARetry) {
  EXPECT_TRUE(DecideEnd(Failed(EndClass::kTransient)).spends_retry);
  EndFacts replacement = Failed(EndClass::kTransient);
  replacement.has_fallback = true;
  EXPECT_TRUE(DecideEnd(replacement).spends_retry);
  EXPECT_FALSE(DecideEnd(Failed(EndClass::kDrain)).spends_retry);
  EndFacts progressed = Failed(EndClass::kTransient);
  progressed.progressed = true;
  EXPECT_FALSE(DecideEnd(progressed).spends_retry);
  EndFacts ours = Failed(EndClass::kTransient);
  ours.by_client = true;
  EXPECT_FALSE(DecideEnd(ours).spends_retry);
}

TEST(DecideEndTest, ADrainEndingASpreadWaitReopensAtOnce) {
  EndFacts f = Failed(EndClass::kDrain);
  EXPECT_FALSE(DecideEnd(f).at_once);
  f.spread_wait = true;
  EndDecision d = DecideEnd(f);
  EXPECT_EQ(d.action, Action::kReopen);
  EXPECT_TRUE(d.at_once);
  // A failure in the window is a failure; a permanent end still ends.
  EXPECT_FALSE(DecideEnd(Failed(EndClass::kTransient)).at_once);
  EndFacts transient = Failed(EndClass::kTransient);
  transient.spread_wait = true;
  EXPECT_FALSE(DecideEnd(transient).at_once);
  EndFacts permanent = Failed(EndClass::kPermanent);
  permanent.spread_wait = true;
  EXPECT_EQ(DecideEnd(permanent).action, Action::kEnd);
}

const absl::Time kNow = absl::UnixEpoch() + absl::Hours(1);

TEST(WithPushbackTest, ReplacesTheDelayWithinTheBound) {
  auto d =
      WithPushback(absl::Milliseconds(100), true, absl::Seconds(20), kNow,
                   /*failing=*/false, absl::InfinitePast(), absl::Seconds(30));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, absl::Seconds(20));
  d = WithPushback(absl::Milliseconds(100), false, absl::Seconds(20), kNow,
                   false, absl::InfinitePast(), absl::Seconds(30));
  EXPECT_EQ(*d, absl::Milliseconds(100));
}

TEST(WithPushbackTest, PastTheBoundGivesUpCountingFromNowAfterProgress) {
  auto d =
      WithPushback(absl::ZeroDuration(), true, absl::Hours(1), kNow,
                   /*failing=*/false, absl::InfinitePast(), absl::Seconds(30));
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()),
              HasSubstr("grpc-retry-pushback-ms"));
}

TEST(WithPushbackTest, PastTheBoundGivesUpCountingFromTheFailingStart) {
  // 20 s of the 30 s are spent: a 15 s pushback is too long.
  auto d = WithPushback(absl::ZeroDuration(), true, absl::Seconds(15), kNow,
                        /*failing=*/true, kNow - absl::Seconds(20),
                        absl::Seconds(30));
  EXPECT_FALSE(d.ok());
  d = WithPushback(absl::ZeroDuration(), true, absl::Seconds(10), kNow, true,
                   kNow - absl::Seconds(20), absl::Seconds(30));
  EXPECT_TRUE(d.ok());
}

TEST(WithPushbackTest, NoBoundAndGivingUpStand) {
  auto d = WithPushback(absl::ZeroDuration(), true, absl::Hours(1000), kNow,
                        false, absl::InfinitePast(), absl::InfiniteDuration());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, absl::Hours(1000));
  d = WithPushback(absl::UnavailableError("gave up"), true, absl::Seconds(1),
                   kNow, true, kNow, absl::Seconds(30));
  EXPECT_EQ(d.status().message(), "gave up");
}

}  // namespace
}  // namespace internal
}  // namespace tether
