// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "examples/common/ledger_watchers.h"

#include <algorithm>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_format.h"
#include "tether/generated_method.h"
#include "tether/metrics.h"
#include "tether/position.h"

namespace tether {
namespace examples {

void WatchCounts::Add(const WatchCounts& o) {
  events += o.events;
  duplicates += o.duplicates;
  gaps += o.gaps;
  lost += o.lost;
  bad_events += o.bad_events;
  errors += o.errors;
  reopens += o.reopens;
  dead_attempts += o.dead_attempts;
}

// --- WatchRecorder ---------------------------------------------------------

WatchRecorder::WatchRecorder(std::string account, absl::Time epoch,
                             const std::atomic<int>* phase)
    : account_(std::move(account)), epoch_(epoch), phase_(phase) {
  absl::MutexLock lock(&mu_);
  last_progress_ = absl::Now();
}

WatchCounts& WatchRecorder::BucketLocked() {
  int p = phase_ == nullptr ? 0 : phase_->load(std::memory_order_relaxed);
  return phases_[std::clamp(p, 0, kMaxPhases - 1)];
}

void WatchRecorder::OnEvent(const lv1::AccountEvent& ev) {
  if (ev.drain_notice()) return;  // not an event of the account
  absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  WatchCounts& b = BucketLocked();
  bool bad = ev.account() != account_ ||
             ev.balance() != static_cast<std::int64_t>(10 * ev.seq());
  if (bad) {
    ++total_.bad_events;
    ++b.bad_events;
  }
  if (ev.seq() <= last_seq_) {
    ++total_.duplicates;
    ++b.duplicates;
    return;
  }
  if (ev.seq() > last_seq_ + 1) {
    auto lost = static_cast<std::int64_t>(ev.seq() - last_seq_ - 1);
    ++total_.gaps;
    ++b.gaps;
    total_.lost += lost;
    b.lost += lost;
  }
  last_seq_ = ev.seq();
  ++total_.events;
  ++b.events;
  max_stall_ms_ =
      std::max(max_stall_ms_, absl::ToDoubleMilliseconds(now - last_progress_));
  last_progress_ = now;
  double t = absl::ToDoubleMilliseconds(now - epoch_);
  if (segments_.empty() || segments_.back().replica != ev.replica()) {
    segments_.push_back(Segment{ev.replica(), t, t});
  } else {
    segments_.back().end_ms = t;
  }
}

void WatchRecorder::OnAttemptEnded(bool got_message,
                                   const absl::Status& status) {
  if (got_message || status.ok()) return;
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  ++total_.dead_attempts;
  ++BucketLocked().dead_attempts;
}

void WatchRecorder::OnReopen() {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  ++total_.reopens;
  ++BucketLocked().reopens;
}

void WatchRecorder::OnError(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  ++total_.errors;
  ++BucketLocked().errors;
  last_error_ = status.ToString();
}

void WatchRecorder::Close() {
  absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  closed_ = true;
  max_stall_ms_ =
      std::max(max_stall_ms_, absl::ToDoubleMilliseconds(now - last_progress_));
}

WatchCounts WatchRecorder::total() const {
  absl::MutexLock lock(&mu_);
  return total_;
}
WatchCounts WatchRecorder::phase(int p) const {
  absl::MutexLock lock(&mu_);
  return phases_[std::clamp(p, 0, kMaxPhases - 1)];
}
std::vector<Segment> WatchRecorder::segments() const {
  absl::MutexLock lock(&mu_);
  return segments_;
}
double WatchRecorder::max_stall_ms() const {
  absl::MutexLock lock(&mu_);
  return max_stall_ms_;
}
std::string WatchRecorder::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

// --- TetherWatch -----------------------------------------------------------

// Counts reopens and attempts that died before their first message.
class TetherWatch::Observer final : public StreamObserver {
 public:
  explicit Observer(std::shared_ptr<WatchRecorder> r) : r_(std::move(r)) {}
  void OnAttemptStarted(const AttemptInfo& info) override {
    if (info.reason != AttemptReason::kFirst) r_->OnReopen();
  }
  void OnFirstMessage(const AttemptInfo& info, absl::Duration) override {
    absl::MutexLock lock(&mu_);
    delivered_.insert(info.attempt);
  }
  void OnAttemptEnded(const AttemptInfo& info, const absl::Status& status,
                      EndClass, bool by_client) override {
    bool got;
    {
      absl::MutexLock lock(&mu_);
      got = delivered_.erase(info.attempt) > 0;
    }
    if (!by_client) r_->OnAttemptEnded(got, status);
  }

 private:
  std::shared_ptr<WatchRecorder> r_;
  absl::Mutex mu_;
  std::set<std::uint64_t> delivered_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<TetherWatch>> TetherWatch::Make(
    std::shared_ptr<WatchRecorder> recorder,
    const std::function<absl::StatusOr<std::unique_ptr<Stream>>(
        Stream::Spec, std::shared_ptr<StreamObserver>, Stream::MessageCallback,
        Stream::DoneCallback)>& start) {
  std::unique_ptr<TetherWatch> w(new TetherWatch);
  w->recorder_ = recorder;
  w->stopping_ = std::make_shared<std::atomic<bool>>(false);
  Stream::Spec spec;
  spec.start = StartWith<lv1::Ledger>(&lv1::Ledger::Stub::async::WatchAccount);
  spec.request.set_account(recorder->account());
  // A replica that leaves (ledger_server --shutdown=tether) sends a drain
  // notice on each watch: the stream moves make before break on it, as on
  // a GOAWAY, also behind an L7 proxy that hides the GOAWAY.
  spec.is_drain_notice = [](const lv1::AccountEvent& e) {
    return e.drain_notice();
  };
  spec.position_of = [](const lv1::AccountEvent& e) {
    return Position::Item(e.seq());
  };
  spec.resume_after = [](lv1::WatchAccountRequest& r, std::uint64_t seq) {
    r.set_after_seq(seq);
  };
  auto stopping = w->stopping_;
  auto stream = start(
      std::move(spec), std::make_shared<Observer>(recorder),
      [recorder](lv1::AccountEvent&& e) { recorder->OnEvent(e); },
      [recorder, stopping](const absl::Status& s) {
        if (!stopping->load() && !s.ok()) recorder->OnError(s);
      });
  if (!stream.ok()) return stream.status();
  w->stream_ = *std::move(stream);
  return w;
}

absl::StatusOr<std::unique_ptr<TetherWatch>> TetherWatch::Start(
    Target target, std::shared_ptr<WatchRecorder> recorder,
    ReconnectingStreamOptions base) {
  return Make(std::move(recorder),
              [&](Stream::Spec spec, std::shared_ptr<StreamObserver> own,
                  Stream::MessageCallback on_message,
                  Stream::DoneCallback on_done) {
                base.observer = base.observer
                                    ? CombineObservers({own, base.observer})
                                    : own;
                return Stream::Start(std::move(target), std::move(spec),
                                     std::move(base), std::move(on_message),
                                     std::move(on_done));
              });
}

absl::StatusOr<std::unique_ptr<TetherWatch>> TetherWatch::Start(
    Client& client, std::shared_ptr<WatchRecorder> recorder) {
  return Make(std::move(recorder),
              [&](Stream::Spec spec, std::shared_ptr<StreamObserver> own,
                  Stream::MessageCallback on_message,
                  Stream::DoneCallback on_done) {
                StreamSettings settings;
                settings.method =
                    "tether.examples.ledger.v1.Ledger/WatchAccount";
                settings.options = client.stream_options();
                settings.options->observer =
                    settings.options->observer
                        ? CombineObservers({own, settings.options->observer})
                        : own;
                return client.Start(std::move(spec), std::move(on_message),
                                    std::move(on_done), std::move(settings));
              });
}

TetherWatch::~TetherWatch() { Stop(); }

void TetherWatch::Stop() {
  if (stream_ == nullptr) return;
  stopping_->store(true);
  recorder_->Close();
  stream_->Cancel();
}

StreamStats TetherWatch::stats() const { return stream_->stats(); }

// --- NaiveWatch ------------------------------------------------------------

NaiveWatch::NaiveWatch(std::shared_ptr<grpc::Channel> channel,
                       std::shared_ptr<WatchRecorder> recorder,
                       NaiveWatchOptions options)
    : stub_(lv1::Ledger::NewStub(channel)),
      recorder_(std::move(recorder)),
      options_(std::move(options)) {
  thread_ = std::thread([this] { Run(); });
}

NaiveWatch::~NaiveWatch() { Stop(); }

void NaiveWatch::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      stopping_ = true;
      if (ctx_ != nullptr) ctx_->TryCancel();
    }
  }
  recorder_->Close();
  if (thread_.joinable()) thread_.join();
}

bool NaiveWatch::ended() const {
  absl::MutexLock lock(&mu_);
  return ended_;
}

void NaiveWatch::Run() {
  std::uint64_t last = 0;
  bool first = true;
  while (true) {
    absl::optional<CircuitBreaker::Permit> permit;
    absl::Status end;
    bool got = false;
    if (options_.breaker != nullptr) {
      auto p = options_.breaker->TryAcquire();
      if (p.ok()) {
        permit = *std::move(p);
      } else {
        end = p.status();
      }
    }
    if (options_.breaker == nullptr || permit.has_value()) {
      if (!first) recorder_->OnReopen();
      first = false;
      grpc::ClientContext ctx;
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
        ctx_ = &ctx;
      }
      lv1::WatchAccountRequest req;
      req.set_account(recorder_->account());
      req.set_after_seq(last);
      auto reader = stub_->WatchAccount(&ctx, req);
      lv1::AccountEvent ev;
      while (reader->Read(&ev)) {
        if (ev.drain_notice()) continue;  // a naive client ignores it
        if (!got && permit.has_value()) {
          // The call went through: a success (and the permit, a half-open
          // probe maybe, is not held for the stream's whole life).
          options_.breaker->Record(std::move(*permit), Outcome::kSuccess);
          permit.reset();
        }
        got = true;
        recorder_->OnEvent(ev);
        last = ev.seq();
      }
      grpc::Status s = reader->Finish();
      {
        absl::MutexLock lock(&mu_);
        ctx_ = nullptr;
        if (stopping_) return;
      }
      end = absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                         s.error_message());
      if (options_.breaker != nullptr && !end.ok() && !permit.has_value()) {
        // A breaker that is not drain-aware counts every error end.
        auto p = options_.breaker->TryAcquire();
        if (p.ok()) permit = *std::move(p);
      }
      if (permit.has_value()) {
        options_.breaker->Record(
            std::move(*permit),
            end.ok() ? Outcome::kSuccess : Outcome::kFailure, end);
      }
      recorder_->OnAttemptEnded(got, end);
      if (got) continue;  // reopen at once
      if (end.ok()) end = absl::UnavailableError("stream ended empty");
    }
    // Ended before its first message (or the breaker said no): "the ledger
    // is down".
    recorder_->OnError(end);
    absl::MutexLock lock(&mu_);
    if (options_.resubscribe_after <= absl::ZeroDuration()) {
      ended_ = true;
      return;
    }
    auto stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stop),
                             options_.resubscribe_after)) {
      return;
    }
  }
}

std::string CountsJson(const std::string& mode, int streams,
                       const WatchCounts& c, double max_stall_ms,
                       std::int64_t migrations) {
  return absl::StrFormat(
      "{\"mode\":\"%s\",\"streams\":%d,\"events\":%d,\"duplicates\":%d,"
      "\"gaps\":%d,\"lost\":%d,\"bad_events\":%d,\"errors\":%d,"
      "\"reopens\":%d,\"dead_attempts\":%d,\"migrations\":%d,"
      "\"max_stall_ms\":%.1f}",
      mode, streams, c.events, c.duplicates, c.gaps, c.lost, c.bad_events,
      c.errors, c.reopens, c.dead_attempts, migrations, max_stall_ms);
}

}  // namespace examples
}  // namespace tether
