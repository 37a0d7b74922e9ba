// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// UnaryCaller on the fakes: retries, classification, pushback, bounds and a
// breaker shared with a stream. No sockets, no sleeps.
#include "tether/unary_call.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tether/circuit_breaker.h"
#include "tether/reconnecting_stream.h"
#include "tether/retry_budget.h"
#include "tether/testing/fake_clock.h"
#include "tether/testing/fake_transport.h"
#include "tether/testing/fake_unary_transport.h"

namespace tether {
namespace {

using ::testing::HasSubstr;

struct Req {
  std::string key;
};
struct Resp {
  std::string value;
};

using Caller = UnaryCaller<Req, Resp>;
using Unary = fakes::FakeUnaryTransport<Req, Resp>;

class UnaryCallTest : public ::testing::Test {
 protected:
  UnaryCallTest()
      : clock_(std::make_shared<fakes::FakeClock>()),
        source_(std::make_shared<fakes::FakeConnectionSource>()),
        unary_(std::make_shared<Unary>(clock_)) {
    options_.clock = clock_;
    options_.random_seed = 3;
    ExponentialBackoffOptions b;
    b.initial_delay = absl::Milliseconds(100);
    b.jitter = Jitter::kNone;
    options_.backoff =
        std::shared_ptr<const BackoffPolicy>(ExponentialBackoff::Create(b).value());
  }

  std::unique_ptr<Caller> Make() {
    auto c = Caller::Create(source_, unary_, options_);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // Starts a call whose result lands in `results_`.
  void Start(Caller& caller, std::string key) {
    caller.Call(Req{std::move(key)}, [this](absl::StatusOr<Resp> r) {
      std::lock_guard<std::mutex> l(mu_);
      results_.push_back(std::move(r));
    });
  }
  std::vector<absl::StatusOr<Resp>> results() {
    std::lock_guard<std::mutex> l(mu_);
    return results_;
  }

  std::shared_ptr<fakes::FakeClock> clock_;
  std::shared_ptr<fakes::FakeConnectionSource> source_;
  std::shared_ptr<Unary> unary_;
  UnaryCallOptions options_;
  std::mutex mu_;
  std::vector<absl::StatusOr<Resp>> results_;
};

TEST_F(UnaryCallTest, RetriesTransientFailuresWithBackoffThenSucceeds) {
  unary_->Expect(Unary::Fail(absl::UnavailableError("busy")));
  unary_->Expect(Unary::Fail(absl::InternalError("oops")));
  unary_->Expect(Unary::Ok(Resp{"v"}));
  auto caller = Make();
  Start(*caller, "k");
  EXPECT_EQ(unary_->call_count(), 1u);
  clock_->AdvanceBy(absl::Milliseconds(99));
  EXPECT_EQ(unary_->call_count(), 1u);
  clock_->AdvanceBy(absl::Milliseconds(1));
  EXPECT_EQ(unary_->call_count(), 2u);
  clock_->AdvanceBy(absl::Milliseconds(200));  // 100 ms x2
  ASSERT_EQ(unary_->call_count(), 3u);
  ASSERT_EQ(results().size(), 1u);
  ASSERT_TRUE(results()[0].ok()) << results()[0].status();
  EXPECT_EQ(results()[0]->value, "v");
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(unary_->call(i).info.attempt, i + 1);
    EXPECT_EQ(unary_->call(i).request.key, "k");
    EXPECT_EQ(unary_->call(i).info.reason,
              i == 0 ? AttemptReason::kFirst : AttemptReason::kReopen);
  }
  // Every pick was given back.
  EXPECT_EQ(source_->held(source_->current()), 0u);
  EXPECT_EQ(source_->releases(), 3u);
}

TEST_F(UnaryCallTest, ARetryBudgetHoldsRetriesAfterFailuresNotDrains) {
  RetryBudgetOptions bo;
  bo.retry_ratio = 0;
  bo.min_retries_per_second = 1;
  bo.window = absl::Seconds(1);  // one retry at once, then one a second
  bo.clock = clock_;
  auto budget = RetryBudget::Create(bo).value();
  options_.retry_budget = budget;
  options_.overall_timeout = absl::Seconds(10);
  // Attempts in the order they start: call 1, call 2, call 1's retry
  // (100 ms), call 1's retry after the drain (300 ms), call 2's retry (1 s).
  unary_->Expect(Unary::Fail(absl::InternalError("bad deploy")));
  unary_->Expect(Unary::Fail(absl::InternalError("bad deploy")));
  unary_->Expect(Unary::Fail(absl::UnavailableError("draining")));
  unary_->Expect(Unary::Ok(Resp{"v"}));
  unary_->Expect(Unary::Ok(Resp{"w"}));
  auto caller = Make();
  Start(*caller, "1");
  Start(*caller, "2");
  // Call 1 took the one retry at hand; call 2 waits for the next, at 1 s.
  EXPECT_EQ(budget->Counts().waited, 1u);
  clock_->AdvanceBy(absl::Milliseconds(100));
  EXPECT_EQ(unary_->call_count(), 3u);
  clock_->AdvanceBy(absl::Milliseconds(200));  // the drain's retry: free
  EXPECT_EQ(unary_->call_count(), 4u);
  EXPECT_EQ(budget->Counts().retries, 2u);
  clock_->AdvanceBy(absl::Milliseconds(650));
  EXPECT_EQ(unary_->call_count(), 4u);
  clock_->AdvanceBy(absl::Milliseconds(50));
  EXPECT_EQ(unary_->call_count(), 5u);
  ASSERT_EQ(results().size(), 2u);
  EXPECT_TRUE(results()[0].ok() && results()[1].ok());
  EXPECT_EQ(budget->Counts().retries, 2u);
}

TEST_F(UnaryCallTest, PermanentErrorEndsAtOnce) {
  unary_->Expect(Unary::Fail(absl::NotFoundError("no such key")));
  auto caller = Make();
  Start(*caller, "k");
  clock_->AdvanceBy(absl::Seconds(5));
  EXPECT_EQ(unary_->call_count(), 1u);
  ASSERT_EQ(results().size(), 1u);
  EXPECT_EQ(results()[0].status().code(), absl::StatusCode::kNotFound);
}

TEST_F(UnaryCallTest, PushbackReplacesBackoffAndNegativeStops) {
  unary_->Expect(Unary::Fail(absl::ResourceExhaustedError("quota"),
                             {{"grpc-retry-pushback-ms", "750"}}));
  unary_->Expect(Unary::Fail(absl::UnavailableError("shedding"),
                             {{"grpc-retry-pushback-ms", "-1"}}));
  auto caller = Make();
  Start(*caller, "k");
  clock_->AdvanceBy(absl::Milliseconds(749));
  EXPECT_EQ(unary_->call_count(), 1u);
  clock_->AdvanceBy(absl::Milliseconds(1));
  EXPECT_EQ(unary_->call_count(), 2u);
  clock_->AdvanceBy(absl::Seconds(10));
  EXPECT_EQ(unary_->call_count(), 2u);
  ASSERT_EQ(results().size(), 1u);
  EXPECT_EQ(results()[0].status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(results()[0].status().message(), "shedding");
}

TEST_F(UnaryCallTest, ClassifierSeesTrailers) {
  options_.classifier = [](const AttemptEnd& end) {
    return end.trailing_metadata.count("x-final") ? EndClass::kPermanent
                                                  : DefaultClassify(end);
  };
  unary_->Expect(Unary::Fail(absl::UnavailableError("x"), {{"x-final", "1"}}));
  auto caller = Make();
  Start(*caller, "k");
  clock_->AdvanceBy(absl::Seconds(5));
  EXPECT_EQ(unary_->call_count(), 1u);
  ASSERT_EQ(results().size(), 1u);
  EXPECT_EQ(results()[0].status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(UnaryCallTest, MaxAttemptsBoundsTheCall) {
  options_.max_attempts = 3;
  for (int i = 0; i < 5; ++i) {
    unary_->Expect(Unary::Fail(absl::UnavailableError("down")));
  }
  auto caller = Make();
  Start(*caller, "k");
  clock_->AdvanceBy(absl::Seconds(10));
  EXPECT_EQ(unary_->call_count(), 3u);
  ASSERT_EQ(results().size(), 1u);
  EXPECT_EQ(results()[0].status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(results()[0].status().message()),
              HasSubstr("gave up after 3 attempts"));
}

TEST_F(UnaryCallTest, AttemptDeadlineIsCutToTheOverallBound) {
  options_.attempt_timeout = absl::Seconds(10);
  options_.overall_timeout = absl::Milliseconds(250);
  auto caller = Make();
  Start(*caller, "k");
  ASSERT_EQ(unary_->call_count(), 1u);
  EXPECT_EQ(unary_->call(0).timeout, absl::Milliseconds(250));
  clock_->AdvanceBy(absl::Milliseconds(50));
  // The attempt's gRPC deadline passes: DEADLINE_EXCEEDED (transient).
  ASSERT_TRUE(unary_->Complete(
      0, Unary::Fail(absl::DeadlineExceededError("Deadline Exceeded"))));
  clock_->AdvanceBy(absl::Milliseconds(100));  // backoff 100 ms
  ASSERT_EQ(unary_->call_count(), 2u);
  EXPECT_EQ(unary_->call(1).timeout, absl::Milliseconds(100));
  ASSERT_TRUE(unary_->Complete(1, Unary::Fail(absl::UnavailableError("x"))));
  // The next backoff (200 ms) would pass the bound: no third attempt.
  clock_->AdvanceBy(absl::Seconds(5));
  EXPECT_EQ(unary_->call_count(), 2u);
  ASSERT_EQ(results().size(), 1u);
  EXPECT_EQ(results()[0].status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(UnaryCallTest, BreakerIsSharedWithAStream) {
  CircuitBreakerOptions bo;
  bo.name = "ledger";
  bo.consecutive_failures = 2;
  bo.break_duration = absl::Seconds(30);
  auto breaker = CircuitBreaker::Create(bo, clock_).value();
  options_.breaker = breaker;
  options_.max_attempts = 1;
  unary_->Expect(Unary::Fail(absl::InternalError("boom")));
  unary_->Expect(Unary::Fail(absl::InternalError("boom")));
  auto caller = Make();
  Start(*caller, "a");
  Start(*caller, "b");
  EXPECT_EQ(breaker->state(), BreakerState::kOpen);
  // A third unary call is refused at once, without a call.
  Start(*caller, "c");
  EXPECT_EQ(unary_->call_count(), 2u);
  ASSERT_EQ(results().size(), 3u);
  EXPECT_EQ(results()[2].status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(results()[2].status().message()),
              HasSubstr("ledger"));
  // A stream on the same breaker is refused too.
  auto transport =
      std::make_shared<fakes::FakeTransport<Req, Resp>>(source_, clock_);
  ReconnectingStream<Req, Resp>::Spec spec;
  spec.attempt_factory = transport;
  ReconnectingStreamOptions so;
  so.clock = clock_;
  so.breaker = breaker;
  so.fail_fast_on_open_breaker = true;
  absl::optional<absl::Status> stream_end;
  auto stream = ReconnectingStream<Req, Resp>::Start(
      source_, spec, so, [](Resp&&) {},
      [&](const absl::Status& s) { stream_end = s; });
  ASSERT_TRUE(stream.ok());
  clock_->RunDue();
  EXPECT_EQ(transport->attempt_count(), 0u);
  ASSERT_TRUE(stream_end.has_value());
  EXPECT_EQ(stream_end->code(), absl::StatusCode::kUnavailable);
}

TEST_F(UnaryCallTest, SuccessAndPermanentErrorsDoNotTripTheBreaker) {
  CircuitBreakerOptions bo;
  bo.consecutive_failures = 1;
  auto breaker = CircuitBreaker::Create(bo, clock_).value();
  options_.breaker = breaker;
  unary_->Expect(Unary::Fail(absl::NotFoundError("x")));
  unary_->Expect(Unary::Ok(Resp{"v"}));
  auto caller = Make();
  Start(*caller, "a");
  Start(*caller, "b");
  EXPECT_EQ(breaker->state(), BreakerState::kClosed);
  ASSERT_EQ(results().size(), 2u);
  EXPECT_TRUE(results()[1].ok());
}

TEST_F(UnaryCallTest, ThrowingClassifierEndsWithInternal) {
  options_.classifier = [](const AttemptEnd&) -> EndClass {
    throw std::runtime_error("bad rule");
  };
  unary_->Expect(Unary::Fail(absl::UnavailableError("x")));
  auto caller = Make();
  Start(*caller, "k");
  ASSERT_EQ(results().size(), 1u);
  EXPECT_EQ(results()[0].status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(results()[0].status().message()),
              HasSubstr("bad rule"));
}

TEST_F(UnaryCallTest, OptionsAreValidatedAtTheExtremes) {
  auto bad = [this](UnaryCallOptions o, const char* field) {
    auto c = Caller::Create(source_, unary_, std::move(o));
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(field));
  };
  UnaryCallOptions o = options_;
  o.max_attempts = 0;
  bad(o, "max_attempts");
  o.max_attempts = 101;
  bad(o, "max_attempts");
  o = options_;
  o.attempt_timeout = absl::ZeroDuration();
  bad(o, "attempt_timeout");
  o.attempt_timeout = absl::Hours(1) + absl::Nanoseconds(1);
  bad(o, "attempt_timeout");
  o = options_;
  o.overall_timeout = absl::ZeroDuration();
  bad(o, "overall_timeout");
  o.overall_timeout = absl::InfiniteDuration();
  bad(o, "overall_timeout");
  // The extremes that are valid.
  o = options_;
  o.max_attempts = 100;
  o.attempt_timeout = absl::Hours(1);
  o.overall_timeout = absl::Hours(24);
  EXPECT_TRUE(Caller::Create(source_, unary_, o).ok());
  EXPECT_EQ(Caller::Create(
                source_, std::shared_ptr<UnaryAttemptFactory<Req, Resp>>(),
                options_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tether
