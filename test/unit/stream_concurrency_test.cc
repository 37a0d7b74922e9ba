// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// The stream's state machine driven from several threads at once, as gRPC
// does (an old and a new attempt delivering concurrently during a migration,
// drains arriving on the pool's thread, the app cancelling from its own).
// Meant for the ThreadSanitizer build; the assertions hold in every build.
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "test/unit/stream_fixture.h"

namespace tether {
namespace stream_test {
namespace {

Stream::Spec SpecFor(std::shared_ptr<Transport> transport) {
  Stream::Spec spec;
  spec.attempt_factory = std::move(transport);
  spec.sequence_of = [](const Resp& r) -> absl::optional<std::uint64_t> {
    return r.seq;
  };
  spec.resume_after = [](Req& r, std::uint64_t seq) { r.after = seq; };
  return spec;
}

// Checks, under its own lock, that delivery is gap-free and never repeats.
struct Checker {
  std::mutex mu;
  std::uint64_t last = 0;
  int bad = 0;
  int delivered = 0;
  int done = 0;
  void Message(const Resp& r) {
    std::lock_guard<std::mutex> lock(mu);
    if (r.seq != last + 1) ++bad;
    last = r.seq;
    ++delivered;
  }
};

TEST(StreamConcurrency, MigrationWithBothAttemptsDeliveringConcurrently) {
  for (int round = 0; round < 20; ++round) {
    auto clock = std::make_shared<fakes::FakeClock>();
    auto source = std::make_shared<fakes::FakeConnectionSource>();
    auto transport = std::make_shared<Transport>(source);
    ReconnectingStreamOptions options;
    options.clock = clock;
    options.random_seed = 1;
    Checker check;
    auto stream = *Stream::Start(
        source, SpecFor(transport), options,
        [&](Resp&& r) { check.Message(r); },
        [&](const absl::Status&) {
          std::lock_guard<std::mutex> lock(check.mu);
          ++check.done;
        });
    auto old_attempt = transport->attempt(0);
    constexpr std::uint64_t kOld = 300;
    std::thread old_server([&] {
      for (std::uint64_t s = 1; s <= kOld; ++s) old_attempt->Send(Resp{s});
    });
    std::thread pool_thread([&] {
      // Drain once the stream has seen something.
      while (stream->stats().messages_delivered < 10) std::this_thread::yield();
      source->Drain(1);
    });
    std::thread new_server([&] {
      std::shared_ptr<Transport::FakeAttempt> fresh;
      while ((fresh = transport->attempt(1)) == nullptr) {
        std::this_thread::yield();
      }
      for (std::uint64_t s = fresh->request().after + 1; s <= kOld + 100; ++s) {
        fresh->Send(Resp{s});
      }
    });
    std::thread reader([&] {
      for (int i = 0; i < 200; ++i) (void)stream->stats();
    });
    old_server.join();
    pool_thread.join();
    new_server.join();
    reader.join();
    {
      std::lock_guard<std::mutex> lock(check.mu);
      EXPECT_EQ(check.bad, 0) << "round " << round;
      EXPECT_EQ(check.last, kOld + 100) << "round " << round;
      EXPECT_EQ(check.done, 0);
    }
    EXPECT_TRUE(old_attempt->cancelled());
    EXPECT_EQ(stream->stats().migrations, 1u);
    stream.reset();
    // The transport has no clock: complete the cancels (the old attempt's,
    // the destroyed stream's) so the attempts let the stream go.
    transport->CompletePendingCancels();
    EXPECT_EQ(transport->pending_cancels(), 0u);
  }
}

TEST(StreamConcurrency, CancelAndDestroyRaceWithDeliveryAndEnds) {
  for (int round = 0; round < 50; ++round) {
    auto clock = std::make_shared<fakes::FakeClock>();
    auto source = std::make_shared<fakes::FakeConnectionSource>();
    auto transport = std::make_shared<Transport>(source);
    ReconnectingStreamOptions options;
    options.clock = clock;
    options.random_seed = 2;
    auto check = std::make_shared<Checker>();
    auto stream = *Stream::Start(
        source, SpecFor(transport), options,
        [check](Resp&& r) { check->Message(r); },
        [check](const absl::Status&) {
          std::lock_guard<std::mutex> lock(check->mu);
          ++check->done;
        });
    auto a = transport->attempt(0);
    std::thread server([&] {
      for (std::uint64_t s = 1; s <= 100; ++s) a->Send(Resp{s});
      a->Finish(absl::UnavailableError("going away"));
    });
    std::thread timers([&] {
      for (int i = 0; i < 20; ++i) clock->AdvanceBy(absl::Milliseconds(1));
    });
    std::thread app([&] {
      if (round % 2 == 0) stream->Cancel();
    });
    app.join();
    stream.reset();  // must wait for any callback running elsewhere
    const int delivered_at_destroy = [&] {
      std::lock_guard<std::mutex> lock(check->mu);
      return check->delivered;
    }();
    server.join();
    timers.join();
    transport->CompletePendingCancels();  // cancels complete later, as in gRPC
    clock->RunDue();
    std::lock_guard<std::mutex> lock(check->mu);
    EXPECT_EQ(check->bad, 0);
    EXPECT_EQ(check->delivered, delivered_at_destroy);  // nothing after
    EXPECT_LE(check->done, 1);
  }
}

}  // namespace
}  // namespace stream_test
}  // namespace tether
