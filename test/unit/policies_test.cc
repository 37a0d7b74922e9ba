// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include <cstdint>
#include <limits>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tether/backoff.h"
#include "tether/classification.h"
#include "tether/internal/breaker_gate.h"

namespace tether {
namespace {

// A random source that always draws the same bits: all zeros (a uniform
// draw of 0) or only the top bit (a uniform draw of exactly one half).
class ConstantBits {
 public:
  using result_type = std::uint64_t;
  explicit ConstantBits(bool half) : half_(half) {}
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() {
    return std::numeric_limits<result_type>::max();
  }
  result_type operator()() { return half_ ? result_type{1} << 63 : 0; }

 private:
  bool half_;
};

bool Near(absl::Duration a, absl::Duration b) {
  return absl::AbsDuration(a - b) < absl::Microseconds(1);
}

TEST(ExponentialBackoff, WithoutJitterGrowsToTheCapAndStays) {
  ExponentialBackoffOptions o;
  o.initial_delay = absl::Milliseconds(100);
  o.max_delay = absl::Milliseconds(1000);
  o.multiplier = 2;
  o.jitter = Jitter::kNone;
  auto b = *ExponentialBackoff::Create(o);
  std::mt19937_64 gen(1);
  std::vector<absl::Duration> got;
  for (int i = 0; i < 7; ++i) got.push_back(b->OnFailure(gen));
  EXPECT_THAT(got, ::testing::ElementsAre(
                       absl::Milliseconds(100), absl::Milliseconds(200),
                       absl::Milliseconds(400), absl::Milliseconds(800),
                       absl::Milliseconds(1000), absl::Milliseconds(1000),
                       absl::Milliseconds(1000)));
  b->Reset();
  EXPECT_EQ(b->OnFailure(gen), absl::Milliseconds(100));
}

TEST(ExponentialBackoff, FullJitterSpansZeroToTheStep) {
  ExponentialBackoffOptions o;
  o.initial_delay = absl::Seconds(1);
  o.max_delay = absl::Seconds(8);
  auto low = *ExponentialBackoff::Create(o);
  auto mid = *ExponentialBackoff::Create(o);
  ConstantBits zeros(false), half(true);
  for (int i = 0; i < 5; ++i) {
    absl::Duration step = std::min(absl::Seconds(8), absl::Seconds(1 << i));
    EXPECT_EQ(low->OnFailure(zeros), absl::ZeroDuration());
    EXPECT_TRUE(Near(mid->OnFailure(half), step / 2)) << i;
  }
}

TEST(ExponentialBackoff, GrpcPresetIsOneSecondTimesOnePointSixPlusMinus20) {
  ExponentialBackoffOptions o = GrpcConnectionBackoffOptions();
  EXPECT_EQ(o.initial_delay, absl::Seconds(1));
  EXPECT_EQ(o.max_delay, absl::Seconds(120));
  EXPECT_DOUBLE_EQ(o.multiplier, 1.6);
  auto low = *ExponentialBackoff::Create(o);
  auto mid = *ExponentialBackoff::Create(o);
  ConstantBits zeros(false), half(true);
  EXPECT_TRUE(Near(low->OnFailure(zeros), absl::Milliseconds(800)));
  EXPECT_TRUE(Near(low->OnFailure(zeros), absl::Milliseconds(1280)));
  EXPECT_TRUE(Near(mid->OnFailure(half), absl::Seconds(1)));
  EXPECT_TRUE(Near(mid->OnFailure(half), absl::Milliseconds(1600)));
}

TEST(ExponentialBackoff, ClonesStartFresh) {
  ExponentialBackoffOptions o;
  o.jitter = Jitter::kNone;
  auto proto = *ExponentialBackoff::Create(o);
  std::mt19937_64 gen(1);
  proto->OnFailure(gen);
  proto->OnFailure(gen);
  auto clone = proto->Clone();
  EXPECT_EQ(clone->OnFailure(gen), o.initial_delay);
}

TEST(ExponentialBackoff, InvalidOptionsAreRejectedNotClamped) {
  auto expect_bad = [](ExponentialBackoffOptions o, const char* field) {
    auto b = ExponentialBackoff::Create(o);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(b.status().message()), ::testing::HasSubstr(field));
  };
  ExponentialBackoffOptions o;
  o.initial_delay = absl::ZeroDuration();
  expect_bad(o, "initial_delay");
  o = {};
  o.max_delay = absl::InfiniteDuration();
  expect_bad(o, "max_delay");
  o = {};
  o.multiplier = 0.9;
  expect_bad(o, "multiplier");
  o = {};
  o.jitter = Jitter::kProportional;
  o.jitter_fraction = 1.5;
  expect_bad(o, "jitter_fraction");
}

TEST(Classification, DefaultTable) {
  auto cls = [](absl::Status s) {
    AttemptEnd e;
    e.status = std::move(s);
    return DefaultClassify(e);
  };
  EXPECT_EQ(cls(absl::OkStatus()), EndClass::kOk);
  EXPECT_EQ(cls(absl::UnavailableError("")), EndClass::kDrain);
  EXPECT_EQ(cls(absl::CancelledError("")), EndClass::kDrain);
  for (auto s : {absl::ResourceExhaustedError(""), absl::AbortedError(""),
                 absl::InternalError(""), absl::UnknownError(""),
                 absl::DeadlineExceededError("")}) {
    EXPECT_EQ(cls(s), EndClass::kTransient) << s;
  }
  for (auto s :
       {absl::InvalidArgumentError(""), absl::NotFoundError(""),
        absl::PermissionDeniedError(""), absl::UnauthenticatedError(""),
        absl::FailedPreconditionError(""), absl::OutOfRangeError(""),
        absl::UnimplementedError("")}) {
    EXPECT_EQ(cls(s), EndClass::kPermanent) << s;
  }
}

TEST(BreakerOutcome, DrainsAreIgnoredButConnectFailuresCount) {
  using internal::BreakerGate;
  EXPECT_EQ(BreakerGate::Classify(absl::UnavailableError("GOAWAY received"),
                                  EndClass::kDrain, false),
            BreakerGate::kIgnored);
  EXPECT_EQ(BreakerGate::Classify(
                absl::UnavailableError("failed to connect to all addresses"),
                EndClass::kDrain, false),
            BreakerGate::kFailure);
  EXPECT_EQ(BreakerGate::Classify(absl::InternalError("x"),
                                  EndClass::kTransient, false),
            BreakerGate::kFailure);
  EXPECT_EQ(BreakerGate::Classify(absl::InternalError("x"),
                                  EndClass::kTransient, true),
            BreakerGate::kIgnored);
  EXPECT_EQ(BreakerGate::Classify(absl::NotFoundError("x"),
                                  EndClass::kPermanent, false),
            BreakerGate::kIgnored);
}

}  // namespace
}  // namespace tether
