// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/testing/delivery_checker.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/stream_fixture.h"
#include "tether/testing/fake_clock.h"
#include "tether/testing/fake_transport.h"
#include "tether/testing/matchers.h"

namespace tether {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using fakes::BidiDeliveryChecker;
using fakes::DeliveryChecker;
using fakes::DeliveryRules;
using fakes::StatusIs;
using stream_test::Ack;
using stream_test::BidiReq;
using stream_test::M;
using stream_test::Req;
using stream_test::Resp;
using stream_test::W;

// A response whose position is Items(seq, seq + batch) (batch 0: an item),
// a progress notice, or none.
struct Msg {
  std::uint64_t seq = 0;
  std::uint64_t batch = 0;
  bool progress = false;
  std::string cursor;
};
Msg Item(std::uint64_t s) { return Msg{s, 0, false, ""}; }
Msg Batch(std::uint64_t first, std::uint64_t last) {
  return Msg{first, last - first, false, ""};
}
Msg Progress(std::uint64_t at) { return Msg{at, 0, true, ""}; }

DeliveryRules<Msg> Rules() {
  DeliveryRules<Msg> rules;
  rules.position_of = [](const Msg& m) -> absl::optional<Position> {
    if (m.progress) return Position::Progress(m.seq);
    if (m.seq == 0) return Position::None();
    if (m.batch > 0) return Position::Items(m.seq, m.seq + m.batch);
    return Position::Item(m.seq);
  };
  return rules;
}

// Delivers `msgs` in order through the checker's callbacks.
void Deliver(const DeliveryChecker<Msg>& checker,
             std::initializer_list<Msg> msgs) {
  auto on_message = checker.OnMessage();
  for (Msg m : msgs) on_message(std::move(m));
}

TEST(DeliveryCheckerTest, AnInOrderStreamPasses) {
  DeliveryChecker<Msg> checker(Rules());
  Deliver(checker, {Item(1), Item(2), Msg{}, Batch(3, 5), Item(6)});
  checker.OnDone()(absl::OkStatus());
  EXPECT_TRUE(checker.status().ok()) << checker.status();
  EXPECT_EQ(checker.delivered(), 5u);
  EXPECT_TRUE(checker.done());
}

TEST(DeliveryCheckerTest, ARepeatIsNotUnique) {
  DeliveryChecker<Msg> checker(Rules());
  Deliver(checker, {Item(1), Item(2), Item(3), Item(2), Item(9)});
  EXPECT_THAT(checker.status(),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("unique: item 2 delivered after position 3 "
                                 "(message #4: Position::Item(2))")));
}

TEST(DeliveryCheckerTest, AnOlderItemNeverDeliveredIsOutOfOrder) {
  DeliveryChecker<Msg> checker(Rules());
  Deliver(checker, {Item(5), Item(7), Item(6)});
  // 7 skipped 6 unreported (a gap) and 6 then came late: the first
  // violation is the order; the silent gap comes after it.
  EXPECT_THAT(checker.first_violation(),
              HasSubstr("ordered: item 6 delivered after position 7"));
}

TEST(DeliveryCheckerTest, AnUnreportedSkipIsASilentGap) {
  DeliveryChecker<Msg> checker(Rules());
  Deliver(checker, {Item(1), Item(4)});
  EXPECT_THAT(checker.first_violation(),
              HasSubstr("no silent gap: items 2..3 skipped with no OnGap "
                        "report (message #2"));
}

TEST(DeliveryCheckerTest, AReportedSkipPassesWhicheverComesFirst) {
  DeliveryChecker<Msg> checker(Rules());
  auto observer = checker.Observer();
  Deliver(checker, {Item(1), Item(4)});
  observer->OnGap(2, 4);  // after the message
  observer->OnGap(6, 9);  // before it
  Deliver(checker, {Item(5), Item(9)});
  EXPECT_TRUE(checker.status().ok()) << checker.status();
}

TEST(DeliveryCheckerTest, AReportedSkipFailsWhenThePolicyIsFail) {
  DeliveryRules<Msg> rules = Rules();
  rules.gap_policy = GapPolicy::kFail;
  DeliveryChecker<Msg> checker(std::move(rules));
  checker.Observer()->OnGap(2, 3);
  Deliver(checker, {Item(1), Item(3)});
  EXPECT_THAT(checker.first_violation(),
              HasSubstr("gap: item 2 skipped and the next delivered although "
                        "gap_policy is kFail"));
}

TEST(DeliveryCheckerTest, SparseSpacingHasNoGaps) {
  DeliveryRules<Msg> rules = Rules();
  rules.spacing = PositionSpacing::kSparse;
  DeliveryChecker<Msg> checker(std::move(rules));
  Deliver(checker, {Item(3), Item(40), Item(41), Item(700)});
  EXPECT_TRUE(checker.status().ok()) << checker.status();
}

TEST(DeliveryCheckerTest, ABatchAcrossTheLastPositionIsNotAtomic) {
  DeliveryChecker<Msg> checker(Rules());
  Deliver(checker, {Batch(1, 4), Batch(3, 6)});
  EXPECT_THAT(checker.first_violation(),
              HasSubstr("atomic: batch items 3..6 straddles the last "
                        "delivered position 4"));
}

TEST(DeliveryCheckerTest, ProgressNoticesNeverGoBackAndNeedToBeAskedFor) {
  DeliveryRules<Msg> rules = Rules();
  rules.deliver_progress = true;
  DeliveryChecker<Msg> asked(rules);
  Deliver(asked, {Item(1), Progress(5), Item(6), Progress(9)});
  EXPECT_TRUE(asked.status().ok()) << asked.status();
  Deliver(asked, {Progress(8)});
  EXPECT_THAT(asked.first_violation(),
              HasSubstr("progress: a notice at 8 after position 9"));

  DeliveryChecker<Msg> unasked(Rules());
  Deliver(unasked, {Item(1), Progress(5)});
  EXPECT_THAT(unasked.first_violation(),
              HasSubstr("delivered although deliver_progress is false"));
}

TEST(DeliveryCheckerTest, TheResumePositionNeverMovesBackUnlessResynced) {
  DeliveryChecker<Msg> checker(Rules());
  auto observer = checker.Observer();
  AttemptInfo info;
  info.resumed = true;
  info.attempt = 2;
  info.resume_after_seq = 10;
  observer->OnAttemptStarted(info);
  observer->OnResync(absl::OutOfRangeError("compacted"), 4);
  info.attempt = 3;
  info.resume_after_seq = 4;  // where the resync put it
  observer->OnAttemptStarted(info);
  Deliver(checker, {Item(5)});  // positions start over too
  EXPECT_TRUE(checker.status().ok()) << checker.status();
  info.attempt = 4;
  info.resume_after_seq = 3;
  observer->OnAttemptStarted(info);
  EXPECT_THAT(checker.first_violation(),
              HasSubstr("resumable: attempt 4 resumes after 3, behind an "
                        "earlier attempt's 4"));
}

TEST(DeliveryCheckerTest, NoCallbackAfterOnDoneOrTheDestructor) {
  DeliveryChecker<Msg> after_done(Rules());
  after_done.OnDone()(absl::CancelledError("cancelled"));
  Deliver(after_done, {Item(1)});
  EXPECT_THAT(after_done.first_violation(),
              HasSubstr("no callback after on_done: on_message after "
                        "on_done(CANCELLED: cancelled)"));

  DeliveryChecker<Msg> twice(Rules());
  twice.OnDone()(absl::OkStatus());
  twice.OnDone()(absl::OkStatus());
  EXPECT_THAT(twice.first_violation(), HasSubstr("on_done after on_done"));

  DeliveryChecker<Msg> destroyed(Rules());
  destroyed.StreamDestroyed();
  destroyed.OnCallback("on_writable", nullptr)();
  EXPECT_THAT(destroyed.first_violation(),
              HasSubstr("no callback after the destructor: on_writable"));
}

TEST(DeliveryCheckerTest, CursorsAreDeliveredOnce) {
  DeliveryRules<Msg> rules;
  rules.cursor_of = [](const Msg& m) -> absl::optional<std::string> {
    if (m.cursor.empty()) return absl::nullopt;
    return m.cursor;
  };
  DeliveryChecker<Msg> checker(std::move(rules));
  Deliver(checker, {Msg{0, 0, false, "a"}, Msg{}, Msg{0, 0, false, "b"}});
  EXPECT_TRUE(checker.status().ok()) << checker.status();
  Deliver(checker, {Msg{0, 0, false, "a"}});
  EXPECT_THAT(checker.first_violation(),
              HasSubstr("unique: cursor 'a' delivered again"));
}

TEST(DeliveryCheckerTest, TheFirstViolationIsToldOnceAndTheAppStillRuns) {
  DeliveryChecker<Msg> checker(Rules());
  std::vector<std::string> told;
  checker.SetOnViolation([&](const std::string& v) { told.push_back(v); });
  int app_calls = 0;
  auto on_message = checker.OnMessage([&](Msg&&) { ++app_calls; });
  for (Msg m : {Item(2), Item(2), Item(1)}) on_message(std::move(m));
  ASSERT_EQ(told.size(), 1u);
  EXPECT_THAT(told[0], HasSubstr("unique: item 2"));
  EXPECT_EQ(app_calls, 3);
}

TEST(DeliveryCheckerTest, BidiWritesAreAcknowledgedOnceInOrder) {
  using Checker = BidiDeliveryChecker<BidiReq, Resp>;
  auto acks = [](const BidiReq& w, const Resp& r) { return r.ack == w.id; };
  DeliveryRules<Resp> none;

  Checker good(DeliveryChecker<Resp>(none), acks);
  good.Wrote(W(1));
  good.Wrote(W(2));
  auto on_message = good.OnMessage();
  on_message(Ack(1));
  on_message(M(7));
  EXPECT_EQ(good.unacknowledged(), 1u);
  on_message(Ack(2));
  EXPECT_TRUE(good.status().ok()) << good.status();
  EXPECT_EQ(good.acknowledged(), 2u);
  EXPECT_EQ(good.unacknowledged(), 0u);

  Checker twice(DeliveryChecker<Resp>(none), acks);
  twice.Wrote(W(1));
  twice.OnMessage()(Ack(1));
  twice.OnMessage()(Ack(1));
  EXPECT_THAT(twice.status(),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("acknowledged once: message #2 acknowledges "
                                 "write 1 a second time")));

  Checker skipped(DeliveryChecker<Resp>(none), acks);
  skipped.Wrote(W(1));
  skipped.Wrote(W(2));
  skipped.OnMessage()(Ack(2));
  EXPECT_THAT(skipped.status().message(),
              HasSubstr("acknowledged in order: message #1 acknowledges write "
                        "2 while write 1 waits"));
}

// The checker on a real stream through a rollout: a drain moves the stream
// (make before break), the overlap is dropped as duplicates, a gap is
// reported; nothing is a violation. Then a broken "app" view proves the
// same checker fails on the same stream.
TEST(DeliveryCheckerTest, ARealStreamThroughADrainPasses) {
  auto clock = std::make_shared<fakes::FakeClock>();
  auto source = std::make_shared<fakes::FakeConnectionSource>();
  auto transport =
      std::make_shared<fakes::FakeTransport<Req, Resp>>(source, clock);
  ReconnectingStream<Req, Resp>::Spec spec;
  spec.attempt_factory = transport;
  spec.sequence_of = [](const Resp& r) { return r.seq; };
  spec.resume_after = [](Req& q, std::uint64_t s) { q.after = s; };
  ReconnectingStreamOptions options;
  options.clock = clock;
  options.random_seed = 7;
  auto checker = DeliveryChecker<Resp>::For(spec, options);
  options.observer = checker.Observer();
  std::vector<std::uint64_t> got;
  auto stream = ReconnectingStream<Req, Resp>::Start(
      source, spec, options,
      checker.OnMessage([&](Resp&& r) { got.push_back(r.seq); }),
      checker.OnDone());
  ASSERT_TRUE(stream.ok()) << stream.status();
  auto first = transport->attempt(0);
  ASSERT_NE(first, nullptr);
  first->Send(M(1));
  first->Send(M(2));
  source->Drain(first->connection_id());
  clock->RunDue();
  auto second = transport->last_attempt();
  ASSERT_NE(second, first);
  first->Send(M(3));
  second->Send(M(3));
  second->Send(M(4));
  second->Send(M(7));  // a gap: the stream reports it
  clock->AdvanceBy(absl::Seconds(5));
  (*stream)->Cancel();
  clock->AdvanceBy(absl::Seconds(1));
  stream->reset();
  checker.StreamDestroyed();
  EXPECT_TRUE(checker.status().ok()) << checker.status();
  EXPECT_THAT(got, ::testing::ElementsAre(1, 2, 3, 4, 7));
  EXPECT_TRUE(checker.done());
  EXPECT_THAT(checker.done_status(), StatusIs(absl::StatusCode::kCancelled));

  // The same deliveries seen by a checker that was not told of the gap.
  DeliveryChecker<Resp> blind = DeliveryChecker<Resp>::For(spec, options);
  auto on_message = blind.OnMessage();
  for (std::uint64_t s : got) on_message(M(s));
  EXPECT_THAT(blind.first_violation(), HasSubstr("items 5..6 skipped"));
}

TEST(DeliveryCheckerTest, ForReadsTheSpecsRules) {
  ReconnectingStream<Req, Resp>::Spec spec;
  spec.position_of = [](const Resp& r) { return Position::Item(r.seq); };
  spec.spacing = PositionSpacing::kSparse;
  spec.initial_last_seq = 10;
  ReconnectingStreamOptions options;
  auto checker = DeliveryChecker<Resp>::For(spec, options);
  auto on_message = checker.OnMessage();
  on_message(M(20));
  EXPECT_TRUE(checker.status().ok()) << checker.status();
  on_message(M(10));
  EXPECT_THAT(checker.first_violation(), HasSubstr("ordered: item 10"));

  ReconnectingBidiStream<BidiReq, Resp>::Spec bidi;
  bidi.sequence_of = [](const Resp& r) { return r.seq; };
  bidi.initial_position = 3;
  bidi.acknowledges = [](const BidiReq& w, const Resp& r) {
    return r.ack == w.id;
  };
  auto bidi_checker =
      BidiDeliveryChecker<BidiReq, Resp>::For(bidi, options);
  bidi_checker.Wrote(W(1));
  bidi_checker.OnMessage()(M(5));  // dense: 4 skipped, unreported
  EXPECT_THAT(bidi_checker.status().message(), HasSubstr("item 4 skipped"));
  EXPECT_EQ(bidi_checker.unacknowledged(), 1u);
  EXPECT_THAT(std::string(bidi_checker.status().message()),
              ::testing::Not(IsEmpty()));
}

}  // namespace
}  // namespace tether
