// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Deferred on its own: order, calls added while running, and calls that
// throw.
#include "tether/internal/deferred.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether {
namespace internal {
namespace {

using ::testing::ElementsAre;

TEST(DeferredTest, RunsInOrderOnceIncludingCallsAddedWhileRunning) {
  std::vector<int> ran;
  Deferred later;
  later.Add([&] { ran.push_back(1); });
  later.Add([&] {
    ran.push_back(2);
    later.Add([&] { ran.push_back(4); });
  });
  later.Add([&] { ran.push_back(3); });
  EXPECT_FALSE(later.empty());
  later.Run();
  EXPECT_THAT(ran, ElementsAre(1, 2, 3, 4));
  EXPECT_TRUE(later.empty());
  later.Run();
  EXPECT_THAT(ran, ElementsAre(1, 2, 3, 4));
}

TEST(DeferredTest, TheDestructorRunsWhatIsLeft) {
  std::vector<int> ran;
  {
    Deferred later;
    later.Add([&] { ran.push_back(1); });
  }
  EXPECT_THAT(ran, ElementsAre(1));
}

TEST(DeferredTest, RunRethrowsTheFirstExceptionAfterEveryCallRan) {
  std::vector<int> ran;
  Deferred later;
  later.Add([&] {
    ran.push_back(1);
    throw std::runtime_error("first");
  });
  later.Add([&] {
    ran.push_back(2);
    throw std::runtime_error("second");
  });
  later.Add([&] { ran.push_back(3); });
  try {
    later.Run();
    ADD_FAILURE() << "Run did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "first");
  }
  EXPECT_THAT(ran, ElementsAre(1, 2, 3));
  EXPECT_TRUE(later.empty());
}

TEST(DeferredTest, AThrowingCallNeverEscapesTheDestructor) {
  std::vector<int> ran;
  {
    Deferred later;
    later.Add([] { throw std::runtime_error("an observer threw"); });
    later.Add([&] { ran.push_back(2); });
  }  // std::terminate before: the exception left a noexcept destructor
  EXPECT_THAT(ran, ElementsAre(2));
}

}  // namespace
}  // namespace internal
}  // namespace tether
