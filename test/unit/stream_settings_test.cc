// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "streams/stream_settings.h"

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tether/backoff.h"
#include "tether/circuit_breaker.h"
#include "tether/observer.h"
#include "tether/resync_pool.h"
#include "tether/retry_budget.h"
#include "tether/stream_options.h"
#include "tether/testing/fake_clock.h"

namespace tether {
namespace internal {
namespace {

class SettingsTestObserver : public StreamObserver {};

EndClass SettingsTestClassify(const AttemptEnd& /*end*/) {
  return EndClass::kTransient;
}

TEST(StreamSettingsTest, EqualOptionsShareOneObjectWhileAStreamHoldsIt) {
  // Options no other test uses: no stream elsewhere holds their settings.
  ReconnectingStreamOptions a;
  a.attempt_settle_time = absl::Milliseconds(1357);
  ReconnectingStreamOptions b = a;
  auto first = StreamSettings::Share(a);
  auto second = StreamSettings::Share(b);
  EXPECT_EQ(first.get(), second.get());
  // The defaults are filled in.
  EXPECT_NE(first->clock, nullptr);
  EXPECT_TRUE(static_cast<bool>(first->classifier));
  EXPECT_EQ(first->resync_pool, ResyncPool::Default());
  ASSERT_NE(first->budget.schedule, nullptr);
  EXPECT_EQ(first->budget.limits.max_attempts, a.max_attempts_without_progress);
  EXPECT_FALSE(first->breaker.enabled());

  // Held weakly: once no stream holds them, equal options get new ones.
  const std::weak_ptr<const StreamSettings> gone = first;
  first.reset();
  second.reset();
  EXPECT_TRUE(gone.expired());
  auto third = StreamSettings::Share(a);
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(third->settle_time, absl::Milliseconds(1357));
}

// Every field that a stream reads keeps apart the options that differ in it:
// a stream never runs on another's durations or objects.
TEST(StreamSettingsTest, OptionsThatDifferInAnyFieldDoNotShare) {
  auto clock = std::make_shared<fakes::FakeClock>();
  auto observer = std::make_shared<SettingsTestObserver>();
  auto breaker = CircuitBreaker::Create(CircuitBreakerOptions()).value();
  auto budget = RetryBudget::Create(RetryBudgetOptions()).value();
  ResyncPoolOptions pool_options;
  auto pool = ResyncPool::Create(pool_options).value();
  std::shared_ptr<const BackoffPolicy> backoff =
      ExponentialBackoff::Create(ExponentialBackoffOptions()).value();
  using Change = std::function<void(ReconnectingStreamOptions&)>;
  const std::vector<std::pair<std::string, Change>> changes = {
      {"observer", [&](auto& o) { o.observer = observer; }},
      {"clock", [&](auto& o) { o.clock = clock; }},
      {"classifier", [](auto& o) { o.classifier = SettingsTestClassify; }},
      {"migrate_on_drain", [](auto& o) { o.migrate_on_drain = false; }},
      {"fail_fast_on_open_breaker",
       [](auto& o) { o.fail_fast_on_open_breaker = true; }},
      {"migration_hold_fallback",
       [](auto& o) { o.migration_hold_fallback = false; }},
      {"migration_handoff_timeout",
       [](auto& o) { o.migration_handoff_timeout = absl::Seconds(3); }},
      {"migration_jitter",
       [](auto& o) { o.migration_jitter = absl::Milliseconds(7); }},
      {"resync_jitter",
       [](auto& o) { o.resync_jitter = absl::Milliseconds(7); }},
      {"attempt_settle_time",
       [](auto& o) { o.attempt_settle_time = absl::Seconds(2); }},
      {"stall_timeout", [](auto& o) { o.stall_timeout = absl::Seconds(9); }},
      {"attempt_open_timeout",
       [](auto& o) { o.attempt_open_timeout = absl::Seconds(4); }},
      {"max_time_without_progress",
       [](auto& o) { o.max_time_without_progress = absl::Minutes(3); }},
      {"recovery_jitter",
       [](auto& o) { o.recovery_jitter = absl::Milliseconds(1); }},
      {"resync_pool", [&](auto& o) { o.resync_pool = pool; }},
      {"breaker", [&](auto& o) { o.breaker = breaker; }},
      {"backoff", [&](auto& o) { o.backoff = backoff; }},
      {"max_attempts_without_progress",
       [](auto& o) { o.max_attempts_without_progress = 3; }},
      {"reopen_after_progress_jitter",
       [](auto& o) { o.reopen_after_progress_jitter = absl::Milliseconds(9); }},
      {"retry_budget", [&](auto& o) { o.retry_budget = budget; }},
  };
  const ReconnectingStreamOptions base;
  const auto base_settings = StreamSettings::Share(base);
  for (const auto& [name, change] : changes) {
    SCOPED_TRACE(name);
    ReconnectingStreamOptions changed = base;
    change(changed);
    const auto settings = StreamSettings::Share(changed);
    EXPECT_NE(settings.get(), base_settings.get());
    EXPECT_FALSE(settings->SameAs(*base_settings));
    // ... and the changed options share among themselves.
    EXPECT_EQ(StreamSettings::Share(changed).get(), settings.get());
  }
}

TEST(StreamSettingsTest, AClassifierThatIsNotAPlainFunctionIsNeverShared) {
  ReconnectingStreamOptions o;
  o.classifier = [](const AttemptEnd& end) { return DefaultClassify(end); };
  auto a = StreamSettings::Share(o);
  auto b = StreamSettings::Share(o);
  EXPECT_NE(a.get(), b.get());
  EXPECT_FALSE(a->SameAs(*b));
}

TEST(StreamSettingsTest, TheCacheFindsAnyOfTheLastOptionSets) {
  // Streams of several kinds opened in turn still share within a kind.
  std::vector<ReconnectingStreamOptions> kinds(StreamSettings::kCached);
  std::vector<std::shared_ptr<const StreamSettings>> held;
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    kinds[i].attempt_settle_time = absl::Milliseconds(100 + i);
    held.push_back(StreamSettings::Share(kinds[i]));
  }
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    EXPECT_EQ(StreamSettings::Share(kinds[i]).get(), held[i].get()) << i;
  }
}

TEST(StreamSettingsTest, ThreadsSharingOptionsGetOneObject) {
  ReconnectingStreamOptions o;
  o.attempt_settle_time = absl::Milliseconds(1234);
  auto first = StreamSettings::Share(o);
  std::vector<const StreamSettings*> got(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) got[t] = StreamSettings::Share(o).get();
    });
  }
  for (auto& t : threads) t.join();
  for (const StreamSettings* g : got) EXPECT_EQ(g, first.get());
}

}  // namespace
}  // namespace internal
}  // namespace tether
