// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "streams/stream_settings.h"

#include <array>
#include <utility>

#include "tether/backoff.h"
#include "tether/internal/mutex.h"
#include "time/system_clock.h"

namespace tether {
namespace internal {
namespace {

// The settings made last, held weakly: `Share`'s cache.
class RecentSettings {
 public:
  std::shared_ptr<const StreamSettings> Share(StreamSettings made) {
    // The references taken below are dropped after the lock: when the last
    // stream holding some settings ended meanwhile, the reference here is
    // the last, and dropping it runs the observer's destructor (app code).
    std::array<std::shared_ptr<const StreamSettings>, StreamSettings::kCached>
        held;
    MutexLock lock(&mu_);
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      held[i] = slots_[i].lock();
      if (held[i] && held[i]->SameAs(made)) return held[i];
    }
    auto fresh = std::make_shared<const StreamSettings>(std::move(made));
    slots_[next_] = fresh;
    next_ = (next_ + 1) % slots_.size();
    return fresh;
  }

 private:
  Mutex mu_;
  std::array<std::weak_ptr<const StreamSettings>, StreamSettings::kCached>
      slots_ ABSL_GUARDED_BY(mu_);
  std::size_t next_ ABSL_GUARDED_BY(mu_) = 0;
};

const std::shared_ptr<const BackoffPolicy>& DefaultSchedule() {
  // One default schedule for every stream (a stream clones it at its first
  // failed attempt).
  static const auto* const kDefault = new std::shared_ptr<const BackoffPolicy>(
      ExponentialBackoff::Create(ExponentialBackoffOptions()).value());
  return *kDefault;
}

bool SameClassifier(const Classifier& a, const Classifier& b) {
  using Plain = EndClass (*)(const AttemptEnd&);
  const Plain* pa = a.target<Plain>();
  const Plain* pb = b.target<Plain>();
  return pa != nullptr && pb != nullptr && *pa == *pb;
}

}  // namespace

#if defined(__GLIBCXX__) && defined(__x86_64__)
// A field added to StreamSettings must join `SameAs` (and the test's list of
// changes), or streams with different options would share it.
static_assert(sizeof(StreamSettings) == 320,
              "a new StreamSettings field: compare it in SameAs");
#endif

StreamSettings StreamSettings::From(const ReconnectingStreamOptions& options) {
  StreamSettings s;
  s.observer = options.observer;
  s.clock = options.clock ? options.clock : SharedSystemClock();
  s.classifier = options.classifier ? options.classifier : DefaultClassify;
  s.migrate_on_drain = options.migrate_on_drain;
  s.fail_fast_on_open_breaker = options.fail_fast_on_open_breaker;
  s.hold_fallback = options.migration_hold_fallback;
  s.handoff_timeout = options.migration_handoff_timeout;
  s.migration_jitter = options.migration_jitter;
  s.resync_jitter = options.resync_jitter;
  s.settle_time = options.attempt_settle_time;
  s.stall_timeout = options.stall_timeout;
  s.open_timeout = options.attempt_open_timeout;
  s.max_time = options.max_time_without_progress;
  s.recovery_jitter = options.recovery_jitter;
  s.resync_pool =
      options.resync_pool ? options.resync_pool : ResyncPool::Default();
  s.breaker = BreakerGate(options.breaker, s.clock);
  s.budget.schedule = options.backoff ? options.backoff : DefaultSchedule();
  s.budget.limits = ReopenBudget::Limits{options.max_attempts_without_progress,
                                         options.max_time_without_progress,
                                         options.reopen_after_progress_jitter};
  s.retry_budget = options.retry_budget;
  return s;
}

bool StreamSettings::SameAs(const StreamSettings& o) const {
  return observer == o.observer && clock == o.clock &&
         SameClassifier(classifier, o.classifier) &&
         migrate_on_drain == o.migrate_on_drain &&
         fail_fast_on_open_breaker == o.fail_fast_on_open_breaker &&
         hold_fallback == o.hold_fallback &&
         handoff_timeout == o.handoff_timeout &&
         migration_jitter == o.migration_jitter &&
         resync_jitter == o.resync_jitter && settle_time == o.settle_time &&
         stall_timeout == o.stall_timeout && open_timeout == o.open_timeout &&
         max_time == o.max_time && recovery_jitter == o.recovery_jitter &&
         resync_pool == o.resync_pool && breaker.SameAs(o.breaker) &&
         budget.schedule == o.budget.schedule &&
         budget.limits.max_attempts == o.budget.limits.max_attempts &&
         budget.limits.max_time == o.budget.limits.max_time &&
         budget.limits.progress_jitter == o.budget.limits.progress_jitter &&
         retry_budget == o.retry_budget;
}

std::shared_ptr<const StreamSettings> StreamSettings::Share(
    const ReconnectingStreamOptions& options) {
  static auto* const recent = new RecentSettings();
  return recent->Share(From(options));
}

}  // namespace internal
}  // namespace tether
