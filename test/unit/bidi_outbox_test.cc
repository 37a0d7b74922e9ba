// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// BidiOutbox on its own: which attempt writes, what it writes, when writes
// are done, and the wake-ups. No stream, no thread.
#include "tether/internal/bidi_outbox.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/stream_fixture.h"

namespace tether {
namespace stream_test {
namespace {

using ::testing::ElementsAre;
using Box = internal::BidiOutbox<BidiReq, Resp>;
using Writes = Box::Writes;
using Next = BidiWrites<BidiReq>::Next;

bool ById(const BidiReq& w, const Resp& r) { return r.ack == w.id; }

// Takes and completes every write `w` offers now; returns them in order.
std::vector<BidiReq> Drain(Writes& w) {
  std::vector<BidiReq> out;
  std::shared_ptr<const BidiReq> req;
  while (w.Take(&req) == Next::kWrite) {
    out.push_back(*req);
    w.Written(true);
  }
  return out;
}

// Counts the wake-ups of one attempt.
struct Wakes {
  int count = 0;
  std::function<void()> Fn() {
    return [this] { ++count; };
  }
};

TEST(BidiOutboxTest, TheLastStartedAttemptWritesWhateverOrderTheyAttachIn) {
  auto box = std::make_shared<Box>(8, ById);
  auto first = Box::Attach(box, 1, {Open(0)});
  auto third = Box::Attach(box, 3, {Open(5)});
  auto second = Box::Attach(box, 2, {Open(4)});  // cancelled, attached late
  ASSERT_TRUE(box->Write(W(1)).ok());
  EXPECT_THAT(Drain(*second), ElementsAre(Open(4)));  // its opens only
  EXPECT_THAT(Drain(*first), ElementsAre(Open(0)));
  EXPECT_THAT(Drain(*third), ElementsAre(Open(5), W(1)));
  second->Close();  // the late one ends: the writer stays
  ASSERT_TRUE(box->Write(W(2)).ok());
  EXPECT_THAT(Drain(*third), ElementsAre(W(2)));
}

TEST(BidiOutboxTest, OnlyTheWritersResponsesAcknowledge) {
  auto box = std::make_shared<Box>(8, ById);
  auto old_one = Box::Attach(box, 1, {});
  ASSERT_TRUE(box->Write(W(1)).ok());
  EXPECT_THAT(Drain(*old_one), ElementsAre(W(1)));
  auto fresh = Box::Attach(box, 2, {});
  old_one->Received(Ack(1));
  EXPECT_EQ(box->size(), 1u);
  EXPECT_THAT(Drain(*fresh), ElementsAre(W(1)));  // replayed
  fresh->Received(Ack(1));
  EXPECT_EQ(box->size(), 0u);
}

TEST(BidiOutboxTest, WithAcknowledgementsTheWriterReplaysAWriteInFlight) {
  auto box = std::make_shared<Box>(8, ById);
  auto old_one = Box::Attach(box, 1, {});
  ASSERT_TRUE(box->Write(W(1)).ok());
  std::shared_ptr<const BidiReq> req;
  ASSERT_EQ(old_one->Take(&req), Next::kWrite);  // in flight
  auto fresh = Box::Attach(box, 2, {});
  EXPECT_THAT(Drain(*fresh), ElementsAre(W(1)));
}

TEST(BidiOutboxTest, WithoutAcknowledgementsAWriteInFlightGoesOutOnce) {
  auto box = std::make_shared<Box>(8, nullptr);
  auto old_one = Box::Attach(box, 1, {});
  ASSERT_TRUE(box->Write(W(1)).ok());
  std::shared_ptr<const BidiReq> req;
  ASSERT_EQ(old_one->Take(&req), Next::kWrite);
  auto fresh = Box::Attach(box, 2, {Open(0)});
  Wakes wakes;
  fresh->SetWakeup(wakes.Fn());
  EXPECT_THAT(Drain(*fresh), ElementsAre(Open(0)));  // then it waits
  old_one->Written(true);
  EXPECT_EQ(wakes.count, 1);
  EXPECT_EQ(box->size(), 0u);
  EXPECT_THAT(Drain(*fresh), ElementsAre());  // W(1) is done
  ASSERT_TRUE(box->Write(W(2)).ok());
  EXPECT_THAT(Drain(*fresh), ElementsAre(W(2)));
}

TEST(BidiOutboxTest, WithoutAcknowledgementsAFailedWriteGoesToTheWriter) {
  auto box = std::make_shared<Box>(8, nullptr);
  auto old_one = Box::Attach(box, 1, {});
  ASSERT_TRUE(box->Write(W(1)).ok());
  ASSERT_TRUE(box->Write(W(2)).ok());
  std::shared_ptr<const BidiReq> req;
  ASSERT_EQ(old_one->Take(&req), Next::kWrite);
  auto fresh = Box::Attach(box, 2, {});
  Wakes wakes;
  fresh->SetWakeup(wakes.Fn());
  EXPECT_THAT(Drain(*fresh), ElementsAre());
  old_one->Written(false);  // never written: the writer writes it, in order
  EXPECT_EQ(wakes.count, 1);
  EXPECT_THAT(Drain(*fresh), ElementsAre(W(1), W(2)));
}

TEST(BidiOutboxTest, AnAttemptThatEndsWithAWriteInFlightReleasesTheWriter) {
  auto box = std::make_shared<Box>(8, nullptr);
  auto old_one = Box::Attach(box, 1, {});
  ASSERT_TRUE(box->Write(W(1)).ok());
  std::shared_ptr<const BidiReq> req;
  ASSERT_EQ(old_one->Take(&req), Next::kWrite);
  auto fresh = Box::Attach(box, 2, {});
  Wakes wakes;
  fresh->SetWakeup(wakes.Fn());
  old_one->Close();
  EXPECT_EQ(wakes.count, 1);
  old_one->Written(false);  // after its end: nothing more
  EXPECT_THAT(Drain(*fresh), ElementsAre(W(1)));
}

TEST(BidiOutboxTest, WritesDoneHalfClosesAfterEverything) {
  auto box = std::make_shared<Box>(8, ById);
  auto a = Box::Attach(box, 1, {Open(0)});
  ASSERT_TRUE(box->Write(W(1)).ok());
  box->WritesDone();
  EXPECT_EQ(box->Write(W(2)).code(), absl::StatusCode::kFailedPrecondition);
  std::shared_ptr<const BidiReq> req;
  for (const BidiReq& want : {Open(0), W(1)}) {
    ASSERT_EQ(a->Take(&req), Next::kWrite);
    EXPECT_EQ(*req, want);
    a->Written(true);
  }
  EXPECT_EQ(a->Take(&req), Next::kWritesDone);
  EXPECT_EQ(a->Take(&req), Next::kNothing);  // once
}

TEST(BidiOutboxTest, FullOutboxRefusesAndOnWritableRunsOnceWhenRoomComes) {
  auto box = std::make_shared<Box>(1, ById);
  auto a = Box::Attach(box, 1, {});
  int writable = 0;
  box->SetOnWritable([&writable] { ++writable; });
  EXPECT_EQ(writable, 0);  // nothing was refused
  ASSERT_TRUE(box->Write(W(1)).ok());
  EXPECT_EQ(box->Write(W(2)).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Drain(*a), ElementsAre(W(1)));
  a->Received(Ack(1));
  EXPECT_EQ(writable, 1);
  ASSERT_TRUE(box->Write(W(2)).ok());
  a->Received(Ack(2));
  EXPECT_EQ(writable, 1);  // once per refusal
}

TEST(BidiOutboxTest, OnWritableSetAfterTheRoomCameBackRunsAtOnce) {
  auto box = std::make_shared<Box>(1, ById);
  auto a = Box::Attach(box, 1, {});
  ASSERT_TRUE(box->Write(W(1)).ok());
  EXPECT_EQ(box->Write(W(2)).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Drain(*a), ElementsAre(W(1)));
  a->Received(Ack(1));  // room, nobody to tell yet
  int writable = 0;
  box->SetOnWritable([&writable] { ++writable; });
  EXPECT_EQ(writable, 1);
}

TEST(BidiOutboxTest, TheEndRefusesWritesAndWakesNobody) {
  auto box = std::make_shared<Box>(1, ById);
  auto a = Box::Attach(box, 1, {});
  ASSERT_TRUE(box->Write(W(1)).ok());
  EXPECT_EQ(box->Write(W(2)).code(), absl::StatusCode::kResourceExhausted);
  int writable = 0;
  box->SetOnWritable([&writable] { ++writable; });
  box->End();
  EXPECT_THAT(Drain(*a), ElementsAre(W(1)));
  a->Received(Ack(1));
  EXPECT_EQ(writable, 0);
  EXPECT_EQ(box->Write(W(3)).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace stream_test
}  // namespace tether
