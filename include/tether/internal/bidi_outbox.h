// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: a bidi stream's outbox (the app's writes until acknowledged) and
// the adapter that runs bidi attempts under the stream core.
#ifndef TETHER_INTERNAL_BIDI_OUTBOX_H_
#define TETHER_INTERNAL_BIDI_OUTBOX_H_

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

// The app's writes, in order, until the server acknowledges them (FIFO, by
// the app's `acknowledges`) or, without `acknowledges`, until gRPC has
// written them. The newest attempt is the writer: it writes its open
// requests, then every entry, then new ones; its responses acknowledge.
// "Newest" is the order in which the stream started its attempts (`Attach`'s
// `order`), not the order in which they attach: an attempt cancelled before
// its start ran may attach after the one that replaced it, and never takes
// the writes from it.
// Older attempts (a migration's fallback) finish the write in flight and
// write nothing more; their responses acknowledge nothing (the writer
// replays what they had written, and acknowledges it).
//
// The observer hears the outbox's size changes and refused writes through
// the callout (never after the stream's end reached the app).
//
// Thread safety: every method from any thread. `mu_` guards everything; no
// app code (`acknowledges`, `on_writable`, the observer) and no wake-up runs
// under it.
template <class Request, class Response>
class BidiOutbox {
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

  // One attempt's view: what it writes and which of its responses ack.
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
      for (const Entry& e : b.entries_) {
        if (e.id >= next_id_) {
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

    // A response arrived on this attempt: the oldest entry it has written
    // is acknowledged if the app says so. Only the writer acknowledges.
    void Received(const Response& response) {
      BidiOutbox& b = *box_;
      if (!b.acknowledges_) return;
      Entry oldest;
      {
        MutexLock lock(&b.mu_);
        if (closed_ || b.writer_ != token_ || b.entries_.empty() ||
            b.entries_.front().id >= next_id_) {
          return;
        }
        oldest = b.entries_.front();
      }
      bool acked = false;
      try {
        acked = b.acknowledges_(*oldest.request, response);
      } catch (...) {
        acked = false;  // the stream sees the response; nothing is lost
      }
      if (!acked) return;
      std::function<void()> writable;
      CalloutFn callout;
      std::int64_t done = 0;
      {
        MutexLock lock(&b.mu_);
        if (!b.entries_.empty() && b.entries_.front().id == oldest.id) {
          b.entries_.pop_front();
          done = 1;
        }
        writable = b.TakeWritableLocked();
        if (b.observer_) callout = b.callout_;
      }
      b.TellChanged(callout, -done);
      b.RunWritable(writable);
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
      }
      if (wake) wake();
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
  };

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
// started them, and lets its responses acknowledge writes before the core
// sees them.
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
      writes_->Received(response);
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
