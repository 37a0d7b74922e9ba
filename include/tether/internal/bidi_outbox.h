// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: a bidi stream's outbox (the app's writes until acknowledged) and
// the adapter that runs bidi attempts under the stream core.
#ifndef TETHER_INTERNAL_BIDI_OUTBOX_H_
#define TETHER_INTERNAL_BIDI_OUTBOX_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tether/internal/ack_ledger.h"
#include "tether/internal/deferred.h"
#include "tether/internal/mutex.h"
#include "tether/observer.h"
#include "tether/position.h"
#include "tether/transport.h"

namespace tether {
namespace internal {

// The request a bidi stream's core hands each attempt: where it resumes, and
// the open requests built from there. The core's resume step (`Take`) calls
// the app's `open_requests`, so what that throws ends the stream as any
// other throwing callback does (INTERNAL naming it).
template <class Request>
struct BidiOpen {
  using OpenFn = std::function<std::vector<Request>(const ResumeState&)>;
  std::shared_ptr<const OpenFn> open_requests;
  ResumeState state;
  std::vector<Request> opens;

  static void Take(BidiOpen& open, const ResumeState& state) {
    open.state = state;
    open.opens = (*open.open_requests)(state);
  }
};

// The app's writes, in order, until an acknowledgement of each reaches the
// app (by the app's `acknowledges`) or, without `acknowledges`, until gRPC
// has written them. The newest attempt is the writer: it writes its open
// requests, then every entry, then new ones. "Newest" is the order in which
// the stream started its attempts (`Attach`'s `order`), not the order in
// which they attach: an attempt cancelled before its start ran may attach
// after the one that replaced it, and never takes the writes from it.
// Older attempts (a migration's fallback) finish the write in flight and
// write nothing more; the writer replays what they had written.
//
// Acknowledgements (the `AckLedger` the stream core asks): a response
// acknowledges the first waiting write, oldest first, for which
// `acknowledges(write, response)` is true; the write is done when the core
// admits that response for the app, whichever attempt it came on. A
// response that acknowledges a write already done repeats an
// acknowledgement and is dropped. Only a write taken by more than one
// attempt (replayed) can be acknowledged twice, so only those are
// remembered once done: while an attempt that took one still runs, and at
// most `max` of them (the oldest is forgotten first).
//
// The observer hears the outbox's size changes and refused writes through
// the callout (never after the stream's end reached the app).
//
// Thread safety: every method from any thread. `mu_` guards everything; no
// app code (`acknowledges`, `on_writable`, the observer) and no wake-up runs
// under it.
template <class Request, class Response>
class BidiOutbox final : public AckLedger {
 public:
  using AckFn = std::function<bool(const Request&, const Response&)>;
  using CalloutFn = std::function<void(const std::function<void()>&)>;

  BidiOutbox(std::size_t max, AckFn acknowledges,
             std::shared_ptr<StreamObserver> observer = nullptr)
      : max_(max),
        acknowledges_(std::move(acknowledges)),
        observer_(std::move(observer)) {}

  // How `on_writable` is run (the stream's gate: never after destroy).
  void SetCallout(CalloutFn callout) {
    MutexLock lock(&mu_);
    callout_ = std::move(callout);
  }

  absl::Status Write(Request request) {
    std::function<void()> wake;
    CalloutFn callout;
    bool refused = false;
    {
      MutexLock lock(&mu_);
      if (ended_) {
        return absl::FailedPreconditionError(
            "tether: Write after the bidi stream ended");
      }
      if (writes_done_) {
        return absl::FailedPreconditionError("tether: Write after WritesDone");
      }
      if (observer_) callout = callout_;
      refused = entries_.size() >= max_;
      if (refused) {
        want_writable_ = true;
      } else {
        entries_.push_back(Entry{
            next_id_++, std::make_shared<const Request>(std::move(request))});
        wake = writer_wake_;
      }
    }
    if (refused) {
      Tell(callout, [o = observer_.get()] { o->OnWriteRefused(); });
      return absl::ResourceExhaustedError(absl::StrCat(
          "tether: the outbox holds max_outbox (", max_,
          ") unacknowledged writes; write again after on_writable"));
    }
    TellChanged(callout, 1);
    if (wake) wake();
    return absl::OkStatus();
  }

  // Runs at once (on this thread) when a refused `Write` would now succeed:
  // the room may have come back before the app asked to be told.
  void SetOnWritable(std::function<void()> on_writable) {
    std::function<void()> writable;
    {
      MutexLock lock(&mu_);
      on_writable_ = std::move(on_writable);
      writable = TakeWritableLocked();
    }
    RunWritable(writable);
  }

  void WritesDone() {
    std::function<void()> wake;
    {
      MutexLock lock(&mu_);
      if (writes_done_ || ended_) return;
      writes_done_ = true;
      wake = writer_wake_;
    }
    if (wake) wake();
  }

  // The stream's end is decided: no more writes are accepted.
  void End() {
    MutexLock lock(&mu_);
    ended_ = true;
    want_writable_ = false;
    writer_wake_ = nullptr;
  }

  std::size_t size() {
    MutexLock lock(&mu_);
    return entries_.size();
  }

  // AckLedger. Runs `acknowledges` with no lock held: first for the oldest
  // waiting write (FIFO acknowledgements cost one call), then for the
  // others and the remembered ones.
  AckMatch Match(const void* message) override {
    const Response& response = *static_cast<const Response*>(message);
    Entry oldest;
    {
      MutexLock lock(&mu_);
      if (entries_.empty() && done_.empty()) return AckMatch();
      if (!entries_.empty()) oldest = entries_.front();
    }
    if (oldest.request && acknowledges_(*oldest.request, response)) {
      return AckMatch{AckMatch::Kind::kWrite, oldest.id};
    }
    std::vector<Entry> rest;
    std::size_t waiting = 0;
    {
      MutexLock lock(&mu_);
      for (const Entry& e : entries_) {
        if (e.id > oldest.id) rest.push_back(e);
      }
      waiting = rest.size();
      rest.insert(rest.end(), done_.begin(), done_.end());
    }
    for (std::size_t i = 0; i < rest.size(); ++i) {
      if (acknowledges_(*rest[i].request, response)) {
        return AckMatch{i < waiting ? AckMatch::Kind::kWrite
                                    : AckMatch::Kind::kRepeat,
                        rest[i].id};
      }
    }
    return AckMatch();
  }

  bool Admit(const AckMatch& match, Deferred& later) override {
    if (match.kind == AckMatch::Kind::kNone) return true;
    if (match.kind == AckMatch::Kind::kRepeat) return false;
    std::function<void()> writable;
    CalloutFn callout;
    {
      MutexLock lock(&mu_);
      auto it = std::lower_bound(
          entries_.begin(), entries_.end(), match.write,
          [](const Entry& e, std::uint64_t id) { return e.id < id; });
      // Done meanwhile: another attempt's acknowledgement was admitted.
      if (it == entries_.end() || it->id != match.write) return false;
      if (it->takers > 1 && TakerRunningLocked(*it)) {
        done_.push_back(*it);
        if (done_.size() > max_) done_.pop_front();
      }
      entries_.erase(it);
      writable = TakeWritableLocked();
      if (observer_) callout = callout_;
    }
    later.Add([callout, writable, o = observer_] {
      Tell(callout, [o] { o->OnOutboxChanged(-1); });
      RunWritable(writable);
    });
    return true;
  }

  // One attempt's view: what it writes.
  class Writes final : public BidiWrites<Request> {
   public:
    using Next = typename BidiWrites<Request>::Next;
    Writes(std::shared_ptr<BidiOutbox> box, std::uint64_t token,
           std::vector<Request> opens)
        : box_(std::move(box)), token_(token) {
      for (Request& r : opens) {
        opens_.push_back(std::make_shared<const Request>(std::move(r)));
      }
    }

    Next Take(std::shared_ptr<const Request>* out) override {
      BidiOutbox& b = *box_;
      MutexLock lock(&b.mu_);
      if (closed_ || in_flight_) return Next::kNothing;
      if (next_open_ < opens_.size()) {
        *out = opens_[next_open_++];
        in_flight_ = true;
        in_flight_id_ = 0;
        return Next::kWrite;
      }
      if (b.writer_ != token_) return Next::kNothing;
      // Without acknowledgements a write goes out once: an older attempt's
      // write in flight is done or failed before the writer goes on.
      if (!b.acknowledges_ && b.entry_writes_in_flight_ > 0) {
        return Next::kNothing;
      }
      for (Entry& e : b.entries_) {
        if (e.id >= next_id_) {
          ++e.takers;
          e.last_taker = token_;
          *out = e.request;
          next_id_ = e.id + 1;
          in_flight_ = true;
          in_flight_id_ = e.id;
          ++b.entry_writes_in_flight_;
          return Next::kWrite;
        }
      }
      if (b.writes_done_ && !sent_writes_done_) {
        sent_writes_done_ = true;
        return Next::kWritesDone;
      }
      return Next::kNothing;
    }

    void Written(bool ok) override {
      BidiOutbox& b = *box_;
      std::function<void()> writable;
      std::function<void()> wake;
      CalloutFn callout;
      std::int64_t done = 0;
      {
        MutexLock lock(&b.mu_);
        if (!in_flight_) return;  // closed meanwhile
        wake = EndWriteLocked(b);
        if (!ok) {
          closed_ = true;
        } else if (!b.acknowledges_ && in_flight_id_ != 0) {
          // Without acknowledgements a write is done once written.
          while (!b.entries_.empty() &&
                 b.entries_.front().id <= in_flight_id_) {
            b.entries_.pop_front();
            ++done;
          }
          writable = b.TakeWritableLocked();
          if (b.observer_) callout = b.callout_;
        }
      }
      b.TellChanged(callout, -done);
      if (wake) wake();
      b.RunWritable(writable);
    }

    void SetWakeup(std::function<void()> wake) override {
      BidiOutbox& b = *box_;
      MutexLock lock(&b.mu_);
      if (b.writer_ == token_ && !b.ended_) b.writer_wake_ = std::move(wake);
    }

    // The attempt ended: it writes nothing more.
    void Close() {
      BidiOutbox& b = *box_;
      std::function<void()> wake;
      {
        MutexLock lock(&b.mu_);
        closed_ = true;
        if (in_flight_) wake = EndWriteLocked(b);
        if (b.writer_ == token_) {
          b.writer_ = 0;
          b.writer_wake_ = nullptr;
        }
        if (attached_) {
          attached_ = false;
          b.ClosedLocked(token_);
        }
      }
      if (wake) wake();
    }

    // An attempt dropped without an end (its start never ran) is closed
    // too: what it took can be acknowledged no more.
    ~Writes() override {
      BidiOutbox& b = *box_;
      MutexLock lock(&b.mu_);
      if (attached_) b.ClosedLocked(token_);
    }

   private:
    // This attempt's write is no longer in flight. Returns the writer's
    // wake-up when that write was an app write on another attempt (the
    // writer waits for it).
    std::function<void()> EndWriteLocked(BidiOutbox& b)
        ABSL_EXCLUSIVE_LOCKS_REQUIRED(b.mu_) {
      in_flight_ = false;
      if (in_flight_id_ == 0) return nullptr;
      --b.entry_writes_in_flight_;
      return b.writer_ != token_ ? b.writer_wake_ : nullptr;
    }

    const std::shared_ptr<BidiOutbox> box_;
    const std::uint64_t token_;
    // Guarded by box_->mu_ (not expressible as an annotation here).
    std::vector<std::shared_ptr<const Request>> opens_;
    std::size_t next_open_ = 0;
    std::uint64_t next_id_ = 0;
    bool in_flight_ = false;
    std::uint64_t in_flight_id_ = 0;
    bool sent_writes_done_ = false;
    bool closed_ = false;
    bool attached_ = true;  // in the outbox's `open_` (until closed)
  };

  // A new attempt writes `opens`; it becomes the writer (then writes every
  // entry) unless an attempt started after it (a greater `order`) attached
  // first.
  static std::shared_ptr<Writes> Attach(const std::shared_ptr<BidiOutbox>& box,
                                        std::uint64_t order,
                                        std::vector<Request> opens) {
    std::uint64_t token = 0;
    {
      MutexLock lock(&box->mu_);
      token = ++box->tokens_;
      box->open_.push_back(token);
      if (order >= box->writer_order_) {
        box->writer_ = token;
        box->writer_order_ = order;
        box->writer_wake_ = nullptr;
      }
    }
    return std::make_shared<Writes>(box, token, std::move(opens));
  }

 private:
  struct Entry {
    std::uint64_t id = 0;
    std::shared_ptr<const Request> request;
    int takers = 0;                // attempts that took it
    std::uint64_t last_taker = 0;  // the token of the last one
  };

  // Whether an attempt that took `e` may still send a response about it
  // (attempts take writes in token order: the last taker is the newest).
  bool TakerRunningLocked(const Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !open_.empty() && open_.front() <= e.last_taker;
  }

  // Attempt `token` ended: forget the done writes no running attempt took.
  void ClosedLocked(std::uint64_t token) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    open_.erase(std::remove(open_.begin(), open_.end(), token), open_.end());
    std::deque<Entry> keep;
    for (Entry& e : done_) {
      if (TakerRunningLocked(e)) keep.push_back(std::move(e));
    }
    done_.swap(keep);
  }

  std::function<void()> TakeWritableLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!want_writable_ || ended_ || entries_.size() >= max_ || !on_writable_) {
      return nullptr;
    }
    want_writable_ = false;
    std::function<void()> f = on_writable_;
    CalloutFn callout = callout_;
    if (!callout) return f;
    return [callout, f] { callout(f); };
  }

  static void RunWritable(const std::function<void()>& f) {
    if (f) f();
  }

  // Runs an observer call through `callout` (empty: the stream has none
  // yet, or no observer). Call with no lock held.
  static void Tell(const CalloutFn& callout, const std::function<void()>& f) {
    if (callout) callout(f);
  }
  void TellChanged(const CalloutFn& callout, std::int64_t delta) {
    if (delta == 0) return;
    Tell(callout, [o = observer_.get(), delta] { o->OnOutboxChanged(delta); });
  }

  const std::size_t max_;
  const AckFn acknowledges_;
  const std::shared_ptr<StreamObserver> observer_;
  Mutex mu_;
  std::deque<Entry> entries_ ABSL_GUARDED_BY(mu_);
  // Replayed writes already acknowledged to the app (see the class comment).
  std::deque<Entry> done_ ABSL_GUARDED_BY(mu_);
  // Attempts attached and not closed, by token (increasing).
  std::vector<std::uint64_t> open_ ABSL_GUARDED_BY(mu_);
  std::uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::uint64_t tokens_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t writer_ ABSL_GUARDED_BY(mu_) = 0;
  // The start order of the newest attempt that attached (it stays when that
  // attempt ends: an older one never becomes the writer again).
  std::uint64_t writer_order_ ABSL_GUARDED_BY(mu_) = 0;
  // App writes taken by some attempt and not yet written or failed.
  int entry_writes_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> writer_wake_ ABSL_GUARDED_BY(mu_);
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool want_writable_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> on_writable_ ABSL_GUARDED_BY(mu_);
  CalloutFn callout_ ABSL_GUARDED_BY(mu_);
};

// Runs bidi attempts under the stream core (whose per-attempt "request" is a
// `BidiOpen`): attaches each attempt to the outbox in the order the stream
// started them, and closes its writes when it ends.
template <class Request, class Response>
class BidiCoreFactory final
    : public AttemptFactory<BidiOpen<Request>, Response> {
 public:
  using Box = BidiOutbox<Request, Response>;

  BidiCoreFactory(std::shared_ptr<BidiAttemptFactory<Request, Response>> inner,
                  std::shared_ptr<Box> box)
      : inner_(std::move(inner)), box_(std::move(box)) {}

  std::shared_ptr<Attempt> StartAttempt(
      const ConnectionPick& connection, const AttemptInfo& info,
      const BidiOpen<Request>& open,
      std::shared_ptr<AttemptListener<Response>> listener) override {
    std::shared_ptr<typename Box::Writes> writes =
        Box::Attach(box_, info.attempt, open.opens);
    auto wrapped = std::make_shared<Listener>(writes, std::move(listener));
    return inner_->StartAttempt(connection, info, open.state, writes,
                                std::move(wrapped));
  }

 private:
  class Listener final : public AttemptListener<Response> {
   public:
    Listener(std::shared_ptr<typename Box::Writes> writes,
             std::shared_ptr<AttemptListener<Response>> core)
        : writes_(std::move(writes)), core_(std::move(core)) {}
    bool OnMessage(Response&& response) override {
      return core_->OnMessage(std::move(response));
    }
    // The trailers go on to the core: its end decision reads them
    // (grpc-retry-pushback-ms, the classifier's AttemptEnd).
    void OnEnd(const absl::Status& status, const Metadata& trailers) override {
      writes_->Close();
      core_->OnEnd(status, trailers);
    }

   private:
    std::shared_ptr<typename Box::Writes> writes_;
    std::shared_ptr<AttemptListener<Response>> core_;
  };

  const std::shared_ptr<BidiAttemptFactory<Request, Response>> inner_;
  const std::shared_ptr<Box> box_;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_BIDI_OUTBOX_H_
