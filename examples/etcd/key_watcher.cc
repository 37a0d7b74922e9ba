// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "examples/etcd/key_watcher.h"

#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "examples/etcd/member_list.h"
#include "grpcpp/client_context.h"
#include "tether/backoff.h"

namespace tether {
namespace examples {
namespace etcd {
namespace {

// See where they are set in KeyWatcher::Start.
constexpr absl::Duration kSuspectProbation = absl::Seconds(3);
constexpr absl::Duration kMaxReopenDelay = absl::Seconds(1);

}  // namespace

absl::Status Validate(const KeyWatcherOptions& options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("KeyWatcherOptions.endpoints is empty");
  }
  std::set<std::string> seen;
  for (const std::string& e : options.endpoints) {
    if (e.empty() || !seen.insert(e).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "KeyWatcherOptions.endpoints: empty or duplicate entry \"", e,
          "\""));
    }
  }
  if (options.member_sync_interval != absl::ZeroDuration() &&
      (options.member_sync_interval < absl::Milliseconds(500) ||
       options.member_sync_interval > absl::Hours(1))) {
    return absl::InvalidArgumentError(
        "KeyWatcherOptions.member_sync_interval must be 0 or in [500 ms, 1 h]");
  }
  if (options.stall_timeout != absl::ZeroDuration() &&
      (options.stall_timeout < absl::Milliseconds(1) ||
       options.stall_timeout > absl::Hours(24))) {
    return absl::InvalidArgumentError(
        "KeyWatcherOptions.stall_timeout must be 0 or in [1 ms, 24 h]");
  }
  if (options.give_up_after <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "KeyWatcherOptions.give_up_after must be > 0 (or infinite)");
  }
  if (options.list_timeout <= absl::ZeroDuration() ||
      options.list_timeout > absl::Hours(1)) {
    return absl::InvalidArgumentError(
        "KeyWatcherOptions.list_timeout must be in (0, 1 h]");
  }
  return absl::OkStatus();
}

KeyWatcher::KeyWatcher(KeyWatcherOptions options, EventFn on_event,
                       ResyncFn on_resync, DoneFn on_done)
    : options_(std::move(options)),
      on_event_(std::move(on_event)),
      on_resync_(std::move(on_resync)),
      on_done_(std::move(on_done)),
      client_(std::make_shared<EtcdClient>(options_.endpoints)) {}

absl::StatusOr<std::unique_ptr<KeyWatcher>> KeyWatcher::Start(
    KeyWatcherOptions options, EventFn on_event, ResyncFn on_resync,
    DoneFn on_done) {
  absl::Status valid = Validate(options);
  if (!valid.ok()) return valid;
  std::unique_ptr<KeyWatcher> w(new KeyWatcher(
      std::move(options), std::move(on_event), std::move(on_resync),
      std::move(on_done)));

  ConnectionPoolOptions pool_options;
  if (w->options_.member_sync_interval == absl::ZeroDuration()) {
    pool_options.addresses = w->options_.endpoints;
  } else {
    auto members =
        MemberListEndpoints(w->client_, w->options_.member_sync_interval);
    if (!members.ok()) return members.status();
    pool_options.endpoints = *std::move(members);
  }
  // etcd serves grpc.health.v1: a member going NOT_SERVING is a drain.
  pool_options.health_check = true;
  pool_options.observer = w->options_.pool_observer;
  // A member that answers "etcdserver: no leader" (or goes silent) makes its
  // connection suspect, so the watch moves to another member: right when
  // that member is cut off from the others. But while the cluster elects a
  // leader (1-2 s after the leader dies) every member says so; suspicion
  // that outlives the election keeps later picks off healthy members (after
  // a freeze of two members and a later kill -9, the watch kept retrying the
  // killed member's address for 9.7 s with the live members suspect). So
  // suspicion ends after a few election timeouts instead of the default
  // 30 s.
  pool_options.suspect_probation = kSuspectProbation;
  auto pool = ConnectionPool::Create(std::move(pool_options));
  if (!pool.ok()) return pool.status();
  w->pool_ = *std::move(pool);

  absl::StatusOr<Listing> listing =
      w->client_->List(w->options_.prefix, absl::Now() + w->options_.list_timeout);
  if (!listing.ok()) {
    return absl::Status(listing.status().code(),
                        absl::StrCat("initial listing of \"",
                                     w->options_.prefix,
                                     "\": ", listing.status().message()));
  }
  {
    absl::MutexLock lock(&w->mu_);
    w->state_.Reset(*listing);
  }

  KeyWatcher* self = w.get();
  BidiStreamSpec<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse> spec;
  spec.start = [](const std::shared_ptr<grpc::Channel>& channel,
                  grpc::ClientContext* context,
                  grpc::ClientBidiReactor<etcdserverpb::WatchRequest,
                                          etcdserverpb::WatchResponse>* r) {
    etcdserverpb::Watch::NewStub(channel)->async()->Watch(context, r);
  };
  const std::string prefix = self->options_.prefix;
  const bool progress = self->options_.progress_notify;
  spec.open_requests = [prefix, progress](const ResumeState& resume) {
    // The stream always has a position: the listing's revision, then the
    // last delivered (or progressed) one.
    std::int64_t start =
        static_cast<std::int64_t>(resume.has_position ? resume.last : 0) + 1;
    return std::vector<etcdserverpb::WatchRequest>{
        CreateWatchRequest(prefix, start, progress)};
  };
  spec.position_of = [](const etcdserverpb::WatchResponse& r) {
    ResponseKind k = Classify(r);
    switch (k.kind) {
      case ResponseKind::kEvents:
        return Position::Items(static_cast<std::uint64_t>(k.first),
                               static_cast<std::uint64_t>(k.last));
      case ResponseKind::kProgress:
        return Position::Progress(static_cast<std::uint64_t>(k.last));
      default:
        return Position::None();
    }
  };
  spec.spacing = PositionSpacing::kSparse;
  spec.trim_delivered = [](etcdserverpb::WatchResponse& r,
                           std::uint64_t last_delivered) {
    TrimEventsAtOrBelow(r, static_cast<std::int64_t>(last_delivered));
  };
  spec.deliver_progress = true;
  spec.resync_on_message = [](const etcdserverpb::WatchResponse& r) {
    return Classify(r).kind == ResponseKind::kCompacted;
  };
  spec.resync = [self](ResyncDone done) { self->Resync(std::move(done)); };
  spec.configure_attempt = [](grpc::ClientContext& context,
                              const AttemptInfo& /*info*/) {
    // etcd's "require leader": a member cut off from its leader ends the
    // watch (UNAVAILABLE) instead of keeping it silently stale.
    context.AddMetadata("hasleader", "true");
  };
  spec.initial_position = static_cast<std::uint64_t>(listing->revision);

  ReconnectingStreamOptions stream_options;
  stream_options.stall_timeout = self->options_.stall_timeout;
  stream_options.max_time_without_progress = self->options_.give_up_after;
  // When the cluster gets a leader back, no connection becomes newly usable
  // (they stayed up), so nothing wakes a waiting watch early: the backoff
  // delay is how late it resumes. A short cap keeps that under a second; the
  // retries (at most about one a second per watch) are cheap for etcd. Only
  // `give_up_after` bounds a watch that keeps failing.
  ExponentialBackoffOptions backoff;
  backoff.initial_delay = absl::Milliseconds(50);
  backoff.max_delay = kMaxReopenDelay;
  auto policy = ExponentialBackoff::Create(backoff);
  if (!policy.ok()) return policy.status();
  stream_options.backoff = *std::move(policy);
  stream_options.max_attempts_without_progress =
      std::numeric_limits<int>::max();
  stream_options.observer = self->options_.observer;

  auto stream = Stream::Start(
      self->pool_, std::move(spec), std::move(stream_options),
      [self](etcdserverpb::WatchResponse&& r) {
        self->OnMessage(std::move(r));
      },
      [self](const absl::Status& s) { self->OnDone(s); });
  if (!stream.ok()) return stream.status();
  w->stream_ = *std::move(stream);
  bool cancel;
  {
    absl::MutexLock lock(&w->mu_);
    w->stream_started_ = w->stream_.get();
    cancel = w->cancel_pending_;
  }
  if (cancel) w->stream_->Cancel();
  return w;
}

KeyWatcher::~KeyWatcher() { stream_.reset(); }

void KeyWatcher::OnMessage(etcdserverpb::WatchResponse&& response) {
  ResponseKind k = Classify(response);
  if (k.kind == ResponseKind::kCanceled) {
    {
      absl::MutexLock lock(&mu_);
      if (watch_error_.ok()) {
        watch_error_ = absl::FailedPreconditionError(absl::StrCat(
            "etcd canceled the watch: ", response.cancel_reason()));
      }
    }
    CancelStream();
    return;
  }
  if (k.kind == ResponseKind::kProgress) {
    absl::MutexLock lock(&mu_);
    state_.Advance(k.last);
    return;
  }
  if (k.kind != ResponseKind::kEvents) return;
  std::int64_t covered;
  {
    absl::MutexLock lock(&mu_);
    covered = state_.revision();
    state_.ApplyBatch(response);
  }
  if (!on_event_) return;
  for (const mvccpb::Event& e : response.events()) {
    if (e.kv().mod_revision() > covered) on_event_(e);
  }
}

void KeyWatcher::Resync(ResyncDone done) {
  absl::StatusOr<Listing> listing =
      client_->List(options_.prefix, absl::Now() + options_.list_timeout);
  if (!listing.ok()) {
    done(absl::Status(listing.status().code(),
                      absl::StrCat("resync listing of \"", options_.prefix,
                                   "\": ", listing.status().message())));
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    state_.Reset(*listing);
    ++resyncs_;
  }
  if (on_resync_) on_resync_(*listing);
  done(static_cast<std::uint64_t>(listing->revision));
}

void KeyWatcher::OnDone(const absl::Status& status) {
  absl::Status reported = status;
  {
    absl::MutexLock lock(&mu_);
    if (!watch_error_.ok()) reported = watch_error_;
  }
  if (on_done_) on_done_(reported);
}

Listing KeyWatcher::State() const {
  absl::MutexLock lock(&mu_);
  Listing out;
  out.revision = state_.revision();
  out.keys = state_.keys();
  return out;
}

StreamStats KeyWatcher::stats() const { return stream_->stats(); }

std::int64_t KeyWatcher::resyncs() const {
  absl::MutexLock lock(&mu_);
  return resyncs_;
}

std::vector<std::string> KeyWatcher::endpoints() const {
  std::vector<std::string> out;
  for (const EndpointStats& e : pool_->Endpoints()) out.push_back(e.address);
  return out;
}

void KeyWatcher::Cancel() { CancelStream(); }

void KeyWatcher::CancelStream() {
  Stream* stream;
  {
    absl::MutexLock lock(&mu_);
    stream = stream_started_;
    if (stream == nullptr) cancel_pending_ = true;
  }
  // Outside the lock: a cancel may run on_done (OnDone takes mu_).
  if (stream != nullptr) stream->Cancel();
}

}  // namespace etcd
}  // namespace examples
}  // namespace tether
