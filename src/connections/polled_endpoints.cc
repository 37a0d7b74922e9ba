// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The polling engine shared by `ResolvedEndpoints` and `PolledEndpoints`: a
// thread that looks the set up on the schedule of `ResolveSchedule`.
#include "connections/polled_endpoints.h"

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "connections/pool_core.h"
#include "connections/resolve_schedule.h"
#include "tether/internal/mutex.h"
#include "time/system_clock.h"

namespace tether {
namespace internal {
namespace {

// The identity of an endpoint, for telling which addresses an answer
// dropped (the address itself when it has no key; the pool rejects it).
std::string KeyOf(const Endpoint& e) {
  absl::StatusOr<std::string> key = EndpointKey(e.address);
  return key.ok() ? *std::move(key) : e.address;
}

// Calls a look-up on its own thread (see `NewPolledSource`).
class PolledSource final : public EndpointSource,
                           public std::enable_shared_from_this<PolledSource> {
 public:
  PolledSource(PolledLookup look_up, ResolverOptions options,
               std::string label)
      : look_up_(std::move(look_up)),
        label_(std::move(label)),
        options_(std::move(options)),
        clock_(options_.clock),
        schedule_(options_) {
    if (clock_ == nullptr) {
      // SystemClock() is never destroyed: hold it without owning it.
      clock_ = internal::SharedSystemClock();
    }
  }

  ~PolledSource() override {
    // Only reached once the thread has left Loop (it holds a reference),
    // and after Stop joined it, or detached it when Stop ran on it.
    if (thread_.joinable()) thread_.detach();
  }

  std::string Label() const override { return label_; }

  void Start(std::shared_ptr<Sink> sink) override {
    MutexLock lock(&mu_);
    if (started_) return;
    started_ = true;
    sink_ = std::move(sink);
    // Loop takes mu_ first: it sees thread_ assigned.
    thread_ = std::thread([self = shared_from_this()] { self->Loop(); });
  }

  void Refresh() override {
    MutexLock lock(&mu_);
    if (stopped_) return;
    const absl::Time due = schedule_.Refreshed(clock_->Now(), due_);
    if (due < due_) {
      due_ = due;
      wake_.Signal();
    }
  }

  void Stop() override {
    bool on_loop;
    {
      MutexLock lock(&mu_);
      if (stopped_) return;
      stopped_ = true;
      if (timer_ != 0) clock_->Cancel(timer_);
      timer_ = 0;
      wake_.Signal();
      // The loop thread (a sink call dropped the pool), or a helper it
      // waits for (TellDraining's): joining would wait for ourselves.
      on_loop = std::this_thread::get_id() == loop_thread_ ||
                OnDrainHelperThread();
      if (!started_) return;
    }
    if (on_loop) {
      thread_.detach();  // a sink call dropped the pool: ends on its own
    } else {
      thread_.join();
    }
  }

 private:
  void Loop() {
    std::shared_ptr<Sink> sink;
    {
      MutexLock lock(&mu_);
      loop_thread_ = std::this_thread::get_id();
      sink = sink_;
    }
    for (;;) {
      {
        MutexLock lock(&mu_);
        // Wait until due (a timer on the clock wakes us), refreshed, or
        // stopped.
        for (;;) {
          if (stopped_) return;
          const absl::Time now = clock_->Now();
          if (now >= due_) break;
          ArmLocked(due_ - now);
          wake_.Wait(&mu_);
        }
        schedule_.Started(clock_->Now());
        due_ = absl::InfiniteFuture();
      }
      absl::StatusOr<PolledAnswer> answer = look_up_(options_.query_timeout);
      if (answer.ok() && answer->endpoints.empty()) {
        answer = absl::NotFoundError("the look-up answered no endpoint");
      }
      {
        MutexLock lock(&mu_);
        if (stopped_) return;
        const absl::Time now = clock_->Now();
        if (!answer.ok()) {
          due_ = std::min(due_, schedule_.Failed(now));
        } else {
          std::set<std::string> keys;
          for (const Endpoint& e : answer->endpoints) keys.insert(KeyOf(e));
          bool dropped = false;
          for (const std::string& k : last_) dropped |= keys.count(k) == 0;
          last_ = std::move(keys);
          due_ = std::min(
              due_, schedule_.Answered(now, answer->shortest_ttl, dropped));
        }
      }
      // The sink may call Refresh (mu_) or drop the pool (Stop).
      if (answer.ok()) {
        sink->OnEndpoints(std::move(answer->endpoints));
      } else {
        sink->OnEndpointsError(answer.status());
      }
    }
  }

  // A clock timer that wakes the loop after `delay`.
  void ArmLocked(absl::Duration delay) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (timer_ != 0) clock_->Cancel(timer_);
    std::weak_ptr<PolledSource> weak = weak_from_this();
    timer_ = clock_->RunAfter(delay, [weak] {
      if (auto self = weak.lock()) {
        MutexLock lock(&self->mu_);
        self->wake_.Signal();
      }
    });
  }

  const PolledLookup look_up_;
  const std::string label_;
  const ResolverOptions options_;
  std::shared_ptr<Clock> clock_;
  // Assigned once in Start (under mu_); then used only by Stop and the
  // destructor.
  std::thread thread_;

  Mutex mu_;
  CondVar wake_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::thread::id loop_thread_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Sink> sink_ ABSL_GUARDED_BY(mu_);
  ResolveSchedule schedule_ ABSL_GUARDED_BY(mu_);
  // The next look-up; the first at once.
  absl::Time due_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  Clock::TimerId timer_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> last_ ABSL_GUARDED_BY(mu_);  // the last answer's keys
};

}  // namespace

std::shared_ptr<EndpointSource> NewPolledSource(PolledLookup look_up,
                                                ResolverOptions options,
                                                std::string label) {
  return std::make_shared<PolledSource>(std::move(look_up),
                                        std::move(options), std::move(label));
}

}  // namespace internal

absl::StatusOr<std::shared_ptr<EndpointSource>> PolledEndpoints(
    EndpointLookup look_up, ResolverOptions options) {
  if (!look_up) {
    return absl::InvalidArgumentError(
        "PolledEndpoints look_up must not be null");
  }
  absl::Status valid = Validate(options);
  if (!valid.ok()) return valid;
  return internal::NewPolledSource(
      [look_up = std::move(look_up)](
          absl::Duration timeout) -> absl::StatusOr<internal::PolledAnswer> {
        absl::StatusOr<std::vector<Endpoint>> endpoints = look_up(timeout);
        if (!endpoints.ok()) return endpoints.status();
        internal::PolledAnswer answer;
        answer.endpoints = *std::move(endpoints);
        return answer;
      },
      std::move(options));
}

}  // namespace tether
