// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// tether::Function on its own: the same meaning as std::function (what is
// empty, copies, moves, calls, conversions), with callables stored inline or
// on the heap.
#include "tether/function.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/types/optional.h"
#include "gtest/gtest.h"

namespace tether {
namespace {

int Twice(int x) { return 2 * x; }

struct Counter {
  int value = 0;
  int Add(int x) {
    value += x;
    return value;
  }
};

TEST(FunctionTest, EmptyWhereStdFunctionIsEmpty) {
  EXPECT_FALSE(Function<int(int)>());
  EXPECT_FALSE(Function<int(int)>(nullptr));
  int (*null_fn)(int) = nullptr;
  EXPECT_FALSE(Function<int(int)>(null_fn));
  int (Counter::*null_member)(int) = nullptr;
  EXPECT_FALSE((Function<int(Counter&, int)>(null_member)));
  EXPECT_FALSE(Function<int(int)>(std::function<int(int)>()));
  EXPECT_FALSE(Function<long(int)>(Function<int(int)>()));  // NOLINT
  Function<int(int)> f = [](int x) { return x; };
  EXPECT_TRUE(f);
  EXPECT_TRUE(f != nullptr);
  f = nullptr;
  EXPECT_TRUE(f == nullptr);
  EXPECT_THROW(f(1), std::bad_function_call);
}

TEST(FunctionTest, CallsLambdasFunctionsMemberPointersAndStdFunctions) {
  Function<int(int)> lambda = [](int x) { return x + 1; };
  Function<int(int)> pointer = &Twice;
  Function<int(int)> reference = Twice;
  Function<int(Counter&, int)> member = &Counter::Add;
  Function<int(int)> wrapped = std::function<int(int)>(Twice);
  EXPECT_EQ(lambda(1), 2);
  EXPECT_EQ(pointer(3), 6);
  EXPECT_EQ(reference(4), 8);
  Counter c;
  EXPECT_EQ(member(c, 5), 5);
  EXPECT_EQ(member(c, 2), 7);
  EXPECT_EQ(wrapped(5), 10);
}

TEST(FunctionTest, ConvertsResultsAndDiscardsThemForVoid) {
  // A lambda returning the plain value fits a field that returns optional.
  Function<absl::optional<std::uint64_t>(int)> seq = [](int x) {
    return static_cast<std::uint64_t>(x);
  };
  EXPECT_EQ(seq(7), absl::optional<std::uint64_t>(7));
  int calls = 0;
  Function<void()> discard = [&calls] { return ++calls; };
  discard();
  EXPECT_EQ(calls, 1);
}

TEST(FunctionTest, MutableStateLivesInTheFunctionAndCopiesAreIndependent) {
  // Too big to be stored inline: on the heap.
  std::string big(100, 'x');
  Function<std::size_t()> grow = [big]() mutable {
    big += "y";
    return big.size();
  };
  EXPECT_EQ(grow(), 101u);
  Function<std::size_t()> copy = grow;
  EXPECT_EQ(copy(), 102u);
  EXPECT_EQ(copy(), 103u);
  EXPECT_EQ(grow(), 102u);  // the original went on from its own state
  // Inline: a counter that fits in a pointer.
  Function<int()> small = [n = 0]() mutable { return ++n; };
  EXPECT_EQ(small(), 1);
  Function<int()> small_copy = small;
  EXPECT_EQ(small_copy(), 2);
  EXPECT_EQ(small(), 2);
}

TEST(FunctionTest, MovesLeaveTheSourceEmptyAndDestroyEachCallableOnce) {
  auto token = std::make_shared<int>(0);
  {
    Function<long()> f = [token] { return token.use_count(); };  // NOLINT
    EXPECT_EQ(token.use_count(), 2);
    Function<long()> moved = std::move(f);  // NOLINT
    EXPECT_FALSE(f);  // NOLINT(bugprone-use-after-move): checked on purpose
    EXPECT_EQ(token.use_count(), 2);
    Function<long()> copied = moved;  // NOLINT
    EXPECT_EQ(token.use_count(), 3);
    copied = moved;  // the old copy is destroyed, a new one made
    EXPECT_EQ(token.use_count(), 3);
    copied = nullptr;
    EXPECT_EQ(token.use_count(), 2);
    moved = std::move(moved);  // self-move keeps it usable
    EXPECT_EQ(moved(), 2);
    Function<long()> other = [] { return -1L; };  // NOLINT
    other.swap(moved);
    EXPECT_EQ(other(), 2);
    EXPECT_EQ(moved(), -1);
  }
  EXPECT_EQ(token.use_count(), 1);
}

TEST(FunctionTest, ConvertsToStdFunctionWhenSet) {
  Function<int(int)> f = [](int x) { return x * 3; };
  std::function<int(int)> g = f;
  EXPECT_EQ(g(2), 6);
  // std::function cannot see that a Function is empty: it wraps it, and
  // the call throws bad_function_call (as the empty Function would).
  std::function<int(int)> h = Function<int(int)>();
  EXPECT_TRUE(static_cast<bool>(h));
  EXPECT_THROW(h(1), std::bad_function_call);
}

TEST(FunctionTest, RvalueArgumentsAreForwarded) {
  std::string got;
  Function<void(std::string&&)> take = [&got](std::string&& s) {
    got = std::move(s);
  };
  std::string s(64, 'a');
  take(std::move(s));
  EXPECT_EQ(got.size(), 64u);
  EXPECT_EQ(sizeof(Function<void(std::string&&)>), 3 * sizeof(void*));
}

}  // namespace
}  // namespace tether
