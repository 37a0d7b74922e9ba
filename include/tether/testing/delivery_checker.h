// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// A checker of what a stream delivers, for tests and canaries of code that
// uses tether. Part of `tether::tether_mocks`.
#ifndef TETHER_TESTING_DELIVERY_CHECKER_H_
#define TETHER_TESTING_DELIVERY_CHECKER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "tether/function.h"
#include "tether/observer.h"
#include "tether/position.h"
#include "tether/stream_options.h"

namespace tether {
namespace fakes {

// What a `DeliveryChecker` expects of a stream: its position rules, as the
// stream's spec and options state them. `DeliveryChecker::For(spec,
// options)` reads them from a `StreamSpec` or `BidiStreamSpec`.
template <class Response>
struct DeliveryRules {
  // The position of a delivered response (a spec's `position_of`, or its
  // `sequence_of` as `Position::Item`). Default (empty): no position rules.
  Function<absl::optional<Position>(const Response&)> position_of;
  // The spec's `spacing`. Default kDense: a skip must be reported.
  PositionSpacing spacing = PositionSpacing::kDense;
  // The options' `gap_policy`. Default kDeliverAndReport.
  GapPolicy gap_policy = GapPolicy::kDeliverAndReport;
  // The spec's `deliver_progress`. Default false: a delivered progress
  // notice is a violation.
  bool deliver_progress = false;
  // The spec's `initial_last_seq` / `initial_position`. Default none.
  absl::optional<std::uint64_t> initial_position;
  // The spec's `cursor_of`. Default (empty): no cursor rule.
  Function<absl::optional<std::string>(const Response&)> cursor_of;
  // Names a response in a violation's text. Default: its position.
  Function<std::string(const Response&)> describe;
};

namespace delivery_internal {

// The checker's rules over positions and callbacks, apart from the response
// type. Not thread-safe: `DeliveryChecker` calls it under its lock.
class Ledger {
 public:
  Ledger(bool positions, PositionSpacing spacing, GapPolicy gap_policy,
         bool deliver_progress, absl::optional<std::uint64_t> initial)
      : positions_(positions),
        spacing_(spacing),
        gap_policy_(gap_policy),
        deliver_progress_(deliver_progress),
        has_last_(initial.has_value()),
        last_(initial.value_or(0)) {}

  // A delivered message (`what` names it). `pos` is only read with
  // position rules; `cursor` only when the spec has cursors.
  void Message(const absl::optional<Position>& pos,
               const absl::optional<std::string>& cursor,
               const std::string& what) {
    ++messages_;
    const std::string at = absl::StrCat(" (message #", messages_, ": ", what,
                                        ")");
    if (!Callback("on_message", at)) return;
    if (cursor && !cursors_.insert(*cursor).second) {
      Violate(absl::StrCat("unique: cursor '", *cursor, "' delivered again",
                           at));
    }
    if (!positions_) return;
    if (!pos) {
      Violate(absl::StrCat("ordered: a message without a position", at));
      return;
    }
    const std::uint64_t first = pos->first(), last = pos->last();
    switch (pos->kind()) {
      case Position::Kind::kNone:
        return;
      case Position::Kind::kProgress:
        if (!deliver_progress_) {
          Violate(absl::StrCat("progress: a progress notice at ", last,
                               " delivered although deliver_progress is "
                               "false",
                               at));
        } else if (has_last_ && last <= last_) {
          Violate(absl::StrCat("progress: a notice at ", last,
                               " after position ", last_,
                               " (notices never go backwards)", at));
        }
        Move(last);
        return;
      case Position::Kind::kItem:
      case Position::Kind::kItems:
        break;
    }
    if (first > last) {
      Violate(absl::StrCat("atomic: a batch ", first, "..", last,
                           " that ends before it starts", at));
      return;
    }
    if (has_last_ && last <= last_) {
      Violate(absl::StrCat(SeenBefore(first, last) ? "unique: " : "ordered: ",
                           Range(first, last), " delivered after position ",
                           last_, at));
      return;
    }
    if (has_last_ && first <= last_) {
      Violate(absl::StrCat("atomic: batch ", Range(first, last),
                           " straddles the last delivered position ", last_,
                           " (items at or below it delivered again)", at));
    } else if (has_last_ && spacing_ == PositionSpacing::kDense &&
               first > last_ + 1) {
      Gap gap{last_ + 1, first};
      if (gap_policy_ == GapPolicy::kFail) {
        Violate(absl::StrCat("gap: ", Range(gap.expected, first - 1),
                             " skipped and the next delivered although "
                             "gap_policy is kFail",
                             at));
      } else if (reported_.erase(gap) == 0) {
        pending_.emplace_back(gap, at);
      }
    }
    recent_.emplace_back(first, last);
    if (recent_.size() > kRecent) recent_.pop_front();
    Move(last);
  }

  void Done(const absl::Status& status) {
    if (!Callback("on_done", absl::StrCat(" (", status.ToString(), ")"))) {
      return;
    }
    done_ = true;
    done_status_ = status;
  }

  // Another callback of the stream (a bidi stream's on_writable).
  void Other(absl::string_view name) { Callback(name, ""); }

  void Destroyed() { destroyed_ = true; }

  void AttemptStarted(const AttemptInfo& info) {
    if (!positions_ || !info.resumed) return;
    if (has_resume_ && info.resume_after_seq < resume_) {
      Violate(absl::StrCat("resumable: attempt ", info.attempt,
                           " resumes after ", info.resume_after_seq,
                           ", behind an earlier attempt's ", resume_,
                           " with no resync between"));
    }
    has_resume_ = true;
    if (info.resume_after_seq > resume_) resume_ = info.resume_after_seq;
  }

  void GapReported(std::uint64_t expected, std::uint64_t got) {
    Gap gap{expected, got};
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      if (it->first == gap) {
        pending_.erase(it);
        return;
      }
    }
    reported_.insert(gap);
  }

  // A resync: positions (delivered and resumed) start over at `after`.
  void Resynced(std::uint64_t after) {
    has_last_ = true;
    last_ = after;
    has_resume_ = true;
    resume_ = after;
    recent_.clear();
  }

  // The first violation, or a gap nobody reported; empty when none.
  std::string FirstViolation() const {
    if (!first_.empty()) return first_;
    if (!pending_.empty()) {
      const Gap& g = pending_.front().first;
      return absl::StrCat("no silent gap: ", Range(g.expected, g.got - 1),
                          " skipped with no OnGap report",
                          pending_.front().second);
    }
    return "";
  }

  std::uint64_t messages() const { return messages_; }
  bool done() const { return done_; }
  const absl::Status& done_status() const { return done_status_; }
  // Whether this call recorded the first violation (so it is told once).
  bool TakeNewViolation() {
    bool fresh = !first_.empty() && !told_;
    if (fresh) told_ = true;
    return fresh;
  }
  void Violate(std::string what) {
    if (first_.empty()) first_ = std::move(what);
  }

 private:
  struct Gap {
    std::uint64_t expected;
    std::uint64_t got;
    bool operator==(const Gap& o) const {
      return expected == o.expected && got == o.got;
    }
    bool operator<(const Gap& o) const {
      return expected != o.expected ? expected < o.expected : got < o.got;
    }
  };
  // Delivered ranges remembered to tell a repeat from a reordering.
  static constexpr std::size_t kRecent = 1024;

  static std::string Range(std::uint64_t first, std::uint64_t last) {
    return first == last ? absl::StrCat("item ", first)
                         : absl::StrCat("items ", first, "..", last);
  }

  bool SeenBefore(std::uint64_t first, std::uint64_t last) const {
    for (const auto& r : recent_) {
      if (r.first <= last && first <= r.second) return true;
    }
    return false;
  }

  // False (and a violation) for a callback after the end or the destructor.
  bool Callback(absl::string_view name, const std::string& at) {
    if (destroyed_) {
      Violate(absl::StrCat("no callback after the destructor: ", name, at));
      return false;
    }
    if (done_) {
      Violate(absl::StrCat("no callback after on_done: ", name, " after on_done(",
                           done_status_.ToString(), ")", at));
      return false;
    }
    return true;
  }

  void Move(std::uint64_t to) {
    if (!has_last_ || to > last_) last_ = to;
    has_last_ = true;
  }

  const bool positions_;
  const PositionSpacing spacing_;
  const GapPolicy gap_policy_;
  const bool deliver_progress_;
  bool has_last_;
  std::uint64_t last_;
  bool has_resume_ = false;
  std::uint64_t resume_ = 0;
  std::deque<std::pair<std::uint64_t, std::uint64_t>> recent_;
  std::deque<std::pair<Gap, std::string>> pending_;
  std::set<Gap> reported_;
  std::set<std::string> cursors_;
  std::uint64_t messages_ = 0;
  bool done_ = false;
  bool destroyed_ = false;
  bool told_ = false;
  absl::Status done_status_;
  std::string first_;
};

}  // namespace delivery_internal

// Checks, as a stream runs, the delivery guarantees tether makes, and keeps
// the first violation with the message that broke it:
//   - ordered and unique: positions only increase (a repeat and a
//     reordering are told apart); cursors are never delivered twice;
//   - no silent gap: with dense spacing, a skip is reported to the observer
//     (`OnGap`) or, under `GapPolicy::kFail`, never delivered;
//   - resumable: the position an attempt resumes after never moves
//     backwards, except to where a resync put it;
//   - progress notices are delivered only when asked, never going back;
//   - batches are atomic: never delivered across the last position;
//   - no callback after `on_done` or after `StreamDestroyed()`.
// A gap the stream has not reported yet counts as a violation only when it
// is still unreported at `status()`.
//
// Attach it by wrapping the stream's callbacks and observer:
//
//   auto checker = DeliveryChecker<Event>::For(spec, options);
//   options.observer = checker.Observer(options.observer);
//   auto stream = ReconnectingStream<Req, Event>::Start(
//       target, spec, options, checker.OnMessage(apply), checker.OnDone(done));
//   ...
//   EXPECT_TRUE(checker.status().ok()) << checker.status();
//
// Thread safety: every method from any thread; the wrapped callbacks and
// the forwarded observer run with no lock of the checker held, after the
// check. Copies share one record, and the wrappers keep it alive.
template <class Response>
class DeliveryChecker {
 public:
  using MessageCallback = Function<void(Response&&)>;
  using DoneCallback = Function<void(const absl::Status&)>;

  explicit DeliveryChecker(DeliveryRules<Response> rules)
      : state_(std::make_shared<State>(std::move(rules))) {}

  // The rules of a `StreamSpec` or `BidiStreamSpec` and its options.
  template <class Spec>
  static DeliveryChecker For(const Spec& spec,
                             const ReconnectingStreamOptions& options) {
    DeliveryRules<Response> rules;
    if (spec.position_of) {
      auto of = spec.position_of;
      rules.position_of = [of](const Response& r) {
        return absl::optional<Position>(of(r));
      };
    } else if (spec.sequence_of) {
      auto of = spec.sequence_of;
      rules.position_of = [of](const Response& r) -> absl::optional<Position> {
        absl::optional<std::uint64_t> seq = of(r);
        if (!seq) return absl::nullopt;
        return Position::Item(*seq);
      };
    }
    rules.spacing = spec.sequence_of ? PositionSpacing::kDense : spec.spacing;
    rules.gap_policy = options.gap_policy;
    rules.deliver_progress = spec.deliver_progress;
    rules.initial_position = InitialPosition(spec);
    rules.cursor_of = spec.cursor_of;
    if (spec.is_drain_notice && rules.position_of) {
      // A delivered drain notice carries no position (a control message).
      auto notice = spec.is_drain_notice;
      auto of = std::move(rules.position_of);
      rules.position_of = [notice, of](const Response& r) {
        return notice(r) ? absl::optional<Position>(Position::None()) : of(r);
      };
    }
    return DeliveryChecker(std::move(rules));
  }

  // `app` behind the check (may be empty: the check only).
  MessageCallback OnMessage(MessageCallback app = nullptr) const {
    std::shared_ptr<State> s = state_;
    return [s, app = std::move(app)](Response&& r) {
      s->Message(r);
      if (app) app(std::move(r));
    };
  }
  DoneCallback OnDone(DoneCallback app = nullptr) const {
    std::shared_ptr<State> s = state_;
    return [s, app = std::move(app)](const absl::Status& status) {
      s->Run([&](delivery_internal::Ledger& l) { l.Done(status); });
      if (app) app(status);
    };
  }
  // Any other callback of the stream, e.g. a bidi stream's `on_writable`.
  std::function<void()> OnCallback(absl::string_view name,
                                   std::function<void()> app) const {
    std::shared_ptr<State> s = state_;
    return [s, name = std::string(name), app = std::move(app)] {
      s->Run([&](delivery_internal::Ledger& l) { l.Other(name); });
      if (app) app();
    };
  }

  // An observer that checks attempts, gaps and resyncs, then forwards every
  // event to `next` (may be null).
  std::shared_ptr<StreamObserver> Observer(
      std::shared_ptr<StreamObserver> next = nullptr) const {
    return std::make_shared<Watch>(state_, std::move(next));
  }

  // The stream's destructor has returned: any callback from now on is a
  // violation.
  void StreamDestroyed() const {
    state_->Run([](delivery_internal::Ledger& l) { l.Destroyed(); });
  }

  // Runs once, at the first violation, with its text (a canary's alarm).
  // With no lock held, on the thread of the callback that broke the rule.
  void SetOnViolation(std::function<void(const std::string&)> fn) const {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->on_violation = std::move(fn);
  }

  // OK, or INTERNAL with the first violation ("DeliveryChecker: unique:
  // item 7 delivered after position 9 (message #12: ...)").
  absl::Status status() const {
    std::string v = first_violation();
    if (v.empty()) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("DeliveryChecker: ", v));
  }
  std::string first_violation() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->ledger.FirstViolation();
  }
  // Messages delivered to the application so far.
  std::uint64_t delivered() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->ledger.messages();
  }
  // Whether `on_done` ran, and with what.
  bool done() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->ledger.done();
  }
  absl::Status done_status() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->ledger.done_status();
  }

  // Records a violation found by a caller's own check (a bidi
  // acknowledgement rule), kept only if it is the first.
  void Violate(std::string what) const {
    state_->Run([&](delivery_internal::Ledger& l) { l.Violate(std::move(what)); });
  }

 private:
  struct State {
    explicit State(DeliveryRules<Response> r)
        : rules(std::move(r)),
          ledger(static_cast<bool>(rules.position_of), rules.spacing,
                 rules.gap_policy, rules.deliver_progress,
                 rules.initial_position) {}

    // Runs `f` on the ledger under the lock, then tells a new violation.
    template <class F>
    void Run(F&& f) {
      std::function<void(const std::string&)> tell;
      std::string what;
      {
        std::lock_guard<std::mutex> lock(mu);
        f(ledger);
        if (ledger.TakeNewViolation()) {
          tell = on_violation;
          what = ledger.FirstViolation();
        }
      }
      if (tell) tell(what);
    }

    void Message(const Response& r) {
      // The spec's functions are the app's: called outside the lock.
      absl::optional<Position> pos;
      if (rules.position_of) pos = rules.position_of(r);
      absl::optional<std::string> cursor;
      if (rules.cursor_of) cursor = rules.cursor_of(r);
      std::string what = rules.describe ? rules.describe(r) : Describe(pos);
      Run([&](delivery_internal::Ledger& l) { l.Message(pos, cursor, what); });
    }

    static std::string Describe(const absl::optional<Position>& pos) {
      if (!pos) return "no position";
      switch (pos->kind()) {
        case Position::Kind::kNone:
          return "Position::None()";
        case Position::Kind::kItem:
          return absl::StrCat("Position::Item(", pos->first(), ")");
        case Position::Kind::kItems:
          return absl::StrCat("Position::Items(", pos->first(), ", ",
                              pos->last(), ")");
        case Position::Kind::kProgress:
          return absl::StrCat("Position::Progress(", pos->last(), ")");
      }
      return "";
    }

    const DeliveryRules<Response> rules;
    std::mutex mu;
    delivery_internal::Ledger ledger;
    std::function<void(const std::string&)> on_violation;
  };

  class Watch final : public StreamObserver {
   public:
    Watch(std::shared_ptr<State> state, std::shared_ptr<StreamObserver> next)
        : state_(std::move(state)), next_(std::move(next)) {}
    void OnAttemptStarted(const AttemptInfo& info) override {
      state_->Run(
          [&](delivery_internal::Ledger& l) { l.AttemptStarted(info); });
      if (next_) next_->OnAttemptStarted(info);
    }
    void OnGap(std::uint64_t expected, std::uint64_t got) override {
      state_->Run(
          [&](delivery_internal::Ledger& l) { l.GapReported(expected, got); });
      if (next_) next_->OnGap(expected, got);
    }
    void OnResync(const absl::Status& why, std::uint64_t after) override {
      state_->Run([&](delivery_internal::Ledger& l) { l.Resynced(after); });
      if (next_) next_->OnResync(why, after);
    }
    void OnFirstMessage(const AttemptInfo& info, absl::Duration d) override {
      if (next_) next_->OnFirstMessage(info, d);
    }
    void OnAttemptEnded(const AttemptInfo& info, const absl::Status& status,
                        EndClass c, bool by_client) override {
      if (next_) next_->OnAttemptEnded(info, status, c, by_client);
    }
    void OnDuplicateDropped(std::uint64_t seq, std::uint64_t last) override {
      if (next_) next_->OnDuplicateDropped(seq, last);
    }
    void OnBackoff(absl::Duration delay, const absl::Status& last) override {
      if (next_) next_->OnBackoff(delay, last);
    }
    void OnRetryBudgetWait(absl::Duration added) override {
      if (next_) next_->OnRetryBudgetWait(added);
    }
    void OnGaveUp(const absl::Status& status) override {
      if (next_) next_->OnGaveUp(status);
    }
    void OnStalled(const AttemptInfo& info, absl::Duration silent) override {
      if (next_) next_->OnStalled(info, silent);
    }
    void OnConnectionDraining(std::uint64_t id,
                              absl::string_view why) override {
      if (next_) next_->OnConnectionDraining(id, why);
    }
    void OnDrainNotice(const AttemptInfo& info) override {
      if (next_) next_->OnDrainNotice(info);
    }

   private:
    const std::shared_ptr<State> state_;
    const std::shared_ptr<StreamObserver> next_;
  };

  template <class Spec>
  static auto InitialPosition(const Spec& spec)
      -> decltype(spec.initial_last_seq) {
    return spec.initial_last_seq;
  }
  template <class Spec>
  static auto InitialPosition(const Spec& spec)
      -> decltype(spec.initial_position) {
    return spec.initial_position;
  }

  std::shared_ptr<State> state_;
};

// A `DeliveryChecker` for a bidi stream with acknowledgements, which also
// checks that every write the app made is acknowledged to it exactly once
// and in order (by the spec's `acknowledges`): a response that acknowledges
// a write already acknowledged, or a write after one still waiting, is a
// violation. Tell it each write the stream accepted (`Wrote`, after `Write`
// returned OK); `unacknowledged()` is what is still waiting.
//
//   auto checker = BidiDeliveryChecker<Order, OrderAck>::For(spec, options);
//   ...
//   if (stream->Write(order).ok()) checker.Wrote(order);
//
// Thread safety and lifetime as `DeliveryChecker`'s.
template <class Request, class Response>
class BidiDeliveryChecker {
 public:
  using AckFn = Function<bool(const Request&, const Response&)>;

  BidiDeliveryChecker(DeliveryChecker<Response> delivery, AckFn acknowledges)
      : delivery_(std::move(delivery)),
        acks_(std::make_shared<Acks>(std::move(acknowledges))) {}

  template <class Spec>
  static BidiDeliveryChecker For(const Spec& spec,
                                 const ReconnectingStreamOptions& options) {
    return BidiDeliveryChecker(DeliveryChecker<Response>::For(spec, options),
                               spec.acknowledges);
  }

  const DeliveryChecker<Response>& delivery() const { return delivery_; }

  // A write the stream accepted, in the order of the accepting `Write`s.
  void Wrote(Request request) const {
    std::lock_guard<std::mutex> lock(acks_->mu);
    acks_->incoming.push_back(std::move(request));
    ++acks_->waiting;
  }

  typename DeliveryChecker<Response>::MessageCallback OnMessage(
      typename DeliveryChecker<Response>::MessageCallback app = nullptr) const {
    std::shared_ptr<Acks> acks = acks_;
    DeliveryChecker<Response> delivery = delivery_;
    return delivery_.OnMessage(
        [acks, delivery, app = std::move(app)](Response&& r) {
          std::string v = acks->Take(r, delivery.delivered());
          if (!v.empty()) delivery.Violate(std::move(v));
          if (app) app(std::move(r));
        });
  }
  typename DeliveryChecker<Response>::DoneCallback OnDone(
      typename DeliveryChecker<Response>::DoneCallback app = nullptr) const {
    return delivery_.OnDone(std::move(app));
  }
  std::shared_ptr<StreamObserver> Observer(
      std::shared_ptr<StreamObserver> next = nullptr) const {
    return delivery_.Observer(std::move(next));
  }
  void StreamDestroyed() const { delivery_.StreamDestroyed(); }
  absl::Status status() const { return delivery_.status(); }

  // Writes accepted and not acknowledged to the app yet.
  std::size_t unacknowledged() const {
    std::lock_guard<std::mutex> lock(acks_->mu);
    return acks_->waiting;
  }
  std::size_t acknowledged() const {
    std::lock_guard<std::mutex> lock(acks_->mu);
    return acks_->acked_count;
  }

 private:
  struct Acks {
    explicit Acks(AckFn fn) : acknowledges(std::move(fn)) {}

    // Checks `r` against the writes; returns a violation's text or "".
    // Runs in the stream's `on_message`, one at a time (the stream's
    // promise), so `pending` and `acked` are this path's own and the app's
    // `acknowledges` runs with no lock held.
    std::string Take(const Response& r, std::uint64_t message) {
      if (!acknowledges) return "";
      {
        std::lock_guard<std::mutex> lock(mu);
        for (auto& w : incoming) pending.push_back(std::move(w));
        incoming.clear();
      }
      std::string v = Check(r, message);
      std::lock_guard<std::mutex> lock(mu);
      waiting = incoming.size() + pending.size();
      return v;
    }

    std::string Check(const Response& r, std::uint64_t message) {
      if (!pending.empty() && acknowledges(pending.front(), r)) {
        acked.push_back(std::move(pending.front()));
        pending.pop_front();
        if (acked.size() > kRecent) acked.pop_front();
        std::lock_guard<std::mutex> lock(mu);
        ++acked_count;
        return "";
      }
      const std::size_t before = acked_count_seen();
      for (std::size_t i = 0; i < acked.size(); ++i) {
        if (acknowledges(acked[i], r)) {
          return absl::StrCat("acknowledged once: message #", message,
                              " acknowledges write ",
                              before - acked.size() + i + 1,
                              " a second time");
        }
      }
      for (std::size_t i = 1; i < pending.size() && i <= kRecent; ++i) {
        if (acknowledges(pending[i], r)) {
          return absl::StrCat("acknowledged in order: message #", message,
                              " acknowledges write ", before + i + 1,
                              " while write ", before + 1,
                              " waits for its acknowledgement");
        }
      }
      return "";
    }

    std::size_t acked_count_seen() {
      std::lock_guard<std::mutex> lock(mu);
      return acked_count;
    }

    static constexpr std::size_t kRecent = 256;
    const AckFn acknowledges;
    std::mutex mu;  // guards incoming, waiting, acked_count
    std::deque<Request> incoming;
    std::size_t waiting = 0;
    std::size_t acked_count = 0;
    // The message path's own (see Take).
    std::deque<Request> pending;
    std::deque<Request> acked;
  };

  DeliveryChecker<Response> delivery_;
  std::shared_ptr<Acks> acks_;
};

}  // namespace fakes
}  // namespace tether

#endif  // TETHER_TESTING_DELIVERY_CHECKER_H_
