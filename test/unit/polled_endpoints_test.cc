// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// PolledEndpoints: a scripted look-up function under a fake clock. The
// source's thread is real; the test waits on what it delivers (bounded), and
// time moves only when the test advances the clock.
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tether/internal/mutex.h"
#include "tether/resolved_endpoints.h"
#include "tether/testing/fake_clock.h"

namespace tether {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
// tether's own mutex: TSan sees its hand-offs (Debian's absl is not built
// with TSan).
using internal::CondVar;
using internal::Mutex;
using internal::MutexLock;

constexpr absl::Duration kWait = absl::Seconds(30);

// What the sink heard, each with the fake time it came at.
struct Heard {
  absl::Time at;
  std::vector<std::string> addresses;  // empty for an error
  absl::Status error;
};

// A look-up that answers from a script (one entry per call; the last entry
// repeats) and a sink that records; both wait-able.
class Script final : public EndpointSource::Sink {
 public:
  explicit Script(std::shared_ptr<fakes::FakeClock> clock)
      : clock_(std::move(clock)) {}

  void Push(absl::StatusOr<std::vector<std::string>> answer) {
    MutexLock lock(&mu_);
    script_.push_back(std::move(answer));
  }

  EndpointLookup LookUp() {
    return [this](absl::Duration timeout)
               -> absl::StatusOr<std::vector<Endpoint>> {
      MutexLock lock(&mu_);
      timeouts_.push_back(timeout);
      absl::StatusOr<std::vector<std::string>> next = script_.front();
      if (script_.size() > 1) script_.pop_front();
      if (!next.ok()) return next.status();
      std::vector<Endpoint> out;
      for (const std::string& a : *next) out.push_back({a, ""});
      return out;
    };
  }

  void OnEndpoints(std::vector<Endpoint> endpoints) override {
    Heard h{clock_->Now(), {}, absl::OkStatus()};
    for (Endpoint& e : endpoints) h.addresses.push_back(e.address);
    MutexLock lock(&mu_);
    heard_.push_back(std::move(h));
    changed_.SignalAll();
  }
  void OnEndpointsError(const absl::Status& status) override {
    MutexLock lock(&mu_);
    heard_.push_back(Heard{clock_->Now(), {}, status});
    changed_.SignalAll();
  }

  // Waits for the `n`th delivery (1-based) and returns it.
  Heard WaitHeard(std::size_t n) {
    MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + kWait;
    while (heard_.size() < n && absl::Now() < deadline) {
      changed_.WaitWithTimeout(&mu_, deadline - absl::Now());
    }
    EXPECT_GE(heard_.size(), n)
        << "the source delivered " << heard_.size() << " of " << n;
    return heard_.size() >= n ? heard_[n - 1] : Heard{};
  }

  std::size_t heard() {
    MutexLock lock(&mu_);
    return heard_.size();
  }
  std::vector<absl::Duration> timeouts() {
    MutexLock lock(&mu_);
    return timeouts_;
  }

 private:
  const std::shared_ptr<fakes::FakeClock> clock_;
  Mutex mu_;
  CondVar changed_;
  std::deque<absl::StatusOr<std::vector<std::string>>> script_
      ABSL_GUARDED_BY(mu_);
  std::vector<absl::Duration> timeouts_ ABSL_GUARDED_BY(mu_);
  std::vector<Heard> heard_ ABSL_GUARDED_BY(mu_);
};

class PolledEndpointsTest : public ::testing::Test {
 protected:
  PolledEndpointsTest() { options_.clock = clock_; }
  ~PolledEndpointsTest() override {
    if (source_ != nullptr) source_->Stop();
  }

  void Start() {
    auto source = PolledEndpoints(script_->LookUp(), options_);
    ASSERT_TRUE(source.ok()) << source.status();
    source_ = *std::move(source);
    source_->Start(script_);
  }

  // The due time of the source's next look-up, once its thread has armed
  // the timer for it (after `heard` deliveries). Polls the fake clock,
  // bounded.
  absl::Time NextLookUp(std::size_t heard) {
    script_->WaitHeard(heard);
    const absl::Time deadline = absl::Now() + kWait;
    while (clock_->NextDue() == absl::InfiniteFuture() &&
           absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    return clock_->NextDue();
  }

  std::shared_ptr<fakes::FakeClock> clock_ =
      std::make_shared<fakes::FakeClock>();
  const absl::Time t0_ = clock_->Now();
  std::shared_ptr<Script> script_ = std::make_shared<Script>(clock_);
  ResolverOptions options_;
  std::shared_ptr<EndpointSource> source_;
};

TEST(PolledEndpointsOptionsTest, RejectsANullLookUpAndBadOptions) {
  auto null = PolledEndpoints(nullptr);
  ASSERT_FALSE(null.ok());
  EXPECT_EQ(null.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(null.status().message()),
              HasSubstr("PolledEndpoints look_up must"));
  EndpointLookup some = [](absl::Duration)
      -> absl::StatusOr<std::vector<Endpoint>> { return std::vector<Endpoint>{}; };
  ResolverOptions o;
  o.resolve_interval = absl::InfiniteDuration();
  EXPECT_THAT(std::string(PolledEndpoints(some, o).status().message()),
              HasSubstr("ResolverOptions.resolve_interval"));
  o = ResolverOptions();
  o.min_resolve_interval = absl::ZeroDuration();
  EXPECT_THAT(std::string(PolledEndpoints(some, o).status().message()),
              HasSubstr("ResolverOptions.min_resolve_interval"));
  o = ResolverOptions();
  o.query_timeout = absl::Hours(1);
  EXPECT_THAT(std::string(PolledEndpoints(some, o).status().message()),
              HasSubstr("ResolverOptions.query_timeout"));
  // The extremes that are allowed.
  o = ResolverOptions();
  o.min_resolve_interval = absl::Milliseconds(10);
  o.resolve_interval = absl::Hours(1);
  o.query_timeout = absl::Seconds(60);
  EXPECT_TRUE(PolledEndpoints(some, o).ok());
}

TEST_F(PolledEndpointsTest, LooksUpAtOnceThenEveryInterval) {
  script_->Push(std::vector<std::string>{"10.0.0.1:1", "10.0.0.2:1"});
  Start();
  Heard first = script_->WaitHeard(1);
  EXPECT_EQ(first.at, t0_);
  EXPECT_THAT(first.addresses, ElementsAre("10.0.0.1:1", "10.0.0.2:1"));
  EXPECT_EQ(NextLookUp(1), t0_ + absl::Seconds(5));
  clock_->AdvanceToNextTimer();
  EXPECT_EQ(script_->WaitHeard(2).at, t0_ + absl::Seconds(5));
  EXPECT_EQ(NextLookUp(2), t0_ + absl::Seconds(10));
  // Each call is given the query timeout.
  for (absl::Duration t : script_->timeouts()) EXPECT_EQ(t, absl::Seconds(2));
}

TEST_F(PolledEndpointsTest, ErrorsAndEmptyAnswersKeepTheSetAndBackOff) {
  script_->Push(std::vector<std::string>{"10.0.0.1:1"});
  script_->Push(absl::UnavailableError("registry down"));
  script_->Push(std::vector<std::string>{});
  script_->Push(std::vector<std::string>{"10.0.0.1:1"});
  Start();
  script_->WaitHeard(1);
  clock_->AdvanceTo(NextLookUp(1));  // t0 + 5 s: the registry is down
  Heard down = script_->WaitHeard(2);
  EXPECT_EQ(down.error.code(), absl::StatusCode::kUnavailable);
  // Errors back off from the minimum interval, doubling.
  EXPECT_EQ(NextLookUp(2), down.at + absl::Milliseconds(500));
  clock_->AdvanceToNextTimer();  // an empty answer counts as an error
  Heard empty = script_->WaitHeard(3);
  EXPECT_EQ(empty.error.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(empty.error.message()), HasSubstr("no endpoint"));
  EXPECT_EQ(NextLookUp(3), empty.at + absl::Seconds(1));
  clock_->AdvanceToNextTimer();
  Heard back = script_->WaitHeard(4);
  EXPECT_THAT(back.addresses, ElementsAre("10.0.0.1:1"));
  EXPECT_EQ(NextLookUp(4), back.at + absl::Seconds(5));
}

TEST_F(PolledEndpointsTest, AnAnswerThatDroppedAnEndpointIsConfirmedSoon) {
  script_->Push(std::vector<std::string>{"10.0.0.1:1", "10.0.0.2:1"});
  // The same endpoint spelled another way is not a drop.
  script_->Push(std::vector<std::string>{"ipv4:10.0.0.1:1", "10.0.0.2:1"});
  script_->Push(std::vector<std::string>{"10.0.0.1:1"});
  Start();
  clock_->AdvanceTo(NextLookUp(1));
  Heard same = script_->WaitHeard(2);
  EXPECT_EQ(NextLookUp(2), same.at + absl::Seconds(5));
  clock_->AdvanceToNextTimer();
  Heard dropped = script_->WaitHeard(3);
  EXPECT_THAT(dropped.addresses, ElementsAre("10.0.0.1:1"));
  EXPECT_EQ(NextLookUp(3), dropped.at + absl::Milliseconds(500));
}

TEST_F(PolledEndpointsTest, RefreshesAreRateLimited) {
  script_->Push(std::vector<std::string>{"10.0.0.1:1"});
  Start();
  EXPECT_EQ(NextLookUp(1), t0_ + absl::Seconds(5));
  // Too soon after the first look-up: brought forward to its minimum.
  source_->Refresh();
  const absl::Time deadline = absl::Now() + kWait;
  while (clock_->NextDue() != t0_ + absl::Milliseconds(500) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));  // the thread re-arms, bounded
  }
  EXPECT_EQ(clock_->NextDue(), t0_ + absl::Milliseconds(500));
  clock_->AdvanceToNextTimer();
  EXPECT_EQ(script_->WaitHeard(2).at, t0_ + absl::Milliseconds(500));
  // Later than the minimum: at once.
  EXPECT_EQ(NextLookUp(2), t0_ + absl::Milliseconds(5500));
  clock_->AdvanceBy(absl::Seconds(1));
  source_->Refresh();
  EXPECT_EQ(script_->WaitHeard(3).at, t0_ + absl::Milliseconds(1500));
}

TEST_F(PolledEndpointsTest, StopEndsTheLookUpsAndIsIdempotent) {
  script_->Push(std::vector<std::string>{"10.0.0.1:1"});
  Start();
  NextLookUp(1);
  source_->Stop();
  source_->Stop();
  source_->Refresh();  // after Stop: nothing
  clock_->AdvanceBy(absl::Hours(1));
  EXPECT_EQ(script_->heard(), 1u);
  EXPECT_EQ(script_->timeouts().size(), 1u);
}

}  // namespace
}  // namespace tether
