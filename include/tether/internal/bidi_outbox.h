// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: a bidi stream's outbox, the app's writes until acknowledged.
// Compiled once, in the library (src/streams/bidi_outbox.cc): it never names
// the stream's message types (see bidi_parts.h for the typed side).
#ifndef TETHER_INTERNAL_BIDI_OUTBOX_H_
#define TETHER_INTERNAL_BIDI_OUTBOX_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "tether/function.h"
#include "tether/internal/ack_ledger.h"
#include "tether/internal/attempt_sink.h"
#include "tether/internal/deferred.h"
#include "tether/internal/mutex.h"
#include "tether/transport.h"

namespace tether {

class StreamObserver;

namespace internal {

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
// Messages are opaque: a write is a `Message` (a `std::shared_ptr` to the
// stream's Request, which keeps its own deleter), a response a pointer to
// the stream's Response. The typed side (bidi_parts.h) casts.
//
// The observer hears the outbox's size changes and refused writes through
// the callout (never after the stream's end reached the app).
//
// Thread safety: every method from any thread. `mu_` guards everything; no
// app code (`acknowledges`, `on_writable`, the observer) and no wake-up runs
// under it.
class BidiOutbox final : public AckLedger {
 public:
  // One write (a Request), shared by every attempt that takes it.
  using Message = std::shared_ptr<const void>;
  // The app's `acknowledges`, on a Request (`write`) and a Response; empty:
  // a write is done once written.
  using AckFn = Function<bool(const void* write, const void* response)>;
  using CalloutFn = std::function<void(const std::function<void()>&)>;

  BidiOutbox(std::size_t max, AckFn acknowledges,
             std::shared_ptr<StreamObserver> observer = nullptr);
  ~BidiOutbox();

  // How `on_writable` and observer calls are run (the stream's gate: never
  // after destroy).
  void SetCallout(CalloutFn callout);

  // Queues a write. RESOURCE_EXHAUSTED when `max` writes wait;
  // FAILED_PRECONDITION after `WritesDone` or `End`.
  absl::Status Write(Message request);

  // Runs at once (on this thread) when a refused `Write` would now succeed:
  // the room may have come back before the app asked to be told.
  void SetOnWritable(std::function<void()> on_writable);

  void WritesDone();

  // The stream's end is decided: no more writes are accepted.
  void End();

  std::size_t size();

  // Whether the app gave `acknowledges`.
  bool acknowledged() const { return static_cast<bool>(acknowledges_); }

  // AckLedger. Runs `acknowledges` with no lock held: first for the oldest
  // waiting write (FIFO acknowledgements cost one call), then for the
  // others and the remembered ones.
  AckMatch Match(const void* response) override;
  bool Admit(const AckMatch& match, Deferred& later) override;

  // One attempt's view: what it writes (`AttemptWrites`, attempt_sink.h).
  class Writes final : public AttemptWrites {
   public:
    Writes(std::shared_ptr<BidiOutbox> box, std::uint64_t token,
           std::vector<Message> opens);
    // An attempt dropped without an end (its start never ran) is closed
    // too: what it took can be acknowledged no more.
    ~Writes() override;
    Writes(const Writes&) = delete;
    Writes& operator=(const Writes&) = delete;

    BidiNext Take(Message* out) override;
    void Written(bool ok) override;
    void SetWakeup(std::function<void()> wake) override;
    // The attempt ended: it writes nothing more.
    void Close() override;

   private:
    // This attempt's write is no longer in flight. Returns the writer's
    // wake-up when that write was an app write on another attempt (the
    // writer waits for it).
    std::function<void()> EndWriteLocked(BidiOutbox& b)
        ABSL_EXCLUSIVE_LOCKS_REQUIRED(b.mu_);

    const std::shared_ptr<BidiOutbox> box_;
    const std::uint64_t token_;
    // Guarded by box_->mu_ (not expressible as an annotation here).
    const std::vector<Message> opens_;
    std::size_t next_open_ = 0;
    std::uint64_t next_id_ = 0;
    bool in_flight_ = false;
    std::uint64_t in_flight_id_ = 0;
    bool sent_writes_done_ = false;
    bool closed_ = false;
    bool attached_ = true;  // in the outbox's `open_` (until closed)
  };

  // A new attempt writes (a copy of) `opens`; it becomes the writer (then
  // writes every entry) unless an attempt started after it (a greater
  // `order`) attached first.
  static std::shared_ptr<Writes> Attach(const std::shared_ptr<BidiOutbox>& box,
                                        std::uint64_t order,
                                        const std::vector<Message>& opens);

 private:
  struct Entry {
    std::uint64_t id = 0;
    Message request;
    int takers = 0;                // attempts that took it
    std::uint64_t last_taker = 0;  // the token of the last one
  };

  // Whether an attempt that took `e` may still send a response about it
  // (attempts take writes in token order: the last taker is the newest).
  bool TakerRunningLocked(const Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Attempt `token` ended: forget the done writes no running attempt took.
  void ClosedLocked(std::uint64_t token) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::function<void()> TakeWritableLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Runs an observer call through `callout` (empty: the stream has none
  // yet, or no observer). Call with no lock held.
  static void Tell(const CalloutFn& callout, const std::function<void()>& f);
  void TellChanged(const CalloutFn& callout, std::int64_t delta);

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

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_BIDI_OUTBOX_H_
