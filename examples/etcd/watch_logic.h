// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The etcd-specific decisions of KeyWatcher, without gRPC or threads: what a
// watch response says about the stream's position, how a batch is trimmed,
// the request that (re)creates the watch, and the prefix's state.
#ifndef TETHER_EXAMPLES_ETCD_WATCH_LOGIC_H_
#define TETHER_EXAMPLES_ETCD_WATCH_LOGIC_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/string_view.h"
#include "etcd/rpc.pb.h"
#include "examples/etcd/etcd_client.h"

namespace tether {
namespace examples {
namespace etcd {

// What one WatchResponse is.
struct ResponseKind {
  enum Kind {
    // `created` (or a response with neither events nor a revision): no
    // position. The created response's header revision is the store's
    // revision at creation, NOT "everything up to here was sent": a watch
    // from an older start_revision still has those events to send.
    kControl,
    kEvents,     // events with mod_revisions first..last
    kProgress,   // no events, not created: everything up to `last` was sent
    kCompacted,  // canceled with compact_revision > 0: resume impossible
    kCanceled,   // canceled for another reason (cancel_reason)
  };
  Kind kind = kControl;
  std::int64_t first = 0;
  std::int64_t last = 0;
};

ResponseKind Classify(const etcdserverpb::WatchResponse& response);

// Removes the events at or below `last_delivered` (a batch that straddles
// the resume position after a reconnect). Keeps the order of the rest.
void TrimEventsAtOrBelow(etcdserverpb::WatchResponse& response,
                         std::int64_t last_delivered);

// The request that creates a watch of every key under `prefix` from
// `start_revision` (> 0).
etcdserverpb::WatchRequest CreateWatchRequest(absl::string_view prefix,
                                              std::int64_t start_revision,
                                              bool progress_notify);

// A prefix's keys (key -> mod_revision) as of `revision`, kept from a
// listing and the events after it. Not thread-safe.
class KeyState {
 public:
  // Replaces everything with a listing.
  void Reset(const Listing& listing);
  // Applies the events of one watch response (a batch holds every event of
  // its revisions) and moves `revision()` to its last. Events at or below
  // `revision()` are already in the state (a listing or an earlier batch
  // covered them) and are skipped. Returns how many were applied.
  int ApplyBatch(const etcdserverpb::WatchResponse& response);
  // Moves the revision forward (a progress notice); never backwards.
  void Advance(std::int64_t revision);

  // Everything up to this revision is in the state.
  std::int64_t revision() const { return revision_; }
  const std::map<std::string, std::int64_t>& keys() const { return keys_; }

 private:
  std::int64_t revision_ = 0;
  std::map<std::string, std::int64_t> keys_;
};

}  // namespace etcd
}  // namespace examples
}  // namespace tether

#endif  // TETHER_EXAMPLES_ETCD_WATCH_LOGIC_H_
