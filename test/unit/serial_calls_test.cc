// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// SerialCalls: the pool's observer events arrive in the order they were
// decided, whichever thread happens to deliver them.
#include "connections/serial_calls.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether {
namespace internal {
namespace {

using ::testing::ElementsAre;

// A thread that decided first but has not delivered yet: the next thread to
// run delivers its call first, then its own.
TEST(SerialCallsTest, RunDeliversEarlierPostsFirst) {
  SerialCalls calls;
  std::vector<int> seen;
  calls.Post([&] { seen.push_back(1); });  // "thread A", not run yet
  calls.Post([&] { seen.push_back(2); });  // "thread B"
  calls.Run();                             // B runs both, in order
  EXPECT_THAT(seen, ElementsAre(1, 2));
  calls.Run();  // A's late run finds nothing left
  EXPECT_THAT(seen, ElementsAre(1, 2));
}

// A call that posts and runs again (an observer calling back into the pool)
// queues behind itself instead of recursing or waiting for itself.
TEST(SerialCallsTest, CallThatPostsAndRunsQueuesBehindItself) {
  SerialCalls calls;
  std::vector<int> seen;
  calls.Post([&] {
    seen.push_back(1);
    calls.Post([&] { seen.push_back(3); });
    calls.Run();  // returns at once: this thread is already running
    seen.push_back(2);
  });
  calls.Run();
  EXPECT_THAT(seen, ElementsAre(1, 2, 3));
}

// A call that throws does not wedge the queue: the exception reaches the
// runner, and the next Run delivers what is left.
TEST(SerialCallsTest, ThrowingCallLeavesTheQueueRunnable) {
  SerialCalls calls;
  std::vector<int> seen;
  calls.Post([] { throw std::runtime_error("observer threw"); });
  calls.Post([&] { seen.push_back(2); });
  EXPECT_THROW(calls.Run(), std::runtime_error);
  EXPECT_TRUE(seen.empty());
  calls.Run();
  EXPECT_THAT(seen, ElementsAre(2));
}

// Many threads decide under one lock (numbering their events in decision
// order), release it, then run: every event is delivered once, in order,
// never two at a time.
TEST(SerialCallsTest, ConcurrentDecidersSeeDecisionOrder) {
  constexpr int kThreads = 4;
  constexpr int kEach = 2000;
  SerialCalls calls;
  // std::mutex: TSan sees it (Debian's abseil is not instrumented).
  std::mutex decide_mu;
  std::int64_t next = 0;
  std::vector<std::int64_t> seen;  // touched only by calls
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        {
          std::lock_guard<std::mutex> lock(decide_mu);
          const std::int64_t n = next++;
          calls.Post([&, n] {
            if (inside.fetch_add(1) != 0) overlapped = true;
            seen.push_back(n);
            inside.fetch_sub(1);
          });
        }
        calls.Run();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  calls.Run();  // nothing may be left, but a last run must not hurt
  EXPECT_FALSE(overlapped.load());
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kThreads * kEach));
  for (std::size_t i = 0; i < seen.size(); ++i) {
    ASSERT_EQ(seen[i], static_cast<std::int64_t>(i)) << "at " << i;
  }
}

}  // namespace
}  // namespace internal
}  // namespace tether
