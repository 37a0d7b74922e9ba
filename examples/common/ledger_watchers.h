// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Two ways to watch a ledger account, and a checker that records what each
// saw. Shared by `ledger_watch`, `rollout_demo` and the benchmarks.
#ifndef TETHER_EXAMPLES_COMMON_LEDGER_WATCHERS_H_
#define TETHER_EXAMPLES_COMMON_LEDGER_WATCHERS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "ledger/ledger.grpc.pb.h"
#include "tether/circuit_breaker.h"
#include "tether/client.h"
#include "tether/reconnecting_stream.h"

namespace tether {
namespace examples {

namespace lv1 = ::tether::examples::ledger::v1;

inline constexpr int kMaxPhases = 8;

// Counters of one watch (or a sum of watches).
struct WatchCounts {
  std::int64_t events = 0;      // new events delivered to the app
  std::int64_t duplicates = 0;  // seq <= last seen
  std::int64_t gaps = 0;        // seq > last seen + 1 (events lost)
  std::int64_t lost = 0;        // sum of the skipped seqs
  std::int64_t bad_events = 0;  // balance != 10 * seq, or wrong account
  std::int64_t errors = 0;      // ends the application saw
  std::int64_t reopens = 0;     // attempts after the first
  // Attempts that ended with an error before their first message: they ran
  // on a connection that was going away (or into an outage).
  std::int64_t dead_attempts = 0;

  void Add(const WatchCounts& o);
};

// One stretch of consecutive events from one replica.
struct Segment {
  std::string replica;
  double start_ms = 0;  // since the recorder's epoch
  double end_ms = 0;
};

// Checks and records the events of one watch. Thread-safe.
class WatchRecorder {
 public:
  // `phase` (optional, may be null) selects the per-phase bucket counters
  // go to; it must outlive the recorder. `epoch` is time zero for segments.
  WatchRecorder(std::string account, absl::Time epoch,
                const std::atomic<int>* phase = nullptr);

  void OnEvent(const lv1::AccountEvent& ev);
  void OnAttemptEnded(bool got_message, const absl::Status& status);
  void OnReopen();
  void OnError(const absl::Status& status);
  // Freezes the stall clock (call when the run ends).
  void Close();

  const std::string& account() const { return account_; }
  WatchCounts total() const;
  WatchCounts phase(int p) const;
  std::vector<Segment> segments() const;
  // Longest time without a new event, in ms (start -> first counts).
  double max_stall_ms() const;
  std::string last_error() const;

 private:
  WatchCounts& BucketLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string account_;
  const absl::Time epoch_;
  const std::atomic<int>* const phase_;
  mutable absl::Mutex mu_;
  WatchCounts total_ ABSL_GUARDED_BY(mu_);
  WatchCounts phases_[kMaxPhases] ABSL_GUARDED_BY(mu_);
  std::uint64_t last_seq_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_progress_ ABSL_GUARDED_BY(mu_);
  double max_stall_ms_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Segment> segments_ ABSL_GUARDED_BY(mu_);
  std::string last_error_ ABSL_GUARDED_BY(mu_);
};

// A watch kept open by tether::ReconnectingStream.
class TetherWatch {
 public:
  // `base` supplies the breaker, backoff, etc.; an observer is added (next
  // to `base.observer`, if any).
  static absl::StatusOr<std::unique_ptr<TetherWatch>> Start(
      Target target, std::shared_ptr<WatchRecorder> recorder,
      ReconnectingStreamOptions base);
  // The same through `client`, with its options (breaker, backoff, logs,
  // metrics under the method name) and the recorder's observer.
  static absl::StatusOr<std::unique_ptr<TetherWatch>> Start(
      Client& client, std::shared_ptr<WatchRecorder> recorder);
  ~TetherWatch();  // Stop()
  void Stop();
  StreamStats stats() const;

 private:
  class Observer;
  using Stream =
      ReconnectingStream<lv1::WatchAccountRequest, lv1::AccountEvent>;
  TetherWatch() = default;
  // The watch's spec, callbacks and observer; `start` makes the stream.
  static absl::StatusOr<std::unique_ptr<TetherWatch>> Make(
      std::shared_ptr<WatchRecorder> recorder,
      const std::function<absl::StatusOr<std::unique_ptr<Stream>>(
          Stream::Spec, std::shared_ptr<StreamObserver>,
          Stream::MessageCallback, Stream::DoneCallback)>& start);
  std::shared_ptr<WatchRecorder> recorder_;
  std::shared_ptr<std::atomic<bool>> stopping_;
  std::unique_ptr<
      ReconnectingStream<lv1::WatchAccountRequest, lv1::AccountEvent>>
      stream_;
};

struct NaiveWatchOptions {
  // Optional breaker asked before every attempt: the first message is a
  // success, and every error end (drains included, as a breaker without
  // drain awareness does) a failure.
  std::shared_ptr<CircuitBreaker> breaker;
  // What the app does after the watch ended with an error: zero ends the
  // watch for good (ledger_watch); > 0 subscribes again after this long,
  // resuming after the last seq seen (rollout_demo). Default 0.
  absl::Duration resubscribe_after = absl::ZeroDuration();
};

// The common hand-written loop, with a blocking stub on one thread: reopen
// at once (after the last seq seen) when the stream ends, and treat a watch
// that ends before its first message as "the ledger is down" (an error).
class NaiveWatch {
 public:
  NaiveWatch(std::shared_ptr<grpc::Channel> channel,
             std::shared_ptr<WatchRecorder> recorder,
             NaiveWatchOptions options);
  ~NaiveWatch();  // Stop()
  void Stop();
  // True once the watch ended for good (error with no resubscribe).
  bool ended() const;

 private:
  void Run();

  std::unique_ptr<lv1::Ledger::Stub> stub_;
  std::shared_ptr<WatchRecorder> recorder_;
  NaiveWatchOptions options_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread thread_;
};

// Formats one JSON object (no newline) with the keys ledger_watch promises.
std::string CountsJson(const std::string& mode, int streams,
                       const WatchCounts& c, double max_stall_ms,
                       std::int64_t migrations);

}  // namespace examples
}  // namespace tether

#endif  // TETHER_EXAMPLES_COMMON_LEDGER_WATCHERS_H_
