// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// A scripted stand-in for a bidi method, for `ReconnectingBidiStream` tests:
// plug it into `BidiStreamSpec::attempt_factory`. Responses are scripted and
// sent exactly as with `FakeTransport` (it runs one underneath: `Expect`,
// `attempt(i)->Send(...)`, `Finish`, drains, async cancels); what each
// attempt wrote is recorded: `writes(i)`, `half_closed(i)`, and the resume
// state it opened from is `attempt(i)->request()`.
#ifndef TETHER_TESTING_FAKE_BIDI_TRANSPORT_H_
#define TETHER_TESTING_FAKE_BIDI_TRANSPORT_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "tether/clock.h"
#include "tether/position.h"
#include "tether/testing/fake_transport.h"
#include "tether/transport.h"

namespace tether {
namespace fakes {

// Thread safety: every method from any thread. Writes are taken as soon as
// the attempt offers them (gRPC writing at once), unless `set_auto_write`
// is false; then the test releases them with `WriteNext(i)`.
template <class Request, class Response>
class FakeBidiTransport final : public BidiAttemptFactory<Request, Response> {
 public:
  using Responses = FakeTransport<ResumeState, Response>;
  using Script = typename Responses::Script;
  using FakeAttempt = typename Responses::FakeAttempt;

  explicit FakeBidiTransport(
      std::shared_ptr<FakeConnectionSource> source = nullptr,
      std::shared_ptr<Clock> clock = nullptr)
      : responses_(std::make_shared<Responses>(std::move(source),
                                               std::move(clock))) {}

  // The response side: scripts, attempts, cancel modes (see FakeTransport).
  Responses& responses() { return *responses_; }
  void Expect(Script script) { responses_->Expect(std::move(script)); }
  std::size_t attempt_count() const { return responses_->attempt_count(); }
  // Attempt `i`; `request()` is the ResumeState it opened from.
  std::shared_ptr<FakeAttempt> attempt(std::size_t i) const {
    return responses_->attempt(i);
  }

  // What attempt `i` wrote so far, in order (open requests, replays, new).
  std::vector<Request> writes(std::size_t i) const {
    std::shared_ptr<Rec> r = rec(i);
    if (!r) return {};
    std::lock_guard<std::mutex> lock(r->mu);
    return r->written;
  }
  // Whether attempt `i` half-closed (the app's WritesDone reached it).
  bool half_closed(std::size_t i) const {
    std::shared_ptr<Rec> r = rec(i);
    if (!r) return false;
    std::lock_guard<std::mutex> lock(r->mu);
    return r->half_closed;
  }

  // false: writes wait for `WriteNext` (a slow network).
  void set_auto_write(bool auto_write) {
    std::lock_guard<std::mutex> lock(mu_);
    auto_write_ = auto_write;
  }
  // Lets attempt `i` write one more request (with auto_write off). Returns
  // whether it had one to write.
  bool WriteNext(std::size_t i) {
    std::shared_ptr<Rec> r = rec(i);
    return r && Pump(r, /*one=*/true);
  }

  // What the stream said about every attempt when it started it, in order.
  std::vector<AttemptInfo> infos() const { return responses_->infos(); }

  std::shared_ptr<Attempt> StartAttempt(
      const ConnectionPick& connection, const AttemptInfo& info,
      const ResumeState& resume, std::shared_ptr<BidiWrites<Request>> writes,
      std::shared_ptr<AttemptListener<Response>> listener) override {
    auto r = std::make_shared<Rec>();
    r->writes = writes;
    bool auto_write = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      recs_.push_back(r);
      auto_write = auto_write_;
    }
    r->auto_write = auto_write;
    std::weak_ptr<Rec> weak = r;
    writes->SetWakeup([weak] {
      if (auto rr = weak.lock()) {
        if (rr->auto_write) Pump(rr, /*one=*/false);
      }
    });
    std::shared_ptr<Attempt> a = responses_->StartAttempt(
        connection, info, resume, std::move(listener));
    if (auto_write) Pump(r, /*one=*/false);
    return a;
  }

 private:
  struct Rec {
    std::mutex mu;  // guards written, half_closed
    std::shared_ptr<BidiWrites<Request>> writes;
    bool auto_write = true;
    std::vector<Request> written;
    bool half_closed = false;
  };

  std::shared_ptr<Rec> rec(std::size_t i) const {
    std::lock_guard<std::mutex> lock(mu_);
    return i < recs_.size() ? recs_[i] : nullptr;
  }

  // No lock of ours is held while the outbox runs (`Written` may run the
  // app's on_writable, which may write and wake this up again); the outbox
  // gives one write at a time, so concurrent pumps do not reorder.
  static bool Pump(const std::shared_ptr<Rec>& r, bool one) {
    bool any = false;
    for (;;) {
      std::shared_ptr<const Request> msg;
      typename BidiWrites<Request>::Next next = r->writes->Take(&msg);
      if (next == BidiWrites<Request>::Next::kWrite) {
        {
          std::lock_guard<std::mutex> lock(r->mu);
          r->written.push_back(*msg);
        }
        r->writes->Written(true);
        any = true;
      } else if (next == BidiWrites<Request>::Next::kWritesDone) {
        std::lock_guard<std::mutex> lock(r->mu);
        r->half_closed = true;
        return true;
      } else {
        return any;
      }
      if (one) return any;
    }
  }

  const std::shared_ptr<Responses> responses_;
  mutable std::mutex mu_;
  bool auto_write_ = true;
  std::vector<std::shared_ptr<Rec>> recs_;
};

}  // namespace fakes

#ifdef TETHER_DEPRECATED_TESTING_NAMESPACE
// Deprecated: the fakes' old namespace, `tether::testing`. Only on request,
// since any `tether::testing` hides gMock's `::testing` from code inside
// namespace tether (`testing::Return` would then name tether's).
namespace testing = fakes;
#endif
}  // namespace tether

#endif  // TETHER_TESTING_FAKE_BIDI_TRANSPORT_H_
