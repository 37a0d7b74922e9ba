// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_TESTING_FAKE_TRANSPORT_H_
#define TETHER_TESTING_FAKE_TRANSPORT_H_

// A server stream's attempts driven by the test (`FakeTransport`). Also
// brings in `FakeConnectionSource` (tether/testing/fake_connection_source.h),
// which it is used with.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "gtest/gtest.h"
#include "tether/clock.h"
#include "tether/testing/fake_connection_source.h"
#include "tether/transport.h"

namespace tether {
namespace fakes {

// How a `FakeTransport`'s attempts complete a client cancel.
//
// gRPC's `TryCancel` only requests the cancel: the call's end
// (CANCELLED) arrives later, after other events of the same call, and a
// message already on its way may still be read in between. Fakes whose
// cancel ends the call at once hide the ordering bugs that this exposes.
enum class CancelMode {
  // `Cancel` records the request; the attempt ends with CANCELLED later: on a
  // zero-delay timer of the transport's clock (so `FakeClock::RunDue()` or
  // `AdvanceBy` completes it), or, when the transport has no clock, when the
  // test calls `FakeAttempt::CompleteCancel()` or
  // `FakeTransport::CompletePendingCancels()`. The default.
  kAsync,
  // Like kAsync, but only the test completes cancels (`CompleteCancel`,
  // `CompletePendingCancels`), also when the transport has a clock. For
  // tests and fuzzers that choose the order of every event themselves.
  kAsyncManual,
  // `Cancel` ends the attempt with CANCELLED before it returns (`OnEnd` runs
  // inside `Cancel`). gRPC never does this; use it only for a test that
  // depends on it.
  kImmediate,
};

// An `AttemptFactory` whose attempts the test drives, by hand or by script.
//
// Each attempt the stream starts becomes a `FakeAttempt`: the test sends it
// messages (`Send`) and ends it (`Finish`), and reads what the stream asked
// for (`request()`, `connection_id()`, `cancelled()`). A `Script` queued with
// `Expect` runs as soon as its attempt starts. Flow control is honoured: a
// message sent while the stream is not reading waits for `Resume`, and the
// final status waits for every queued message, as in gRPC. A cancel ends
// the attempt with CANCELLED later, as gRPC's `TryCancel` does: by default
// (`CancelMode::kAsync`) on a zero-delay timer of the transport's clock
// (`RunDue` completes it) or at `CompletePendingCancels()` without a clock;
// `set_cancel_mode` chooses another mode. Sequences gRPC never produces (a
// message or a second status after the final status, a GOAWAY with no
// connection source to send it) fail the test with a message saying so.
//
// Given a clock (the same `FakeClock` the stream uses), each attempt records
// when it started and ended, so a test can check backoff from the outside.
//
// Thread safety: all methods may be called concurrently; stream callbacks
// run on the thread that called `Send`/`Finish`/`Resume`/`Cancel`/
// `CompleteCancel` (or the clock's `RunDue`/`AdvanceBy`), without a lock held.
//
//   auto source = std::make_shared<FakeConnectionSource>();
//   auto transport = std::make_shared<FakeTransport<Req, Resp>>(source, clock);
//   transport->Expect(FakeTransport<Req, Resp>::Script()
//                         .Messages({M(1), M(2)})
//                         .GoawayAfter(2)
//                         .Finish(absl::UnavailableError("bye")));
//   spec.attempt_factory = transport;  // then start the stream on `source`
template <class Request, class Response>
class FakeTransport final : public AttemptFactory<Request, Response> {
 public:
  // What one attempt does once started: its messages, in order, then its
  // final status. A plain struct (`{{M(1), M(2)}, {}, status}`) or built
  // step by step:
  //
  //   Script().Messages({M(1), M(2)}).GoawayAfter(1).Finish(status)
  //   Script().ConnectFails()          // no message, "failed to connect"
  //   Script().Message(M(1)).NotServingAfter(1)  // health check drains it
  struct Script {
    std::vector<Response> messages;
    // Drains the attempt's connection (through `source`) after this many
    // messages: a GOAWAY in the middle of the stream. Needs a transport
    // built with a `FakeConnectionSource`.
    absl::optional<std::size_t> drain_after;
    // The final status after the messages; none: the attempt stays open.
    absl::optional<absl::Status> finish;
    // The reason the drain gives its listeners. Default "GOAWAY".
    std::string drain_why = "GOAWAY";
    // Trailing metadata sent with the final status (e.g.
    // {"grpc-retry-pushback-ms", "250"}). Default none.
    Metadata trailers = {};

    // Appends one message.
    Script& Message(Response m) & {
      messages.push_back(std::move(m));
      return *this;
    }
    Script&& Message(Response m) && { return std::move(Message(std::move(m))); }
    // Appends messages.
    Script& Messages(std::vector<Response> ms) & {
      for (auto& m : ms) messages.push_back(std::move(m));
      return *this;
    }
    Script&& Messages(std::vector<Response> ms) && {
      return std::move(Messages(std::move(ms)));
    }
    // A GOAWAY on the attempt's connection after `n` messages (0: before the
    // first). The attempt itself runs on until its final status.
    Script& GoawayAfter(std::size_t n) & {
      drain_after = n;
      drain_why = "GOAWAY";
      return *this;
    }
    Script&& GoawayAfter(std::size_t n) && { return std::move(GoawayAfter(n)); }
    // The connection's health watch says NOT_SERVING after `n` messages.
    Script& NotServingAfter(std::size_t n) & {
      drain_after = n;
      drain_why = "health NOT_SERVING";
      return *this;
    }
    Script&& NotServingAfter(std::size_t n) && {
      return std::move(NotServingAfter(n));
    }
    // The final status, after the messages.
    Script& Finish(absl::Status status) & {
      finish = std::move(status);
      return *this;
    }
    Script&& Finish(absl::Status status) && {
      return std::move(Finish(std::move(status)));
    }
    // The final status with trailing metadata.
    Script& Finish(absl::Status status, Metadata trailing) & {
      finish = std::move(status);
      trailers = std::move(trailing);
      return *this;
    }
    Script&& Finish(absl::Status status, Metadata trailing) && {
      return std::move(Finish(std::move(status), std::move(trailing)));
    }
    // The call fails as gRPC fails a call that cannot connect: no message,
    // UNAVAILABLE `ConnectFailure()`.
    Script& ConnectFails() & { return Finish(ConnectFailure()); }
    Script&& ConnectFails() && { return std::move(ConnectFails()); }
  };

  class FakeAttempt final : public Attempt,
                            public std::enable_shared_from_this<FakeAttempt> {
   public:
    // Test side.
    void Send(Response response) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        // A server may still write after the client cancelled; the client
        // never sees it (unless it was in flight before the cancel completed
        // and the transport delivers such messages).
        if (done_ && cancelled_) return;
        if (cancelled_ && !deliver_after_cancel_) return;
        if (finished_ || done_) {
          ADD_FAILURE() << "FakeAttempt " << index_ << " (connection "
                        << connection_id_
                        << "): Send() after the final status ("
                        << finish_.ToString()
                        << "); gRPC never delivers a message after a call's "
                           "final status. Send every message before Finish.";
          return;
        }
        queue_.push_back(std::move(response));
      }
      Pump();
    }
    void Finish(absl::Status status) { Finish(std::move(status), {}); }
    // The final status with the server's trailing metadata (what
    // `AttemptListener::OnEnd` receives).
    void Finish(absl::Status status, Metadata trailers) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (finished_ || done_) {
          if (!cancelled_) {
            ADD_FAILURE() << "FakeAttempt " << index_ << " (connection "
                          << connection_id_ << "): a second final status ("
                          << status.ToString() << ") after "
                          << finish_.ToString()
                          << "; a gRPC call ends exactly once.";
          }
          return;
        }
        finished_ = true;
        finish_ = std::move(status);
        trailers_ = std::move(trailers);
      }
      Pump();
    }
    const Request& request() const { return request_; }
    std::uint64_t connection_id() const { return connection_id_; }
    // What the stream said about this attempt when it started it (number,
    // reason, resume position, connection).
    const AttemptInfo& info() const { return info_; }
    std::size_t index() const { return index_; }
    // True once the stream asked to cancel (the attempt may still run: see
    // `cancel_pending()`).
    bool cancelled() const {
      std::lock_guard<std::mutex> lock(mu_);
      return cancelled_;
    }
    // True while a cancel was requested and the attempt has not ended yet.
    bool cancel_pending() const {
      std::lock_guard<std::mutex> lock(mu_);
      return cancelled_ && !done_;
    }
    // Completes a requested cancel: the stream gets `OnEnd(CANCELLED)` now,
    // on this thread. Returns false (and does nothing) when no cancel is
    // pending (none requested, or the attempt has already ended).
    bool CompleteCancel() {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!cancelled_ || done_) return false;
        cancel_completed_ = true;
      }
      Pump();
      return true;
    }
    bool done() const {
      std::lock_guard<std::mutex> lock(mu_);
      return done_;
    }
    // Messages handed to the stream so far.
    std::size_t delivered() const {
      std::lock_guard<std::mutex> lock(mu_);
      return delivered_;
    }
    // True while the stream is not reading (flow control).
    bool paused() const {
      std::lock_guard<std::mutex> lock(mu_);
      return !reading_;
    }
    // When the stream started this attempt, on the transport's clock
    // (InfinitePast when the transport has none).
    absl::Time started_at() const { return started_at_; }
    // When the stream was told the attempt ended (InfinitePast while it runs
    // or when the transport has no clock).
    absl::Time ended_at() const {
      std::lock_guard<std::mutex> lock(mu_);
      return ended_at_;
    }
    // The status the stream was given in `OnEnd`; nullopt while it runs.
    absl::optional<absl::Status> end_status() const {
      std::lock_guard<std::mutex> lock(mu_);
      return end_status_;
    }

    // Stream side (`Attempt`).
    void Resume() override {
      {
        std::lock_guard<std::mutex> lock(mu_);
        reading_ = true;
      }
      Pump();
    }
    // Requests the cancel. kImmediate: the attempt ends here. kAsync: it
    // ends on a zero-delay timer of the clock (or by `CompleteCancel`).
    // kAsyncManual: it ends when the test calls `CompleteCancel`.
    void Cancel() override {
      bool arm_timer = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (done_ || cancelled_) return;
        cancelled_ = true;
        if (cancel_mode_ == CancelMode::kImmediate) {
          cancel_completed_ = true;
        } else if (cancel_mode_ == CancelMode::kAsync && clock_) {
          arm_timer = true;
        }
      }
      if (arm_timer) {
        std::weak_ptr<FakeAttempt> weak = this->weak_from_this();
        clock_->RunAfter(absl::ZeroDuration(), [weak] {
          if (auto self = weak.lock()) self->CompleteCancel();
        });
      }
      Pump();
    }

    FakeAttempt(std::size_t index, std::uint64_t connection_id, Request request,
                std::shared_ptr<AttemptListener<Response>> listener,
                std::shared_ptr<Clock> clock = nullptr,
                CancelMode cancel_mode = CancelMode::kAsync,
                bool deliver_after_cancel = false, AttemptInfo info = {})
        : index_(index),
          connection_id_(connection_id),
          request_(std::move(request)),
          clock_(std::move(clock)),
          started_at_(clock_ ? clock_->Now() : absl::InfinitePast()),
          cancel_mode_(cancel_mode),
          deliver_after_cancel_(deliver_after_cancel),
          info_(info),
          listener_(std::move(listener)) {}

   private:
    // Delivers what may be delivered now; one thread at a time, re-entrant
    // calls leave their work to the running loop.
    void Pump() {
      std::unique_lock<std::mutex> lock(mu_);
      if (pumping_) return;
      pumping_ = true;
      for (;;) {
        if (done_) break;
        // While a cancel is pending the call is frozen, unless data already
        // in flight may still arrive (`deliver_after_cancel`).
        const bool flowing = !cancelled_ || deliver_after_cancel_;
        if (cancel_completed_ || (flowing && finished_ && queue_.empty())) {
          absl::Status status =
              cancel_completed_
                  ? absl::CancelledError("cancelled by the client")
                  : finish_;
          Metadata trailers;
          if (!cancel_completed_) trailers = std::move(trailers_);
          queue_.clear();
          done_ = true;
          end_status_ = status;
          if (clock_) ended_at_ = clock_->Now();
          auto listener = std::move(listener_);
          lock.unlock();
          listener->OnEnd(status, trailers);
          listener.reset();
          lock.lock();
          break;
        }
        if (flowing && reading_ && !queue_.empty()) {
          Response r = std::move(queue_.front());
          queue_.pop_front();
          ++delivered_;
          reading_ = false;
          lock.unlock();
          bool more = listener_->OnMessage(std::move(r));
          lock.lock();
          if (more) reading_ = true;
          continue;
        }
        break;
      }
      pumping_ = false;
    }

    const std::size_t index_;
    const std::uint64_t connection_id_;
    const Request request_;
    const std::shared_ptr<Clock> clock_;
    const absl::Time started_at_;
    const CancelMode cancel_mode_;
    const bool deliver_after_cancel_;
    const AttemptInfo info_;
    mutable std::mutex mu_;
    std::shared_ptr<AttemptListener<Response>> listener_;
    std::deque<Response> queue_;
    bool reading_ = true;
    bool pumping_ = false;
    bool finished_ = false;
    bool cancelled_ = false;         // the stream asked to cancel
    bool cancel_completed_ = false;  // ... and the cancel took effect
    bool done_ = false;
    absl::Status finish_;
    Metadata trailers_;
    std::size_t delivered_ = 0;
    absl::Time ended_at_ = absl::InfinitePast();
    absl::optional<absl::Status> end_status_;
  };

  // `source` (optional) performs a script's `drain_after`. `clock`
  // (optional, normally the stream's `FakeClock`) timestamps attempts.
  explicit FakeTransport(std::shared_ptr<FakeConnectionSource> source = nullptr,
                         std::shared_ptr<Clock> clock = nullptr)
      : source_(std::move(source)), clock_(std::move(clock)) {}

  // How attempts started from now on complete a cancel. Default kAsync.
  void set_cancel_mode(CancelMode mode) {
    std::lock_guard<std::mutex> lock(mu_);
    cancel_mode_ = mode;
  }
  CancelMode cancel_mode() const {
    std::lock_guard<std::mutex> lock(mu_);
    return cancel_mode_;
  }
  // Whether attempts started from now on still deliver, between a cancel
  // request and its completion, the messages and final status the server
  // sends (data in flight). Default false: a pending cancel delivers nothing.
  void set_deliver_after_cancel(bool deliver) {
    std::lock_guard<std::mutex> lock(mu_);
    deliver_after_cancel_ = deliver;
  }

  // Completes every pending cancel, oldest attempt first (see
  // `FakeAttempt::CompleteCancel`). Returns how many it completed.
  std::size_t CompletePendingCancels() {
    std::vector<std::shared_ptr<FakeAttempt>> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      all = attempts_;
    }
    std::size_t n = 0;
    for (const auto& a : all) {
      if (a->CompleteCancel()) ++n;
    }
    return n;
  }
  // Attempts whose cancel was requested and has not completed.
  std::size_t pending_cancels() const {
    std::vector<std::shared_ptr<FakeAttempt>> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      all = attempts_;
    }
    std::size_t n = 0;
    for (const auto& a : all) {
      if (a->cancel_pending()) ++n;
    }
    return n;
  }

  // The next attempt without a script of its own runs `script`.
  void Expect(Script script) {
    std::lock_guard<std::mutex> lock(mu_);
    scripts_.push_back(std::move(script));
  }

  std::size_t attempt_count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return attempts_.size();
  }
  // Attempt `i` (0-based), or null when fewer have started.
  std::shared_ptr<FakeAttempt> attempt(std::size_t i) const {
    std::lock_guard<std::mutex> lock(mu_);
    return i < attempts_.size() ? attempts_[i] : nullptr;
  }
  std::shared_ptr<FakeAttempt> last_attempt() const {
    std::lock_guard<std::mutex> lock(mu_);
    return attempts_.empty() ? nullptr : attempts_.back();
  }
  // The request of every attempt, in order (check resume positions with
  // `RequestResumedAfter` from tether/testing/matchers.h).
  std::vector<Request> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Request> out;
    for (const auto& a : attempts_) out.push_back(a->request());
    return out;
  }
  // The connection every attempt ran on, in order.
  std::vector<std::uint64_t> connection_ids() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::uint64_t> out;
    for (const auto& a : attempts_) out.push_back(a->connection_id());
    return out;
  }
  // When every attempt started, in order (needs a clock).
  std::vector<absl::Time> start_times() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<absl::Time> out;
    for (const auto& a : attempts_) out.push_back(a->started_at());
    return out;
  }
  // Scripts queued with `Expect` that no attempt has run yet.
  std::size_t pending_scripts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return scripts_.size();
  }

  // What the stream said about every attempt when it started it, in order.
  std::vector<AttemptInfo> infos() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<AttemptInfo> out;
    for (const auto& a : attempts_) out.push_back(a->info());
    return out;
  }

  std::shared_ptr<Attempt> StartAttempt(
      const ConnectionPick& connection, const AttemptInfo& info,
      const Request& request,
      std::shared_ptr<AttemptListener<Response>> listener) override {
    absl::optional<Script> script;
    std::shared_ptr<FakeAttempt> a;
    {
      std::lock_guard<std::mutex> lock(mu_);
      a = std::make_shared<FakeAttempt>(
          attempts_.size(), connection.connection_id, request,
          std::move(listener), clock_, cancel_mode_, deliver_after_cancel_,
          info);
      attempts_.push_back(a);
      if (!scripts_.empty()) {
        script = std::move(scripts_.front());
        scripts_.pop_front();
      }
    }
    if (script) Run(*a, *std::move(script));
    return a;
  }

 private:
  void Run(FakeAttempt& a, Script script) {
    if (script.drain_after && !source_) {
      ADD_FAILURE() << "FakeTransport: the script of attempt " << a.index()
                    << " drains its connection (" << script.drain_why
                    << ") after message " << *script.drain_after
                    << ", but the transport has no FakeConnectionSource to "
                       "drain; construct it as FakeTransport(source)";
    }
    for (std::size_t i = 0; i < script.messages.size(); ++i) {
      if (script.drain_after && *script.drain_after == i && source_) {
        source_->Drain(a.connection_id(), script.drain_why);
      }
      a.Send(std::move(script.messages[i]));
    }
    if (script.drain_after && *script.drain_after >= script.messages.size() &&
        source_) {
      source_->Drain(a.connection_id(), script.drain_why);
    }
    if (script.finish) a.Finish(*script.finish, std::move(script.trailers));
  }

  const std::shared_ptr<FakeConnectionSource> source_;
  const std::shared_ptr<Clock> clock_;
  mutable std::mutex mu_;
  CancelMode cancel_mode_ = CancelMode::kAsync;
  bool deliver_after_cancel_ = false;
  std::deque<Script> scripts_;
  std::vector<std::shared_ptr<FakeAttempt>> attempts_;
};

}  // namespace fakes

#ifdef TETHER_DEPRECATED_TESTING_NAMESPACE
// Deprecated: the fakes' old namespace, `tether::testing`. Only on request,
// since any `tether::testing` hides gMock's `::testing` from code inside
// namespace tether (`testing::Return` would then name tether's).
namespace testing = fakes;
#endif
}  // namespace tether

#endif  // TETHER_TESTING_FAKE_TRANSPORT_H_
