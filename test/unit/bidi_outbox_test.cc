// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// BidiOutbox on its own: which attempt writes, what it writes, when writes
// are done, which responses acknowledge, and the wake-ups. No stream, no
// thread.
#include "tether/internal/bidi_outbox.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/stream_fixture.h"
#include "tether/internal/bidi_parts.h"

namespace tether {
namespace stream_test {
namespace {

using ::testing::ElementsAre;
using Box = internal::BidiOutbox;
using Writes = Box::Writes;
using Next = BidiWrites<BidiReq>::Next;
using Kind = internal::AckMatch::Kind;

bool ById(const BidiReq& w, const Resp& r) { return r.ack == w.id; }

// The outbox holds opaque messages; the typed side (bidi_parts.h) casts.
std::shared_ptr<Box> MakeBox(
    std::size_t max, Function<bool(const BidiReq&, const Resp&)> ack) {
  return std::make_shared<Box>(max,
                               internal::OpaqueAcknowledges(std::move(ack)));
}
Box::Message Msg(const BidiReq& r) {
  return std::make_shared<const BidiReq>(r);
}
std::shared_ptr<Writes> Attach(const std::shared_ptr<Box>& box,
                               std::uint64_t order,
                               const std::vector<BidiReq>& opens) {
  std::vector<Box::Message> messages;
  for (const BidiReq& r : opens) messages.push_back(Msg(r));
  return Box::Attach(box, order, std::move(messages));
}
Next Take(Writes& w, std::shared_ptr<const BidiReq>* out) {
  Box::Message m;
  const Next next = w.Take(&m);
  if (next == Next::kWrite) *out = std::static_pointer_cast<const BidiReq>(m);
  return next;
}

// Takes and completes every write `w` offers now; returns them in order.
std::vector<BidiReq> Drain(Writes& w) {
  std::vector<BidiReq> out;
  std::shared_ptr<const BidiReq> req;
  while (Take(w, &req) == Next::kWrite) {
    out.push_back(*req);
    w.Written(true);
  }
  return out;
}

// What the stream core does with a response that arrives and passes every
// other rule: match it, then admit it. Returns whether the app gets it.
bool Deliver(Box& box, const Resp& r) {
  internal::Deferred later;
  return box.Admit(box.Match(&r), later);
}

// Counts the wake-ups of one attempt.
struct Wakes {
  int count = 0;
  std::function<void()> Fn() {
    return [this] { ++count; };
  }
};

TEST(BidiOutboxTest, TheLastStartedAttemptWritesWhateverOrderTheyAttachIn) {
  auto box = MakeBox(8, ById);
  auto first = Attach(box, 1, {Open(0)});
  auto third = Attach(box, 3, {Open(5)});
  auto second = Attach(box, 2, {Open(4)});  // cancelled, attached late
  ASSERT_TRUE(box->Write(Msg(W(1))).ok());
  EXPECT_THAT(Drain(*second), ElementsAre(Open(4)));  // its opens only
  EXPECT_THAT(Drain(*first), ElementsAre(Open(0)));
  EXPECT_THAT(Drain(*third), ElementsAre(Open(5), W(1)));
  second->Close();  // the late one ends: the writer stays
  ASSERT_TRUE(box->Write(Msg(W(2))).ok());
  EXPECT_THAT(Drain(*third), ElementsAre(W(2)));
}

// A write is done when its acknowledgement is admitted for the app,
// whichever attempt it arrived on; an acknowledgement that arrives and is
// dropped before that (a move's held message) leaves the write waiting, and
// the next writer replays it.
TEST(BidiOutboxTest, AWriteIsDoneWhenItsAcknowledgementIsAdmitted) {
  auto box = MakeBox(8, ById);
  auto old_one = Attach(box, 1, {});
  ASSERT_TRUE(box->Write(Msg(W(1))).ok());
  ASSERT_TRUE(box->Write(Msg(W(2))).ok());
  EXPECT_THAT(Drain(*old_one), ElementsAre(W(1), W(2)));
  const Resp ack1 = Ack(1);
  const internal::AckMatch held = box->Match(&ack1);  // then dropped
  EXPECT_EQ(held.kind, Kind::kWrite);
  EXPECT_EQ(box->size(), 2u);
  auto fresh = Attach(box, 2, {});
  EXPECT_THAT(Drain(*fresh), ElementsAre(W(1), W(2)));  // replayed
  EXPECT_TRUE(Deliver(*box, M(5)));                     // acknowledges nothing
  EXPECT_EQ(box->size(), 2u);
  EXPECT_TRUE(Deliver(*box, Ack(1)));  // on the old attempt: counts
  EXPECT_EQ(box->size(), 1u);
  auto third = Attach(box, 3, {});
  EXPECT_THAT(Drain(*third), ElementsAre(W(2)));
}

// The old attempt and the replay both acknowledge a write: both match it as
// they arrive, the first admitted takes it, the other is dropped; a later
// copy matches as a repeat.
TEST(BidiOutboxTest, AnAcknowledgementReachesTheAppOnce) {
  auto box = MakeBox(8, ById);
  auto old_one = Attach(box, 1, {});
  ASSERT_TRUE(box->Write(Msg(W(7))).ok());
  EXPECT_THAT(Drain(*old_one), ElementsAre(W(7)));
  auto fresh = Attach(box, 2, {});
  EXPECT_THAT(Drain(*fresh), ElementsAre(W(7)));
  const Resp ack = Ack(7);
  const internal::AckMatch on_old = box->Match(&ack);
  const internal::AckMatch on_fresh = box->Match(&ack);
  internal::Deferred later;
  EXPECT_TRUE(box->Admit(on_fresh, later));
  EXPECT_FALSE(box->Admit(on_old, later));
  EXPECT_EQ(box->Match(&ack).kind, Kind::kRepeat);
  EXPECT_FALSE(Deliver(*box, ack));
  EXPECT_EQ(box->size(), 0u);
}

// Keys that are not dense, acknowledged in any order: each response
// acknowledges the first waiting write it names.
TEST(BidiOutboxTest, AcknowledgementsInAnyOrder) {
  auto box = MakeBox(8, ById);
  auto a = Attach(box, 1, {});
  for (std::uint64_t id : {917u, 23u, 4051u}) {
    ASSERT_TRUE(box->Write(Msg(W(id))).ok());
  }
  EXPECT_THAT(Drain(*a), ElementsAre(W(917), W(23), W(4051)));
  EXPECT_TRUE(Deliver(*box, Ack(4051)));
  EXPECT_TRUE(Deliver(*box, Ack(23)));
  EXPECT_EQ(box->size(), 1u);
  auto b = Attach(box, 2, {});
  EXPECT_THAT(Drain(*b), ElementsAre(W(917)));
  EXPECT_TRUE(Deliver(*box, Ack(917)));
  EXPECT_EQ(box->size(), 0u);
}

// Only a write taken by more than one attempt can be acknowledged twice: it
// is remembered once done, while an attempt that took it runs, and at most
// `max` of them. Anything else that matches nothing is an ordinary response.
TEST(BidiOutboxTest, DoneWritesAreRememberedWhileAnAttemptThatTookThemRuns) {
  auto box = MakeBox(2, ById);
  auto a = Attach(box, 1, {});
  ASSERT_TRUE(box->Write(Msg(W(1))).ok());
  EXPECT_THAT(Drain(*a), ElementsAre(W(1)));
  EXPECT_TRUE(Deliver(*box, Ack(1)));
  const Resp again = Ack(1);
  EXPECT_EQ(box->Match(&again).kind, Kind::kNone);  // taken once: forgotten
  ASSERT_TRUE(box->Write(Msg(W(2))).ok());
  ASSERT_TRUE(box->Write(Msg(W(3))).ok());
  EXPECT_THAT(Drain(*a), ElementsAre(W(2), W(3)));
  auto b = Attach(box, 2, {});
  EXPECT_THAT(Drain(*b), ElementsAre(W(2), W(3)));
  auto c = Attach(box, 3, {});  // a later attempt, which took nothing
  EXPECT_TRUE(Deliver(*box, Ack(2)));
  EXPECT_TRUE(Deliver(*box, Ack(3)));
  const Resp two = Ack(2), three = Ack(3);
  EXPECT_EQ(box->Match(&two).kind, Kind::kRepeat);
  a->Close();
  EXPECT_EQ(box->Match(&two).kind, Kind::kRepeat);  // b took it and runs
  b->Close();
  EXPECT_EQ(box->Match(&two).kind, Kind::kNone);
  EXPECT_EQ(box->Match(&three).kind, Kind::kNone);
  // At most `max` (2): the oldest is forgotten first.
  for (std::uint64_t id : {4u, 5u}) ASSERT_TRUE(box->Write(Msg(W(id))).ok());
  EXPECT_THAT(Drain(*c), ElementsAre(W(4), W(5)));
  auto d = Attach(box, 4, {});
  EXPECT_THAT(Drain(*d), ElementsAre(W(4), W(5)));
  EXPECT_TRUE(Deliver(*box, Ack(4)));
  ASSERT_TRUE(box->Write(Msg(W(6))).ok());
  EXPECT_THAT(Drain(*d), ElementsAre(W(6)));
  auto e = Attach(box, 5, {});
  EXPECT_THAT(Drain(*e), ElementsAre(W(5), W(6)));
  EXPECT_TRUE(Deliver(*box, Ack(5)));
  EXPECT_TRUE(Deliver(*box, Ack(6)));
  const Resp four = Ack(4), five = Ack(5), six = Ack(6);
  EXPECT_EQ(box->Match(&four).kind, Kind::kNone);
  EXPECT_EQ(box->Match(&five).kind, Kind::kRepeat);
  EXPECT_EQ(box->Match(&six).kind, Kind::kRepeat);
}

// An attempt dropped without an end (its start never ran) no longer keeps
// done writes remembered.
TEST(BidiOutboxTest, AnAttemptDroppedWithoutAnEndIsClosed) {
  auto box = MakeBox(8, ById);
  auto a = Attach(box, 1, {});
  auto b = Attach(box, 2, {});
  ASSERT_TRUE(box->Write(Msg(W(1))).ok());
  EXPECT_THAT(Drain(*b), ElementsAre(W(1)));
  auto c = Attach(box, 3, {});
  EXPECT_THAT(Drain(*c), ElementsAre(W(1)));
  EXPECT_TRUE(Deliver(*box, Ack(1)));
  const Resp ack = Ack(1);
  EXPECT_EQ(box->Match(&ack).kind, Kind::kRepeat);
  b->Close();
  c.reset();
  EXPECT_EQ(box->Match(&ack).kind, Kind::kRepeat);  // `a` may have had it
  a.reset();
  EXPECT_EQ(box->Match(&ack).kind, Kind::kNone);
}

TEST(BidiOutboxTest, WhatAcknowledgesThrowsReachesTheCaller) {
  auto box = MakeBox(8, [](const BidiReq&, const Resp& r) {
    if (r.ack == 666) throw std::runtime_error("bad ack");
    return false;
  });
  ASSERT_TRUE(box->Write(Msg(W(1))).ok());
  const Resp bad = Ack(666);
  EXPECT_THROW(box->Match(&bad), std::runtime_error);
  EXPECT_EQ(box->size(), 1u);
}

TEST(BidiOutboxTest, WithAcknowledgementsTheWriterReplaysAWriteInFlight) {
  auto box = MakeBox(8, ById);
  auto old_one = Attach(box, 1, {});
  ASSERT_TRUE(box->Write(Msg(W(1))).ok());
  std::shared_ptr<const BidiReq> req;
  ASSERT_EQ(Take(*old_one, &req), Next::kWrite);  // in flight
  auto fresh = Attach(box, 2, {});
  EXPECT_THAT(Drain(*fresh), ElementsAre(W(1)));
}

TEST(BidiOutboxTest, WithoutAcknowledgementsAWriteInFlightGoesOutOnce) {
  auto box = MakeBox(8, nullptr);
  auto old_one = Attach(box, 1, {});
  ASSERT_TRUE(box->Write(Msg(W(1))).ok());
  std::shared_ptr<const BidiReq> req;
  ASSERT_EQ(Take(*old_one, &req), Next::kWrite);
  auto fresh = Attach(box, 2, {Open(0)});
  Wakes wakes;
  fresh->SetWakeup(wakes.Fn());
  EXPECT_THAT(Drain(*fresh), ElementsAre(Open(0)));  // then it waits
  old_one->Written(true);
  EXPECT_EQ(wakes.count, 1);
  EXPECT_EQ(box->size(), 0u);
  EXPECT_THAT(Drain(*fresh), ElementsAre());  // W(1) is done
  ASSERT_TRUE(box->Write(Msg(W(2))).ok());
  EXPECT_THAT(Drain(*fresh), ElementsAre(W(2)));
}

TEST(BidiOutboxTest, WithoutAcknowledgementsAFailedWriteGoesToTheWriter) {
  auto box = MakeBox(8, nullptr);
  auto old_one = Attach(box, 1, {});
  ASSERT_TRUE(box->Write(Msg(W(1))).ok());
  ASSERT_TRUE(box->Write(Msg(W(2))).ok());
  std::shared_ptr<const BidiReq> req;
  ASSERT_EQ(Take(*old_one, &req), Next::kWrite);
  auto fresh = Attach(box, 2, {});
  Wakes wakes;
  fresh->SetWakeup(wakes.Fn());
  EXPECT_THAT(Drain(*fresh), ElementsAre());
  old_one->Written(false);  // never written: the writer writes it, in order
  EXPECT_EQ(wakes.count, 1);
  EXPECT_THAT(Drain(*fresh), ElementsAre(W(1), W(2)));
}

TEST(BidiOutboxTest, AnAttemptThatEndsWithAWriteInFlightReleasesTheWriter) {
  auto box = MakeBox(8, nullptr);
  auto old_one = Attach(box, 1, {});
  ASSERT_TRUE(box->Write(Msg(W(1))).ok());
  std::shared_ptr<const BidiReq> req;
  ASSERT_EQ(Take(*old_one, &req), Next::kWrite);
  auto fresh = Attach(box, 2, {});
  Wakes wakes;
  fresh->SetWakeup(wakes.Fn());
  old_one->Close();
  EXPECT_EQ(wakes.count, 1);
  old_one->Written(false);  // after its end: nothing more
  EXPECT_THAT(Drain(*fresh), ElementsAre(W(1)));
}

TEST(BidiOutboxTest, WritesDoneHalfClosesAfterEverything) {
  auto box = MakeBox(8, ById);
  auto a = Attach(box, 1, {Open(0)});
  ASSERT_TRUE(box->Write(Msg(W(1))).ok());
  box->WritesDone();
  EXPECT_EQ(box->Write(Msg(W(2))).code(),
            absl::StatusCode::kFailedPrecondition);
  std::shared_ptr<const BidiReq> req;
  for (const BidiReq& want : {Open(0), W(1)}) {
    ASSERT_EQ(Take(*a, &req), Next::kWrite);
    EXPECT_EQ(*req, want);
    a->Written(true);
  }
  EXPECT_EQ(Take(*a, &req), Next::kWritesDone);
  EXPECT_EQ(Take(*a, &req), Next::kNothing);  // once
}

TEST(BidiOutboxTest, FullOutboxRefusesAndOnWritableRunsOnceWhenRoomComes) {
  auto box = MakeBox(1, ById);
  auto a = Attach(box, 1, {});
  int writable = 0;
  box->SetOnWritable([&writable] { ++writable; });
  EXPECT_EQ(writable, 0);  // nothing was refused
  ASSERT_TRUE(box->Write(Msg(W(1))).ok());
  EXPECT_EQ(box->Write(Msg(W(2))).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Drain(*a), ElementsAre(W(1)));
  EXPECT_TRUE(Deliver(*box, Ack(1)));
  EXPECT_EQ(writable, 1);
  ASSERT_TRUE(box->Write(Msg(W(2))).ok());
  EXPECT_TRUE(Deliver(*box, Ack(2)));
  EXPECT_EQ(writable, 1);  // once per refusal
}

TEST(BidiOutboxTest, OnWritableSetAfterTheRoomCameBackRunsAtOnce) {
  auto box = MakeBox(1, ById);
  auto a = Attach(box, 1, {});
  ASSERT_TRUE(box->Write(Msg(W(1))).ok());
  EXPECT_EQ(box->Write(Msg(W(2))).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Drain(*a), ElementsAre(W(1)));
  EXPECT_TRUE(Deliver(*box, Ack(1)));  // room, nobody to tell yet
  int writable = 0;
  box->SetOnWritable([&writable] { ++writable; });
  EXPECT_EQ(writable, 1);
}

TEST(BidiOutboxTest, TheEndRefusesWritesAndWakesNobody) {
  auto box = MakeBox(1, ById);
  auto a = Attach(box, 1, {});
  ASSERT_TRUE(box->Write(Msg(W(1))).ok());
  EXPECT_EQ(box->Write(Msg(W(2))).code(), absl::StatusCode::kResourceExhausted);
  int writable = 0;
  box->SetOnWritable([&writable] { ++writable; });
  box->End();
  EXPECT_THAT(Drain(*a), ElementsAre(W(1)));
  EXPECT_TRUE(Deliver(*box, Ack(1)));
  EXPECT_EQ(writable, 0);
  EXPECT_EQ(box->Write(Msg(W(3))).code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace stream_test
}  // namespace tether
