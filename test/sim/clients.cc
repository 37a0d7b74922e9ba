// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "test/sim/clients.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tether/metrics.h"

namespace tether {
namespace sim {

const char* StreamKindName(StreamKind k) {
  switch (k) {
    case StreamKind::kDense:
      return "dense";
    case StreamKind::kSparse:
      return "sparse";
    case StreamKind::kBatch:
      return "batch";
    case StreamKind::kCursor:
      return "cursor";
    case StreamKind::kBidi:
      return "bidi";
  }
  return "?";
}

// Attempts of a server stream: calls on the simulated network.
class Client::Factory final : public AttemptFactory<SimReq, SimMsg> {
 public:
  Factory(Network& network, Feed& feed) : network_(network), feed_(feed) {}
  std::shared_ptr<Attempt> StartAttempt(
      const ConnectionPick& pick, const AttemptInfo& /*info*/,
      const SimReq& request,
      std::shared_ptr<AttemptListener<SimMsg>> listener) override {
    return network_.StartCall(&feed_, pick.connection_id, request.has_after,
                              request.after, std::move(listener), nullptr);
  }

 private:
  Network& network_;
  Feed& feed_;
};

class Client::BidiFactory final : public BidiAttemptFactory<SimWrite, SimMsg> {
 public:
  BidiFactory(Network& network, Feed& feed, Client& client)
      : network_(network), feed_(feed), client_(client) {}
  std::shared_ptr<Attempt> StartAttempt(
      const ConnectionPick& pick, const AttemptInfo& info,
      const ResumeState& resume,
      std::shared_ptr<BidiWrites<SimWrite>> writes,
      std::shared_ptr<AttemptListener<SimMsg>> listener) override {
    std::shared_ptr<Call> call = network_.StartCall(
        &feed_, pick.connection_id, resume.has_position, resume.last,
        std::move(listener), std::move(writes));
    client_.OnBidiCall(info.attempt, call);
    return call;
  }

 private:
  Network& network_;
  Feed& feed_;
  Client& client_;
};

Client::Client(World& world, Network& network,
               std::shared_ptr<ConnectionSource> source, Feed& feed,
               StreamKind kind, AppBehavior app,
               ReconnectingStreamOptions options)
    : world_(world),
      network_(network),
      source_(std::move(source)),
      feed_(feed),
      kind_(kind),
      app_(app),
      options_(std::move(options)),
      last_progress_(world.Now()) {}

Client::~Client() { Destroy(); }

std::string Client::Name() const {
  return absl::StrCat("stream ", feed_.index, " (", StreamKindName(kind_),
                      ")");
}

namespace {

template <class Spec>
void SetPositions(Spec& spec, StreamKind kind, bool deliver_progress) {
  switch (kind) {
    case StreamKind::kDense:
    case StreamKind::kBidi:
      spec.sequence_of = [](const SimMsg& m) -> absl::optional<std::uint64_t> {
        return m.first;
      };
      break;
    case StreamKind::kSparse:
      spec.position_of = [](const SimMsg& m) { return m.position(); };
      spec.spacing = PositionSpacing::kSparse;
      spec.deliver_progress = deliver_progress;
      break;
    case StreamKind::kBatch:
      spec.position_of = [](const SimMsg& m) { return m.position(); };
      spec.trim_delivered = [](SimMsg& m, std::uint64_t last) {
        m.first = last + 1;
      };
      break;
    case StreamKind::kCursor:
      spec.cursor_of = [](const SimMsg& m) -> absl::optional<std::string> {
        return absl::StrCat("c", m.last);
      };
      break;
  }
}

}  // namespace

// Traces one stream's attempts.
//
// It also checks the reason each attempt reports: the first attempt a
// resync starts (no failed start between: that would report a backoff)
// says `kResync`.
class Client::Tracer final : public StreamObserver {
 public:
  Tracer(World& world, Client& client, std::string name, double slow)
      : world_(world), client_(client), name_(std::move(name)), slow_(slow) {}
  void OnAttemptStarted(const AttemptInfo& i) override {
    client_.OnAttemptStarted();
    if (after_resync_ && i.reason != AttemptReason::kResync) {
      world_.Fail(absl::StrCat(name_, ": attempt ", i.attempt,
                               ", the first after a resync, reports reason ",
                               AttemptReasonName(i.reason),
                               " (want resync)"));
    }
    after_resync_ = false;
    if (slow_ > 0 && world_.rng().Chance(slow_)) {
      world_.clock()->AdvanceBy(
          world_.rng().Between(absl::Microseconds(10), absl::Milliseconds(3)));
    }
    world_.Note(absl::StrCat(name_, ": attempt ", i.attempt, " (",
                             AttemptReasonName(i.reason), ") on connection ",
                             i.connection_id,
                             i.resumed ? absl::StrCat(" after ",
                                                      i.resume_after_seq)
                                       : std::string()));
  }
  void OnAttemptEnded(const AttemptInfo& i, const absl::Status& status,
                      EndClass cls, bool by_client) override {
    if (cls == EndClass::kResync) client_.OnResyncAsked();
    world_.Note(absl::StrCat(name_, ": attempt ", i.attempt, " ended ",
                             status.ToString(),
                             by_client ? " (by the client)" : ""));
  }
  void OnBackoff(absl::Duration d, const absl::Status&) override {
    after_resync_ = false;
    world_.Note(absl::StrCat(name_, ": backoff ", absl::FormatDuration(d)));
  }
  void OnStalled(const AttemptInfo& i, absl::Duration) override {
    world_.Note(absl::StrCat(name_, ": attempt ", i.attempt, " stalled"));
  }
  void OnGap(std::uint64_t expected, std::uint64_t got) override {
    world_.Note(absl::StrCat(name_, ": gap ", expected, " -> ", got));
  }
  void OnResync(const absl::Status&, std::uint64_t after) override {
    world_.Note(absl::StrCat(name_, ": resync after ", after));
    after_resync_ = true;
    client_.OnResynced(after);
  }

 private:
  World& world_;
  Client& client_;
  const std::string name_;
  const double slow_;
  bool after_resync_ = false;
};

template <class StreamT, class Checker>
absl::Status Client::StartChecked(typename StreamT::Spec spec,
                                  const Checker& checker,
                                  std::unique_ptr<StreamT>& out) {
  ReconnectingStreamOptions options = options_;
  options.observer = checker.Observer(options.observer);
  auto s = StreamT::Start(
      source_, std::move(spec), options,
      checker.OnMessage([this](SimMsg&& m) { OnMessage(std::move(m)); }),
      checker.OnDone([this](const absl::Status& st) { OnDone(st); }));
  if (!s.ok()) return s.status();
  out = *std::move(s);
  return absl::OkStatus();
}

bool Client::Start() {
  // The simulation's tracer first, then the app's own observer, if any.
  auto tracer =
      std::make_shared<Tracer>(world_, *this, Name(), app_.slow_observer);
  options_.observer = CombineObservers({tracer, options_.observer});
  deliver_progress_ =
      kind_ == StreamKind::kSparse && world_.rng().Chance(0.5);
  auto on_violation = [this](const std::string& what) {
    world_.Fail(absl::StrCat(Name(), ": DeliveryChecker: ", what));
  };
  absl::Status started;
  if (kind_ == StreamKind::kBidi) {
    BidiStream::Spec spec;
    spec.attempt_factory = std::make_shared<BidiFactory>(network_, feed_, *this);
    spec.open_requests = [](const ResumeState& s) {
      SimWrite open;
      open.open = true;
      open.has_from = s.has_position;
      open.from = s.last;
      return std::vector<SimWrite>{open};
    };
    spec.acknowledges = [](const SimWrite& w, const SimMsg& m) {
      return m.ack == w.id;
    };
    SetPositions(spec, kind_, deliver_progress_);
    bidi_checker_ =
        std::make_unique<fakes::BidiDeliveryChecker<SimWrite, SimMsg>>(
            fakes::BidiDeliveryChecker<SimWrite, SimMsg>::For(spec, options_));
    bidi_checker_->delivery().SetOnViolation(on_violation);
    started = StartChecked<BidiStream>(std::move(spec), *bidi_checker_, bidi_);
  } else {
    Stream::Spec spec;
    spec.attempt_factory = std::make_shared<Factory>(network_, feed_);
    if (kind_ == StreamKind::kCursor) {
      spec.resume_from_cursor = [](SimReq& r, const std::string& cursor) {
        r.has_after = absl::SimpleAtoi(cursor.substr(1), &r.after);
      };
    } else {
      spec.resume_after = [](SimReq& r, std::uint64_t last) {
        r.has_after = true;
        r.after = last;
      };
    }
    SetPositions(spec, kind_, deliver_progress_);
    if (feed_.resyncs) {
      spec.resync_on_end = [](const absl::Status& s) {
        return s.code() == absl::StatusCode::kOutOfRange;
      };
      spec.resync = [this](ResyncDone done) { Listing(std::move(done)); };
    }
    checker_ = std::make_unique<fakes::DeliveryChecker<SimMsg>>(
        fakes::DeliveryChecker<SimMsg>::For(spec, options_));
    checker_->SetOnViolation(on_violation);
    started = StartChecked<Stream>(std::move(spec), *checker_, stream_);
  }
  if (!started.ok()) {
    world_.Fail(absl::StrCat(Name(), ": Start failed: ", started.ToString()));
    return false;
  }
  return true;
}

bool Client::Skippable(const SimMsg& e) const {
  return e.progress && !deliver_progress_;
}

void Client::OnResynced(std::uint64_t after) {
  resync_pending_ = true;
  resync_after_ = after;
}

void Client::OnResyncAsked() {
  resync_waiting_ = true;
  resync_asked_at_ = world_.Now();
}

void Client::Listing(ResyncDone done) {
  resync_waiting_ = false;
  listing_waited_ = world_.Now() - resync_asked_at_;
  const double u = world_.rng().Unit();
  if (u < app_.resync_hang) {
    // A listing that hangs: the stream must end once the resync has taken
    // max_time_without_progress (after a backoff of at most 10 s when
    // resyncs come in a row). It holds its worker of the pool until it
    // gives up, after that.
    world_.Note(absl::StrCat(Name(), ": the listing hangs"));
    listing_hung_ = true;
    AllowEnd();
    const absl::Duration bound =
        options_.max_time_without_progress + absl::Seconds(11);
    world_.After(bound, [this, bound] {
      if (live()) {
        world_.Fail(absl::StrCat(Name(), ": still runs ",
                                 absl::FormatDuration(bound),
                                 " after its resync hung"));
      }
    });
    world_.After(bound + world_.rng().Between(absl::ZeroDuration(),
                                              absl::Seconds(60)),
                 [done = std::move(done)] {
                   done(absl::UnavailableError("the listing gave up"));
                 });
    return;
  }
  if (u < app_.resync_hang + app_.resync_slow) {
    const absl::Duration d =
        world_.rng().Between(absl::Milliseconds(1), absl::Seconds(5));
    world_.Note(absl::StrCat(Name(), ": the listing answers in ",
                             absl::FormatDuration(d)));
    Feed* feed = &feed_;
    world_.After(d, [feed, done = std::move(done)] { done(feed->head()); });
    return;
  }
  done(feed_.head());
}

bool Client::Expect(const SimMsg& m) {
  if (resync_pending_ && m.last > resync_after_) {
    // The first delivery past a resync: the log's next entry after the
    // position the listing gave (what lies between was listed).
    resync_pending_ = false;
    if (!has_last_ || last_ < resync_after_) {
      expect_ = feed_.FirstAfter(resync_after_);
      has_last_ = true;
      last_ = resync_after_;
    }
  }
  std::size_t i = expect_;
  while (i < feed_.log.size() && Skippable(feed_.log[i])) ++i;
  if (i < feed_.log.size()) {
    const SimMsg& e = feed_.log[i];
    const bool trimmed = !e.progress && e.first < e.last &&
                         m.last == e.last && has_last_ &&
                         m.first == last_ + 1 && e.first <= last_;
    if (m.SameAs(e) || trimmed) {
      expect_ = i + 1;
      return true;
    }
  }
  world_.Fail(absl::StrCat(
      Name(), ": delivered ", m.ToString(), " but the log's next entry after ",
      has_last_ ? absl::StrCat("position ", last_) : std::string("the start"),
      " is ",
      i < feed_.log.size() ? feed_.log[i].ToString() : std::string("none"),
      i > expect_ ? " (after skipped progress notices)" : ""));
  return false;
}

void Client::OnMessage(SimMsg&& m) {
  if (destroyed_) return;  // the checker reports it
  ++delivered_;
  if (Expect(m)) {
    has_last_ = true;
    last_ = m.last;
    last_progress_ = world_.Now();
  }
  if (m.ack) {
    if (acked_at_.size() <= m.ack) {
      acked_at_.resize(m.ack + 1, absl::InfiniteFuture());
    }
    acked_at_[m.ack] = std::min(acked_at_[m.ack], world_.Now());
  }
  if (app_.slow_callback > 0 && world_.rng().Chance(app_.slow_callback)) {
    in_callback_ = true;
    world_.clock()->AdvanceBy(
        world_.rng().Between(absl::Microseconds(10), absl::Milliseconds(50)));
    in_callback_ = false;
  }
  if (app_.reentrant_end > 0 && world_.rng().Chance(app_.reentrant_end)) {
    if (world_.rng().Chance(0.5)) {
      world_.Note(absl::StrCat(Name(), ": the app cancels from on_message"));
      Cancel();
    } else {
      world_.Note(absl::StrCat(Name(), ": the app destroys from on_message"));
      Destroy();
    }
  }
}

void Client::OnDone(const absl::Status& status) {
  done_ = true;
  done_status_ = status;
  done_at_ = world_.Now();
  world_.Note(absl::StrCat(Name(), ": on_done ", status.ToString()));
  if (cancelled_) {
    if (status.code() != absl::StatusCode::kCancelled) {
      world_.Fail(absl::StrCat(Name(), ": cancelled by the app but ended ",
                               status.ToString()));
    }
    return;
  }
  // A resync that waited for a worker of the pool (every worker taken: the
  // runner checks that) may pass the stream's deadline: the deadline counts
  // from the resync's start.
  const bool resync_queued =
      (resync_waiting_ || listing_waited_ > absl::Seconds(1)) &&
      status.code() == absl::StatusCode::kDeadlineExceeded;
  if (!outage_ && !end_allowed_ && !resync_queued) {
    world_.Fail(absl::StrCat(Name(), ": ended by itself during rollouts: ",
                             status.ToString()));
  }
}

void Client::Cancel() {
  if (ended() || cancelled_) return;
  cancelled_ = true;
  if (stream_) stream_->Cancel();
  if (bidi_) bidi_->Cancel();
}

void Client::Destroy() {
  if (destroyed_) return;
  destroyed_ = true;
  stream_.reset();
  bidi_.reset();
  options_.observer.reset();  // the app lets go of its observer too
  if (checker_) checker_->StreamDestroyed();
  if (bidi_checker_) bidi_checker_->StreamDestroyed();
}

void Client::WriteLoop() {
  if (!bidi_ || ended() || writing_stopped_) return;
  CheckWriter();
  const int writes = app_.write_burst > 0 && world_.rng().Chance(app_.write_burst)
                         ? static_cast<int>(world_.rng().Between(2, 10))
                         : 1;
  for (int i = 0; i < writes && !blocked_ && !cancelled_; ++i) {
    if (!WriteOnce()) return;  // the stream is gone
  }
  world_.After(world_.rng().Between(app_.write_every / 2,
                                    app_.write_every * 3 / 2),
               [this] { WriteLoop(); });
}

void Client::OnBidiCall(std::uint64_t attempt,
                        const std::shared_ptr<Call>& call) {
  if (attempt < newest_attempt_) return;
  newest_attempt_ = attempt;
  newest_call_ = call;
}

void Client::CheckWriter() {
  if (cancelled_ || !end_expected_.empty()) return;
  while (oldest_unsent_ < next_write_ && feed_.applied.count(oldest_unsent_)) {
    ++oldest_unsent_;
  }
  if (oldest_unsent_ >= next_write_) return;
  std::shared_ptr<Call> call = newest_call_.lock();
  const absl::Time now = world_.Now();
  const absl::Time written = written_at_[oldest_unsent_];
  if (!call || !call->server_open() || now - call->started() < kWriterBound ||
      now - written < kWriterBound) {
    return;
  }
  world_.Fail(absl::StrCat(
      Name(), ": write w", oldest_unsent_, ", accepted ",
      absl::FormatDuration(now - written), " ago, never reached the server "
      "although call ", call->id(), " of attempt ", newest_attempt_,
      ", the stream's newest, has been open for ",
      absl::FormatDuration(now - call->started())));
}

bool Client::WriteOnce() {
  SimWrite w;
  w.id = next_write_;
  absl::Status s = bidi_->Write(w);
  if (s.ok()) {
    bidi_checker_->Wrote(w);
    if (written_at_.size() <= w.id) written_at_.resize(w.id + 1);
    written_at_[w.id] = world_.Now();
    ++next_write_;
  } else if (s.code() == absl::StatusCode::kResourceExhausted) {
    blocked_ = true;
    // The app's thread may be preempted between the refusal and its
    // SetOnWritable: the room may come back in between.
    if (world_.rng().Chance(0.5)) {
      world_.clock()->AdvanceBy(
          world_.rng().Between(absl::ZeroDuration(), absl::Milliseconds(20)));
      if (!bidi_) return false;
    }
    bidi_->SetOnWritable(bidi_checker_->delivery().OnCallback(
        "on_writable", [this] { blocked_ = false; }));
  } else if (s.code() == absl::StatusCode::kFailedPrecondition && !done_) {
    // The stream's end is decided and its on_done is on its way (after its
    // live attempts end): the app writes no more, and on_done must come.
    writing_stopped_ = true;
    world_.Note(absl::StrCat(Name(), ": Write refused: ", s.ToString()));
    world_.After(absl::Seconds(10), [this, why = s.ToString()] {
      if (!ended()) {
        world_.Fail(absl::StrCat(Name(), ": no on_done 10s after Write "
                                 "was refused with ", why));
      }
    });
  } else if (!done_) {
    world_.Fail(absl::StrCat(Name(), ": Write refused: ", s.ToString()));
  }
  return true;
}

void Client::ExpectEnd(std::string why) {
  end_allowed_ = true;
  end_expected_ = std::move(why);
}

void Client::OnCall(Call& call) {
  if (!end_expected_.empty() && !ended()) {
    world_.Fail(absl::StrCat(Name(), ": call ", call.id(),
                             " started although ", end_expected_,
                             " (the stream must end instead)"));
  }
  latest_call_ = call.id();
  ++calls_started_;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < calls_.size(); ++i) {
    std::shared_ptr<Call> c = calls_[i].lock();
    if (c && !c->done()) calls_[kept++] = calls_[i];
  }
  calls_.resize(kept);
  calls_.push_back(call.weak_from_this());
}

bool Client::OtherCallRunning(const Call& call) const {
  if (attempts_started_ > calls_started_) return true;
  for (const auto& w : calls_) {
    std::shared_ptr<Call> c = w.lock();
    if (c && !c->done() && c.get() != &call) return true;
  }
  return false;
}

bool Client::CaughtUp(std::string* why) const {
  if (ended() || listing_hung_) return true;  // its end is checked apart
  std::size_t i = expect_;
  // A resync that no delivery has passed yet: the listing gave what lies
  // up to its position.
  if (resync_pending_) i = std::max(i, feed_.FirstAfter(resync_after_));
  while (i < feed_.log.size() && Skippable(feed_.log[i])) ++i;
  if (i < feed_.log.size()) {
    *why = absl::StrCat(Name(), " has not delivered ", feed_.log[i].ToString(),
                        " (", feed_.log.size() - i,
                        " log entries behind; last delivered ",
                        has_last_ ? absl::StrCat(last_) : std::string("none"),
                        ")");
    return false;
  }
  if (bidi_ && blocked_ && bidi_->outbox_size() < options_.max_outbox) {
    *why = absl::StrCat(Name(), ": on_writable never ran although the outbox "
                        "has room (", bidi_->outbox_size(), " of ",
                        options_.max_outbox, ")");
    return false;
  }
  if (bidi_ && (bidi_->outbox_size() > 0 ||
                bidi_checker_->unacknowledged() > 0)) {
    *why = absl::StrCat(Name(), ": the app waits for ",
                        bidi_checker_->unacknowledged(),
                        " acknowledgements and the outbox holds ",
                        bidi_->outbox_size(), " writes");
    return false;
  }
  return true;
}

absl::Status Client::CheckerStatus() const {
  if (checker_) return checker_->status();
  if (bidi_checker_) return bidi_checker_->status();
  return absl::OkStatus();
}

absl::Time Client::AckedAt(std::uint64_t id) const {
  return id < acked_at_.size() ? acked_at_[id] : absl::InfiniteFuture();
}

}  // namespace sim
}  // namespace tether
