// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/bidi_outbox.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tether/observer.h"

namespace tether {
namespace internal {
namespace {

void RunWritable(const std::function<void()>& f) {
  if (f) f();
}

}  // namespace

BidiOutbox::BidiOutbox(std::size_t max, AckFn acknowledges,
                       std::shared_ptr<StreamObserver> observer)
    : max_(max),
      acknowledges_(std::move(acknowledges)),
      observer_(std::move(observer)) {}

BidiOutbox::~BidiOutbox() = default;

void BidiOutbox::SetCallout(CalloutFn callout) {
  MutexLock lock(&mu_);
  callout_ = std::move(callout);
}

absl::Status BidiOutbox::Write(Message request) {
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
      entries_.push_back(Entry{next_id_++, std::move(request)});
      wake = writer_wake_;
    }
  }
  if (refused) {
    Tell(callout, [o = observer_.get()] { o->OnWriteRefused(); });
    return absl::ResourceExhaustedError(
        absl::StrCat("tether: the outbox holds max_outbox (", max_,
                     ") unacknowledged writes; write again after on_writable"));
  }
  TellChanged(callout, 1);
  if (wake) wake();
  return absl::OkStatus();
}

void BidiOutbox::SetOnWritable(std::function<void()> on_writable) {
  std::function<void()> writable;
  {
    MutexLock lock(&mu_);
    on_writable_ = std::move(on_writable);
    writable = TakeWritableLocked();
  }
  RunWritable(writable);
}

void BidiOutbox::WritesDone() {
  std::function<void()> wake;
  {
    MutexLock lock(&mu_);
    if (writes_done_ || ended_) return;
    writes_done_ = true;
    wake = writer_wake_;
  }
  if (wake) wake();
}

void BidiOutbox::End() {
  MutexLock lock(&mu_);
  ended_ = true;
  want_writable_ = false;
  writer_wake_ = nullptr;
}

std::size_t BidiOutbox::size() {
  MutexLock lock(&mu_);
  return entries_.size();
}

AckMatch BidiOutbox::Match(const void* response) {
  Entry oldest;
  {
    MutexLock lock(&mu_);
    if (entries_.empty() && done_.empty()) return AckMatch();
    if (!entries_.empty()) oldest = entries_.front();
  }
  if (oldest.request && acknowledges_(oldest.request.get(), response)) {
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
    if (acknowledges_(rest[i].request.get(), response)) {
      return AckMatch{
          i < waiting ? AckMatch::Kind::kWrite : AckMatch::Kind::kRepeat,
          rest[i].id};
    }
  }
  return AckMatch();
}

bool BidiOutbox::Admit(const AckMatch& match, Deferred& later) {
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

std::shared_ptr<BidiOutbox::Writes> BidiOutbox::Attach(
    const std::shared_ptr<BidiOutbox>& box, std::uint64_t order,
    const std::vector<Message>& opens) {
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
  return std::make_shared<Writes>(box, token, opens);
}

bool BidiOutbox::TakerRunningLocked(const Entry& e) {
  return !open_.empty() && open_.front() <= e.last_taker;
}

void BidiOutbox::ClosedLocked(std::uint64_t token) {
  open_.erase(std::remove(open_.begin(), open_.end(), token), open_.end());
  std::deque<Entry> keep;
  for (Entry& e : done_) {
    if (TakerRunningLocked(e)) keep.push_back(std::move(e));
  }
  done_.swap(keep);
}

std::function<void()> BidiOutbox::TakeWritableLocked() {
  if (!want_writable_ || ended_ || entries_.size() >= max_ || !on_writable_) {
    return nullptr;
  }
  want_writable_ = false;
  std::function<void()> f = on_writable_;
  CalloutFn callout = callout_;
  if (!callout) return f;
  return [callout, f] { callout(f); };
}

void BidiOutbox::Tell(const CalloutFn& callout,
                      const std::function<void()>& f) {
  if (callout) callout(f);
}

void BidiOutbox::TellChanged(const CalloutFn& callout, std::int64_t delta) {
  if (delta == 0) return;
  Tell(callout, [o = observer_.get(), delta] { o->OnOutboxChanged(delta); });
}

BidiOutbox::Writes::Writes(std::shared_ptr<BidiOutbox> box, std::uint64_t token,
                           std::vector<Message> opens)
    : box_(std::move(box)), token_(token), opens_(std::move(opens)) {}

BidiOutbox::Writes::~Writes() {
  BidiOutbox& b = *box_;
  MutexLock lock(&b.mu_);
  if (attached_) b.ClosedLocked(token_);
}

BidiNext BidiOutbox::Writes::Take(Message* out) {
  BidiOutbox& b = *box_;
  MutexLock lock(&b.mu_);
  if (closed_ || in_flight_) return BidiNext::kNothing;
  if (next_open_ < opens_.size()) {
    *out = opens_[next_open_++];
    in_flight_ = true;
    in_flight_id_ = 0;
    return BidiNext::kWrite;
  }
  if (b.writer_ != token_) return BidiNext::kNothing;
  // Without acknowledgements a write goes out once: an older attempt's
  // write in flight is done or failed before the writer goes on.
  if (!b.acknowledges_ && b.entry_writes_in_flight_ > 0) {
    return BidiNext::kNothing;
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
      return BidiNext::kWrite;
    }
  }
  if (b.writes_done_ && !sent_writes_done_) {
    sent_writes_done_ = true;
    return BidiNext::kWritesDone;
  }
  return BidiNext::kNothing;
}

void BidiOutbox::Writes::Written(bool ok) {
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
      while (!b.entries_.empty() && b.entries_.front().id <= in_flight_id_) {
        b.entries_.pop_front();
        ++done;
      }
      writable = b.TakeWritableLocked();
      if (b.observer_) callout = b.callout_;
    }
  }
  b.TellChanged(callout, -done);
  if (wake) wake();
  RunWritable(writable);
}

void BidiOutbox::Writes::SetWakeup(std::function<void()> wake) {
  BidiOutbox& b = *box_;
  MutexLock lock(&b.mu_);
  if (b.writer_ == token_ && !b.ended_) b.writer_wake_ = std::move(wake);
}

void BidiOutbox::Writes::Close() {
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

std::function<void()> BidiOutbox::Writes::EndWriteLocked(BidiOutbox& b) {
  in_flight_ = false;
  if (in_flight_id_ == 0) return nullptr;
  --b.entry_writes_in_flight_;
  return b.writer_ != token_ ? b.writer_wake_ : nullptr;
}

}  // namespace internal
}  // namespace tether
