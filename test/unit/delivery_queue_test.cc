// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// DeliveryQueue on its own, on one thread: order, flow control, the end
// last and once, callouts, exceptions, the reader mode.
#include "tether/internal/delivery_queue.h"
#include "tether/internal/message_store.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether {
namespace internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class Owner final : public DeliveryQueueOwner {
 public:
  void OnQueueSpace() override { ++space; }
  void OnCallbackError(absl::Status status) override {
    errors.push_back(std::move(status));
  }
  int space = 0;
  std::vector<absl::Status> errors;
};

class DeliveryQueueTest : public ::testing::Test {
 protected:
  // Callback mode; `on_message` records "m<v>" (and throws for "boom").
  void MakeCallbacks(std::size_t capacity) {
    store_ = std::make_unique<TypedMessageStore<std::string>>(
        [this](std::string&& m) {
          log_.events.push_back("m" + m);
          if (m == "boom") throw std::runtime_error("bad message");
        });
    queue_ = std::make_unique<DeliveryQueue>(
        capacity, store_.get(),
        [this](const absl::Status& s) {
          log_.events.push_back("done " + s.ToString());
        },
        &owner_);
  }
  bool Push(std::string m) { return queue_->Push(&m); }

  Owner owner_;
  struct {
    std::vector<std::string> events;
  } log_;
  std::unique_ptr<TypedMessageStore<std::string>> store_;
  std::unique_ptr<DeliveryQueue> queue_;
};

TEST_F(DeliveryQueueTest, DeliversInOrderThenTheEndOnceAndLast) {
  MakeCallbacks(8);
  Push("1");
  Push("2");
  queue_->Close(absl::CancelledError("x"));
  queue_->Close(absl::OkStatus());  // later closes do nothing
  queue_->Drain();
  queue_->Drain();
  EXPECT_THAT(log_.events, ElementsAre("m1", "m2", "done CANCELLED: x"));
  EXPECT_EQ(queue_->delivered(), 2u);
}

TEST_F(DeliveryQueueTest, AFullQueueSaysSoAndTellsTheOwnerWhenThereIsRoom) {
  MakeCallbacks(2);
  EXPECT_TRUE(Push("1"));
  EXPECT_FALSE(Push("2"));  // now full: stop reading
  EXPECT_FALSE(queue_->HasRoom());
  EXPECT_EQ(owner_.space, 0);
  queue_->Drain();
  EXPECT_EQ(owner_.space, 1);
  EXPECT_TRUE(queue_->HasRoom());
  EXPECT_THAT(log_.events, ElementsAre("m1", "m2"));
}

TEST_F(DeliveryQueueTest, AThrowingOnMessageIsReportedToTheOwner) {
  MakeCallbacks(8);
  Push("boom");
  queue_->Drain();
  ASSERT_EQ(owner_.errors.size(), 1u);
  EXPECT_EQ(owner_.errors[0].code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(owner_.errors[0].message()),
              HasSubstr("on_message threw: bad message"));
  EXPECT_EQ(queue_->delivered(), 1u);
}

TEST_F(DeliveryQueueTest, CalloutsRunUntilTheEndAndContainExceptions) {
  MakeCallbacks(8);
  int ran = 0;
  queue_->Callout([&] { ++ran; });
  queue_->Callout([] { throw std::runtime_error("observer"); });
  queue_->Close(absl::OkStatus());
  queue_->Drain();
  queue_->Callout([&] { ++ran; });  // after on_done began: never
  EXPECT_EQ(ran, 1);
}

TEST_F(DeliveryQueueTest, ClearDropsWhatWasNotDelivered) {
  MakeCallbacks(8);
  Push("1");
  queue_->Clear();
  queue_->Close(absl::OkStatus());
  queue_->Drain();
  EXPECT_THAT(log_.events, ElementsAre("done OK"));
}

TEST_F(DeliveryQueueTest, DetachStopsEveryLaterCallback) {
  MakeCallbacks(8);
  Push("1");
  queue_->Detach();
  queue_->Close(absl::OkStatus());
  queue_->Drain();
  int ran = 0;
  queue_->Callout([&] { ++ran; });
  EXPECT_TRUE(log_.events.empty());
  EXPECT_EQ(ran, 0);
}

TEST(DeliveryQueueReaderTest, ReadsThenFinishes) {
  Owner owner;
  TypedMessageStore<std::string> store(nullptr);
  DeliveryQueue queue(4, &store, nullptr, &owner);
  std::string m = "a";
  queue.Push(&m);
  queue.Close(absl::DataLossError("gap"));
  std::string out;
  ASSERT_TRUE(queue.Read(&out));
  EXPECT_EQ(out, "a");
  EXPECT_FALSE(queue.Read(&out));
  EXPECT_EQ(queue.Finish().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(queue.delivered(), 1u);
}

}  // namespace
}  // namespace internal
}  // namespace tether
