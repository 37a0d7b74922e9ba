// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Fuzzes `ReconnectingStream` through its public API, over the fakes:
// `FakeConnectionSource`, `FakeTransport` (asynchronous cancel, as gRPC) and
// `FakeClock`, optionally guarded by a real `CircuitBreaker` on the same
// clock. The input is a script: a few bytes of options, then steps (server
// messages with any sequence number, attempt ends with any status code,
// drains, failed picks, cancel completions, time, the app's cancel and
// destruction), and re-entrant actions run from inside the stream's own
// callbacks. After every step the harness checks the stream's contract
// (see `CheckInvariants`); a violation prints what broke and aborts.
//
// Single-threaded and deterministic: every callback runs on the thread that
// performs the step, every seed is fixed.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "test/fuzz/fuzz_input.h"
#include "tether/circuit_breaker.h"
#include "tether/observer.h"
#include "tether/reconnecting_stream.h"
#include "tether/stream_options.h"
#include "tether/testing/fake_clock.h"
#include "tether/testing/fake_transport.h"

namespace tether {
namespace fuzz {
namespace {

struct Req {
  std::string key;
  std::uint64_t after = 0;
};
struct Resp {
  bool has_seq = true;
  std::uint64_t seq = 0;
  // Positions mode (position_of): a batch of items seq..last (last > seq),
  // or a progress notice at seq. `!has_seq` is a control message (None).
  std::uint64_t last = 0;
  bool progress = false;
};

using Stream = ReconnectingStream<Req, Resp>;
using Transport = fakes::FakeTransport<Req, Resp>;

// What a callback does when the script armed a re-entrant action for it.
enum class Reentry { kNone, kStats, kCancel, kDestroy };
// Where the armed action runs.
enum class Site { kOnMessage, kOnDone, kObserver, kBreakerObserver, kCount };

const absl::StatusCode kCodes[] = {
    absl::StatusCode::kOk,
    absl::StatusCode::kCancelled,
    absl::StatusCode::kUnknown,
    absl::StatusCode::kInvalidArgument,
    absl::StatusCode::kDeadlineExceeded,
    absl::StatusCode::kNotFound,
    absl::StatusCode::kResourceExhausted,
    absl::StatusCode::kFailedPrecondition,
    absl::StatusCode::kAborted,
    absl::StatusCode::kInternal,
    absl::StatusCode::kUnavailable,
    absl::StatusCode::kDataLoss,
    absl::StatusCode::kUnauthenticated,
};

// TETHER_FUZZ_TRACE=1 prints every step and callback to stderr, to read
// the event order of a failing input.
bool Tracing() {
  static const bool on = [] {
    const char* v = std::getenv("TETHER_FUZZ_TRACE");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}
void Trace(const std::string& line) {
  if (Tracing()) std::fprintf(stderr, "  %s\n", line.c_str());
}

class Harness;

class Observer final : public StreamObserver {
 public:
  explicit Observer(Harness* h) : h_(h) {}
  void OnAttemptStarted(const AttemptInfo& info) override;
  void OnFirstMessage(const AttemptInfo&, absl::Duration) override;
  void OnAttemptEnded(const AttemptInfo& info, const absl::Status& status,
                      EndClass classified, bool by_client) override;
  void OnDuplicateDropped(std::uint64_t, std::uint64_t) override;
  void OnGap(std::uint64_t, std::uint64_t) override;
  void OnBackoff(absl::Duration, const absl::Status&) override;
  void OnGaveUp(const absl::Status&) override;
  void OnConnectionDraining(std::uint64_t, absl::string_view) override;

 private:
  Harness* const h_;
};

class BreakerWatcher final : public BreakerObserver {
 public:
  explicit BreakerWatcher(Harness* h) : h_(h) {}
  void OnStateChange(absl::string_view, BreakerState, BreakerState,
                     const BreakerCounts&) override;
  void OnRecorded(absl::string_view, Outcome, const BreakerCounts&) override;

 private:
  Harness* const h_;
};

class Harness {
 public:
  explicit Harness(FuzzInput& in) : in_(in) {}

  void Run() {
    if (!Setup()) return;
    int steps = 0;
    while (!in_.empty() && steps++ < 400) {
      Step();
      CheckInvariants("after step");
    }
    Drain();
  }

  // --- Callbacks (stream, observer, breaker) --------------------------------

  void OnMessage(Resp&& r) {
    EnterCallback("on_message");
    Trace(absl::StrCat("  cb on_message seq ", r.seq));
    if (done_count_ > 0) Fail("on_message after on_done");
    if (positions_ && !r.has_seq) {  // a control message: no position
      Reenter(Site::kOnMessage);
      return;
    }
    if (r.progress) Fail("delivered a progress notice (deliver_progress off)");
    if (!r.has_seq) Fail("delivered a message without a sequence number");
    if (has_last_ && r.seq <= last_) {
      Fail(absl::StrCat("delivered seq ", r.seq, " after seq ", last_,
                        " (positions must strictly increase)"));
    }
    if (r.last != 0 && r.last <= r.seq) {
      Fail(absl::StrCat("delivered a batch ", r.seq, "..", r.last,
                        " trimmed past its end"));
    }
    has_last_ = true;
    last_ = std::max(r.seq, r.last);
    reopens_since_progress_ = 0;
    migrations_since_progress_ = 0;
    drains_since_progress_ = 0;
    Reenter(Site::kOnMessage);
  }

  void OnDone(const absl::Status& s) {
    EnterCallback("on_done");
    Trace(absl::StrCat("  cb on_done ", s.ToString()));
    ++done_count_;
    if (done_count_ > 1) Fail("on_done ran twice");
    final_ = s;
    Reenter(Site::kOnDone);
  }

  void OnObserverEvent(const char* what) {
    EnterCallback(what);
    Trace(absl::StrCat("  cb observer ", what));
    Reenter(Site::kObserver);
  }

  void OnAttemptStarted(const AttemptInfo& info) {
    OnObserverEvent("OnAttemptStarted");
    Trace(absl::StrCat("    attempt ", info.attempt, " on connection ",
                       info.connection_id, " reason ",
                       AttemptReasonName(info.reason)));
    started_at_[info.attempt] = clock_->Now();
    if (info.reason == AttemptReason::kReopen) ++reopens_since_progress_;
    if (info.reason == AttemptReason::kMigration) {
      ++migrations_since_progress_;
    }
    // The budget allows `max_attempts` attempts in a row without progress:
    // after the first (or after the attempt that made progress, whose
    // reopen is free) at most `max_attempts - 1` reopens spend it, and one
    // more may follow an attempt that progressed before it failed.
    if (reopens_since_progress_ > options_.max_attempts_without_progress) {
      Fail(absl::StrCat(reopens_since_progress_,
                        " reopens without progress; budget is ",
                        options_.max_attempts_without_progress));
    }
    // A migration starts on a drain notice, or after a failed replacement
    // (which spends the budget).
    if (migrations_since_progress_ >
        drains_since_progress_ + options_.max_attempts_without_progress) {
      Fail(absl::StrCat(migrations_since_progress_,
                        " migrations without progress after ",
                        drains_since_progress_, " drain notices; budget ",
                        options_.max_attempts_without_progress));
    }
  }

  // An attempt that stayed open `attempt_settle_time` (every fake connection
  // is connected) was healthy: the stream's failing period ended then, so
  // the budget starts over (a quiet stream is not a failing one).
  void OnAttemptEnded(const AttemptInfo& info) {
    OnObserverEvent("OnAttemptEnded");
    auto it = started_at_.find(info.attempt);
    if (it == started_at_.end()) return;
    if (options_.stall_timeout == absl::ZeroDuration() &&
        clock_->Now() - it->second >= options_.attempt_settle_time) {
      reopens_since_progress_ = 0;
      migrations_since_progress_ = 0;
      drains_since_progress_ = 0;
    }
    started_at_.erase(it);
  }

  void OnConnectionDrainingSeen() {
    OnObserverEvent("OnConnectionDraining");
    ++drains_since_progress_;
  }

  void OnBreakerEvent() {
    // The breaker outlives the stream; its callbacks may come at any time.
    Reenter(Site::kBreakerObserver);
  }

 private:
  // --- Setup ---------------------------------------------------------------

  bool Setup() {
    clock_ = std::make_shared<fakes::FakeClock>();
    source_ = std::make_shared<fakes::FakeConnectionSource>();
    transport_ = std::make_shared<Transport>(source_, clock_);
    const std::uint8_t flags = in_.Byte();
    transport_->set_cancel_mode((flags & 1)
                                    ? fakes::CancelMode::kAsync
                                    : fakes::CancelMode::kAsyncManual);
    transport_->set_deliver_after_cancel((flags & 2) != 0);
    options_.migrate_on_drain = (flags & 4) == 0;
    options_.gap_policy =
        (flags & 8) ? GapPolicy::kFail : GapPolicy::kDeliverAndReport;
    const bool with_breaker = (flags & 16) != 0;
    const bool initial_seq = (flags & 32) != 0;
    options_.fail_fast_on_open_breaker = (flags & 64) != 0;

    options_.clock = clock_;
    options_.random_seed = 1;
    options_.max_attempts_without_progress = 1 + in_.Byte() % 6;
    const absl::Duration times[] = {absl::InfiniteDuration(), absl::Seconds(1),
                                    absl::Seconds(30), absl::Minutes(2)};
    options_.max_time_without_progress = times[in_.Byte() % 4];
    const std::uint8_t jitters = in_.Byte();
    options_.reopen_after_progress_jitter =
        (jitters & 1) ? absl::Milliseconds(5) : absl::ZeroDuration();
    options_.migration_jitter =
        (jitters & 2) ? absl::Milliseconds(10) : absl::ZeroDuration();
    options_.migration_handoff_timeout =
        (jitters & 4) ? absl::Milliseconds(100) : absl::Seconds(2);
    options_.max_buffered_messages = 1 + in_.Byte() % 4;
    // Unannounced faults: stall detection and a short open deadline.
    options_.stall_timeout =
        (flags & 128) ? absl::Seconds(1) : absl::ZeroDuration();
    options_.attempt_open_timeout =
        (jitters & 8) ? absl::Seconds(2) : absl::Seconds(10);
    options_.recovery_jitter =
        (jitters & 16) ? absl::ZeroDuration() : absl::Milliseconds(50);
    // General positions: batches, progress notices, control messages;
    // sparse or dense; with or without the trim hook.
    // (Bits 6-7 = 01, so that older corpus and regression inputs keep
    // their meaning.)
    positions_ = (jitters & 0xC0) == 0x40;
    // Bits 6-7 = 10: a move's old attempt delivers on (no hold).
    options_.migration_hold_fallback = (jitters & 0xC0) != 0x80;
    sparse_ = (jitters & 32) != 0;
    trim_ = !sparse_ || (jitters & 8) == 0;
    options_.observer = std::make_shared<Observer>(this);
    Trace(absl::StrCat("setup: flags ", flags, " budget ",
                       options_.max_attempts_without_progress, " time ",
                       absl::FormatDuration(options_.max_time_without_progress),
                       " buffer ", options_.max_buffered_messages));

    if (with_breaker) {
      CircuitBreakerOptions b;
      b.name = "fuzz";
      b.window_size = 4;
      b.minimum_calls = 2;
      b.consecutive_failures = 2;
      b.break_duration = absl::Seconds(1);
      b.max_break_duration = absl::Seconds(8);
      b.half_open_permits = 1 + in_.Byte() % 2;
      b.observer = std::make_shared<BreakerWatcher>(this);
      auto made = CircuitBreaker::Create(b, clock_, /*seed=*/7);
      if (!made.ok()) Fail(made.status().ToString());
      breaker_ = *std::move(made);
      options_.breaker = breaker_;
    }

    Stream::Spec spec;
    spec.request = Req{"k", 0};
    spec.attempt_factory = transport_;
    if (positions_) {
      spec.position_of = [](const Resp& r) {
        if (!r.has_seq) return Position::None();
        if (r.progress) return Position::Progress(r.seq);
        if (r.last > r.seq) return Position::Items(r.seq, r.last);
        return Position::Item(r.seq);
      };
      spec.spacing = sparse_ ? PositionSpacing::kSparse : PositionSpacing::kDense;
      if (trim_) {
        spec.trim_delivered = [](Resp& r, std::uint64_t last) {
          r.seq = last + 1;  // the batch holds every position seq..last
          if (r.last == r.seq) r.last = 0;
        };
      }
    } else {
      spec.sequence_of = [](const Resp& r) -> absl::optional<std::uint64_t> {
        if (!r.has_seq) return absl::nullopt;
        return r.seq;
      };
    }
    spec.resume_after = [](Req& r, std::uint64_t seq) { r.after = seq; };
    if (initial_seq) {
      spec.initial_last_seq = in_.Byte() % 4;
      has_last_ = true;
      last_ = *spec.initial_last_seq;
    }
    auto made = Stream::Start(
        source_, std::move(spec), options_,
        [this](Resp&& r) { OnMessage(std::move(r)); },
        [this](const absl::Status& s) { OnDone(s); });
    if (!made.ok()) Fail(absl::StrCat("Start: ", made.status().ToString()));
    stream_ = *std::move(made);
    CheckInvariants("after Start");
    return true;
  }

  // --- Steps ---------------------------------------------------------------

  std::vector<std::shared_ptr<Transport::FakeAttempt>> LiveAttempts() {
    std::vector<std::shared_ptr<Transport::FakeAttempt>> live;
    for (std::size_t i = 0; i < transport_->attempt_count(); ++i) {
      auto a = transport_->attempt(i);
      if (!a->done()) live.push_back(a);
    }
    return live;
  }

  // A live attempt whose server has not sent its final status yet (gRPC
  // never sends anything after it; the fake would fail the run).
  std::shared_ptr<Transport::FakeAttempt> PickServing() {
    std::vector<std::shared_ptr<Transport::FakeAttempt>> serving;
    for (auto& a : LiveAttempts()) {
      if (!finished_.count(a->index())) serving.push_back(a);
    }
    if (serving.empty()) return nullptr;
    return serving[in_.Byte() % serving.size()];
  }

  void Step() {
    const std::uint8_t op = in_.Byte() % 16;
    switch (op) {
      case 0:
      case 1:
      case 2: {  // the server sends a message on a live attempt
        auto a = PickServing();
        if (!a) return;
        Resp r;
        std::uint64_t& sent = sent_[a->index()];
        const std::uint8_t how = in_.Byte();
        switch (how % 8) {
          case 0:
          case 1:
          case 2:
            r.seq = sent + 1;
            break;  // in order
          case 3:
            r.seq = sent;
            break;  // duplicate
          case 4:
            r.seq = sent + 2 + how / 8 % 4;
            break;  // gap
          case 5:
            r.seq = sent > 0 ? sent - 1 : 0;
            break;  // backwards
          case 6:
            r.has_seq = false;
            break;  // missing seq
          case 7:
            r.seq = a->request().after + 1 + how / 8 % 3;
            break;
        }
        if (positions_ && r.has_seq) {
          const std::uint8_t kb = in_.Byte();
          const int kind = kb % 4;
          if (kind == 1) {  // a batch
            r.last = r.seq + 1 + kb / 4 % 3;
          } else if (kind == 2) {  // a progress notice
            r.progress = true;
            // The stream may count it as progress: so does the checker
            // (laxer, never a false alarm).
            reopens_since_progress_ = 0;
            migrations_since_progress_ = 0;
            drains_since_progress_ = 0;
          }
        }
        if (r.has_seq) sent = std::max(r.seq, r.last);
        Trace(absl::StrCat(
            "step: attempt ", a->index(), " sends ",
            r.has_seq ? absl::StrCat("seq ", r.seq) : std::string("no seq")));
        a->Send(r);
        return;
      }
      case 3: {  // the server ends a live attempt with any status
        auto a = PickServing();
        if (!a) return;
        finished_.insert(a->index());
        const absl::StatusCode code =
            kCodes[in_.Byte() % (sizeof(kCodes) / sizeof(kCodes[0]))];
        Trace(absl::StrCat("step: attempt ", a->index(), " finishes ",
                           absl::StatusCodeToString(code)));
        a->Finish(code == absl::StatusCode::kOk
                      ? absl::OkStatus()
                      : absl::Status(code, "fuzz: server ended the call"));
        return;
      }
      case 4: {  // a connection drains (GOAWAY), also the replacement's
        const std::uint64_t last = source_->current();
        const std::uint64_t id = 1 + in_.Byte() % (last + 1);
        Trace(absl::StrCat("step: connection ", id, " drains"));
        source_->Drain(id, (in_.Byte() & 1) ? "GOAWAY" : "health NOT_SERVING");
        return;
      }
      case 5: {  // the source: a pick fails, a connection (dis)connects,
                 // or the dependency recovers
        const std::uint8_t b = in_.Byte();
        if (b < 128) {
          Trace("step: the next pick fails");
          source_->FailNextPick((b & 1) ? fakes::ConnectFailure()
                                        : absl::UnavailableError("fuzz: no pick"));
        } else if (b < 224) {
          const std::uint64_t id = 1 + b % 4;
          const bool connected = (b & 4) != 0;
          Trace(absl::StrCat("step: connection ", id,
                             connected ? " connects" : " is not connected"));
          source_->SetConnected(id, connected);
        } else {
          Trace("step: the dependency recovers");
          source_->Recover();
        }
        return;
      }
      case 6: {  // one pending cancel completes
        std::vector<std::shared_ptr<Transport::FakeAttempt>> pending;
        for (auto& a : LiveAttempts()) {
          if (a->cancel_pending()) pending.push_back(a);
        }
        if (pending.empty()) return;
        auto& a = pending[in_.Byte() % pending.size()];
        Trace(absl::StrCat("step: attempt ", a->index(), " cancel completes"));
        a->CompleteCancel();
        return;
      }
      case 7:
        Trace("step: all pending cancels complete");
        transport_->CompletePendingCancels();
        return;
      case 8: {  // a little time passes
        const absl::Duration small[] = {
            absl::ZeroDuration(), absl::Milliseconds(1), absl::Milliseconds(10),
            absl::Milliseconds(100)};
        const absl::Duration d = small[in_.Byte() % 4];
        Trace(absl::StrCat("step: advance ", absl::FormatDuration(d)));
        clock_->AdvanceBy(d);
        return;
      }
      case 9: {  // a lot of time passes
        const std::uint8_t b = in_.Byte() % 5;
        if (b == 4) {
          Trace("step: advance to the next timer");
          clock_->AdvanceToNextTimer();
          return;
        }
        const absl::Duration large[] = {absl::Seconds(1), absl::Seconds(5),
                                        absl::Seconds(30), absl::Minutes(3)};
        Trace(absl::StrCat("step: advance ", absl::FormatDuration(large[b])));
        clock_->AdvanceBy(large[b]);
        return;
      }
      case 10:
        Trace("step: app Cancel()");
        AppCancel();
        return;
      case 11:
        if (in_.Byte() % 4 == 0) {  // rarer
          Trace("step: app destroys the stream");
          DestroyStream();
        }
        return;
      case 12:
      case 13: {  // arm a re-entrant action
        const std::uint8_t b = in_.Byte();
        const auto site = static_cast<Site>(b % static_cast<int>(Site::kCount));
        const auto action = static_cast<Reentry>(1 + (b / 8) % 3);
        Trace(absl::StrCat(
            "step: arm action ", static_cast<int>(action),
            " (1 stats, 2 cancel, 3 destroy) at site ", static_cast<int>(site),
            " (0 on_message, 1 on_done, 2 observer, 3 breaker)"));
        armed_[static_cast<int>(site)] = action;
        return;
      }
      case 14: {  // the breaker is switched
        if (!breaker_) return;
        const std::uint8_t b = in_.Byte() % 4;
        Trace(absl::StrCat("step: breaker switch ", b,
                           " (0 force open, 1 release, 2 disable, 3 enable)"));
        if (b < 2)
          breaker_->SetForcedOpen(b == 0);
        else
          breaker_->SetDisabled(b == 2);
        return;
      }
      case 15: {  // the app reads its stats (from outside any callback)
        if (stream_) (void)stream_->stats();
        return;
      }
    }
  }

  // Runs (once) the action armed for `site`.
  void Reenter(Site site) {
    Reentry& slot = armed_[static_cast<int>(site)];
    const Reentry action = slot;
    slot = Reentry::kNone;
    if (!stream_ || in_destroy_) return;
    if (action != Reentry::kNone) {
      Trace(absl::StrCat("    re-entrant action ", static_cast<int>(action)));
    }
    switch (action) {
      case Reentry::kNone:
        return;
      case Reentry::kStats:
        (void)stream_->stats();
        return;
      case Reentry::kCancel:
        AppCancel();
        return;
      case Reentry::kDestroy:
        DestroyStream();
        return;
    }
  }

  void AppCancel() {
    if (!stream_) return;
    stream_->Cancel();
  }

  void DestroyStream() {
    if (!stream_ || in_destroy_) return;
    in_destroy_ = true;
    // Move out first: a callback running during the destructor must not
    // see a half-destroyed stream through `stream_`.
    std::unique_ptr<Stream> s = std::move(stream_);
    s.reset();
    in_destroy_ = false;
    destroyed_ = true;
  }

  // --- Invariants ------------------------------------------------------------

  void EnterCallback(const char* what) {
    // (d) Once the destructor has returned, no callback runs.
    if (destroyed_) {
      Fail(absl::StrCat(what, " ran after the stream's destructor returned"));
    }
  }

  void CheckGtestFailures() {
    // The fakes report sequences gRPC never produces with ADD_FAILURE.
    if (failures_.size() > 0) {
      for (int i = 0; i < failures_.size(); ++i) {
        std::fprintf(stderr, "fake: %s\n",
                     failures_.GetTestPartResult(i).message());
      }
      Fail("a fake reported a failure");
    }
  }

  void CheckInvariants(const char* when) {
    CheckGtestFailures();
    if (!stream_ || done_count_ > 0) return;
    // (a) A stream that has not ended has something that will move it on:
    // a live attempt (a pending cancel counts: its OnDone will come) or a
    // timer.
    if (LiveAttempts().empty() && clock_->PendingTimers() == 0) {
      Fail(absl::StrCat("stuck ", when,
                        ": not done, no live attempt, no timer pending"));
    }
  }

  // The end of every script: cancel, let every cancel complete, run the
  // clock out; then every pick is released and on_done has run.
  void Drain() {
    AppCancel();
    for (int i = 0; i < 1000; ++i) {
      const std::size_t completed = transport_->CompletePendingCancels();
      if (!clock_->AdvanceToNextTimer() && completed == 0) break;
    }
    CheckGtestFailures();
    // (e) Every pick was released.
    for (std::uint64_t id = 1; id <= source_->current() + 1; ++id) {
      if (source_->held(id) != 0) {
        Fail(absl::StrCat("connection ", id, " still has ", source_->held(id),
                          " pick(s) after the stream ended"));
      }
    }
    for (auto& a : LiveAttempts()) {
      Fail(absl::StrCat("attempt ", a->index(),
                        " never ended (cancelled: ", a->cancelled(), ")"));
    }
    // (c) on_done exactly once (unless the stream was destroyed first).
    if (!destroyed_ && done_count_ != 1) {
      Fail(absl::StrCat("on_done ran ", done_count_,
                        " times by the end of the script"));
    }
    DestroyStream();
    breaker_.reset();
  }

  [[noreturn]] void Fail(const std::string& what) {
    std::fprintf(stderr, "stream_fuzzer: invariant violated: %s\n",
                 what.c_str());
    std::fflush(stderr);
    std::abort();
  }

  FuzzInput& in_;
  // Collects the fakes' ADD_FAILURE reports of this run.
  ::testing::TestPartResultArray failures_;
  ::testing::ScopedFakeTestPartResultReporter reporter_{
      ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS,
      &failures_};
  ReconnectingStreamOptions options_;
  std::shared_ptr<fakes::FakeClock> clock_;
  std::shared_ptr<fakes::FakeConnectionSource> source_;
  std::shared_ptr<Transport> transport_;
  std::shared_ptr<CircuitBreaker> breaker_;
  std::unique_ptr<Stream> stream_;
  bool in_destroy_ = false;
  bool destroyed_ = false;
  Reentry armed_[static_cast<int>(Site::kCount)] = {};
  std::map<std::size_t, std::uint64_t> sent_;  // last seq sent, per attempt
  std::set<std::size_t> finished_;             // attempts the server has ended
  bool has_last_ = false;
  std::uint64_t last_ = 0;
  bool positions_ = false;
  bool sparse_ = false;
  bool trim_ = true;
  int done_count_ = 0;
  absl::Status final_;
  int reopens_since_progress_ = 0;
  int migrations_since_progress_ = 0;
  int drains_since_progress_ = 0;
  std::map<std::uint64_t, absl::Time> started_at_;  // live attempts
};

void Observer::OnAttemptStarted(const AttemptInfo& info) {
  h_->OnAttemptStarted(info);
}
void Observer::OnFirstMessage(const AttemptInfo&, absl::Duration) {
  h_->OnObserverEvent("OnFirstMessage");
}
void Observer::OnAttemptEnded(const AttemptInfo& info, const absl::Status&,
                              EndClass, bool) {
  h_->OnAttemptEnded(info);
}
void Observer::OnDuplicateDropped(std::uint64_t, std::uint64_t) {
  h_->OnObserverEvent("OnDuplicateDropped");
}
void Observer::OnGap(std::uint64_t, std::uint64_t) {
  h_->OnObserverEvent("OnGap");
}
void Observer::OnBackoff(absl::Duration, const absl::Status&) {
  h_->OnObserverEvent("OnBackoff");
}
void Observer::OnGaveUp(const absl::Status&) {
  h_->OnObserverEvent("OnGaveUp");
}
void Observer::OnConnectionDraining(std::uint64_t, absl::string_view) {
  h_->OnConnectionDrainingSeen();
}
void BreakerWatcher::OnStateChange(absl::string_view, BreakerState,
                                   BreakerState, const BreakerCounts&) {
  h_->OnBreakerEvent();
}
void BreakerWatcher::OnRecorded(absl::string_view, Outcome,
                                const BreakerCounts&) {
  h_->OnBreakerEvent();
}

}  // namespace
}  // namespace fuzz
}  // namespace tether

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  tether::fuzz::FuzzInput in(data, size);
  tether::fuzz::Harness h(in);
  h.Run();
  return 0;
}
