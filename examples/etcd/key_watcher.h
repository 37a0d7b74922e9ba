// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// KeyWatcher: keeps an etcd prefix's state (key -> mod_revision) up to date
// with list + watch, across member restarts and compactions, on tether's
// ReconnectingBidiStream.
#ifndef TETHER_EXAMPLES_ETCD_KEY_WATCHER_H_
#define TETHER_EXAMPLES_ETCD_KEY_WATCHER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd/rpc.grpc.pb.h"
#include "examples/etcd/etcd_client.h"
#include "examples/etcd/watch_logic.h"
#include "tether/connection_pool.h"
#include "tether/reconnecting_bidi_stream.h"

namespace tether {
namespace examples {
namespace etcd {

struct KeyWatcherOptions {
  // The cluster's client endpoints, "host:port": where to start. Required,
  // distinct.
  std::vector<std::string> endpoints;
  // Keep the endpoints in sync with the cluster's member list: ask for it
  // this often, and also when a member drains or refuses a connect (at
  // most every 500 ms), so the watch follows members that are replaced
  // with new addresses (see `MemberListEndpoints`). 0 keeps `endpoints` as
  // given: set it when they are proxies or load balancers in front of the
  // members (the member list names the members themselves). Default 5 s; 0,
  // or in [500 ms, 1 h].
  absl::Duration member_sync_interval = absl::Seconds(5);
  // The keys watched: every key starting with `prefix`. Default "" (all).
  std::string prefix;
  // tether's stall detection (ReconnectingStreamOptions::stall_timeout): an
  // attempt that hears nothing for this long is left for another member. 0
  // (the default) turns it off; else [1 ms, 24 h], and about 3x etcd's
  // progress-notify interval (etcd's default interval is 10 min; set
  // --experimental-watch-progress-notify-interval on the members).
  absl::Duration stall_timeout = absl::ZeroDuration();
  // The stream gives up after failing this long without progress
  // (ReconnectingStreamOptions::max_time_without_progress). Default 2 min;
  // > 0 or infinite.
  absl::Duration give_up_after = absl::Minutes(2);
  // How long one listing (at start, and each resync) keeps trying the
  // endpoints. Default 30 s; (0, 1 h].
  absl::Duration list_timeout = absl::Seconds(30);
  // Ask etcd for progress notifications (they move the resume position on a
  // quiet prefix, so a reopen does not replay, and feed stall detection).
  // Default true.
  bool progress_notify = true;
  // Passed to the stream (attempts, drains, stalls, resyncs). Default none.
  std::shared_ptr<StreamObserver> observer;
  // Passed to the pool (connections, endpoints joining and leaving).
  // Default none.
  std::shared_ptr<ConnectionObserver> pool_observer;
};

// OK or INVALID_ARGUMENT naming the field.
absl::Status Validate(const KeyWatcherOptions& options);

// Keeps the state of every key under a prefix, like a Kubernetes informer.
//
// Start lists the prefix (a linearizable Range), then watches it from the
// listing's revision + 1 on a ReconnectingBidiStream over a ConnectionPool of
// the endpoints (kept in sync with the member list, unless
// `member_sync_interval` is 0). Positions are etcd revisions (sparse): a response's events
// are a batch (first..last mod_revision), trimmed when a reconnect's replay
// straddles the last delivered revision; a progress notification moves the
// resume position; the `created` answer does not (its header revision is
// the store's, not the watch's). Each reconnect re-creates the watch from
// the last revision + 1. When etcd answers that this revision was compacted
// (canceled, compact_revision > 0) the stream resyncs: KeyWatcher lists the
// prefix again, replaces its state, and the watch continues from the new
// listing's revision + 1 on the same stream.
//
// Callbacks: `on_event` gets every event once, in revision order, on one
// tether thread at a time; `on_resync` gets each new listing, on the thread
// that made it (a resync's listing replaces the state: events it already
// covers are not passed to `on_event`). Both may call `State`, `stats` and
// `Cancel`; no KeyWatcher lock is held while they run. `on_done` runs once, last: OK never (the watch has no end),
// CANCELLED after `Cancel`, or the error that ended the watch (the stream
// gave up, etcd canceled the watch for another reason than compaction, a
// resync's listing failed).
//
// Thread-safe. The destructor cancels and waits for callbacks running on
// other threads.
class KeyWatcher {
 public:
  using EventFn = std::function<void(const mvccpb::Event& event)>;
  using ResyncFn = std::function<void(const Listing& listing)>;
  using DoneFn = std::function<void(const absl::Status& status)>;

  static absl::StatusOr<std::unique_ptr<KeyWatcher>> Start(
      KeyWatcherOptions options, EventFn on_event, ResyncFn on_resync,
      DoneFn on_done);
  ~KeyWatcher();

  KeyWatcher(const KeyWatcher&) = delete;
  KeyWatcher& operator=(const KeyWatcher&) = delete;

  // The current view: key -> mod_revision, complete up to `revision`.
  Listing State() const;
  // The stream's figures (attempts, resyncs, ...).
  StreamStats stats() const;
  // Resyncs done (also in stats().resyncs).
  std::int64_t resyncs() const;
  // The endpoints the watch may use now ("host:port", in the order they
  // joined; those leaving included until their streams have moved).
  std::vector<std::string> endpoints() const;
  void Cancel();

 private:
  using Stream = ReconnectingBidiStream<etcdserverpb::WatchRequest,
                                        etcdserverpb::WatchResponse>;
  KeyWatcher(KeyWatcherOptions options, EventFn on_event, ResyncFn on_resync,
             DoneFn on_done);
  void OnMessage(etcdserverpb::WatchResponse&& response);
  void OnDone(const absl::Status& status);
  void Resync(ResyncDone done);
  // Cancels the stream, also before Start has stored it.
  void CancelStream();

  const KeyWatcherOptions options_;
  const EventFn on_event_;
  const ResyncFn on_resync_;
  const DoneFn on_done_;
  // Shared with the member-list source, which updates its endpoints.
  std::shared_ptr<EtcdClient> client_;
  std::shared_ptr<ConnectionPool> pool_;

  mutable absl::Mutex mu_;
  KeyState state_ ABSL_GUARDED_BY(mu_);
  std::int64_t resyncs_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status watch_error_ ABSL_GUARDED_BY(mu_);
  Stream* stream_started_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool cancel_pending_ ABSL_GUARDED_BY(mu_) = false;

  // Last: destroyed first, so no callback runs on a half-destroyed watcher.
  std::unique_ptr<Stream> stream_;
};

}  // namespace etcd
}  // namespace examples
}  // namespace tether

#endif  // TETHER_EXAMPLES_ETCD_KEY_WATCHER_H_
