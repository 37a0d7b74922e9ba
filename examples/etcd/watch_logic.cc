// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "examples/etcd/watch_logic.h"

#include <algorithm>

namespace tether {
namespace examples {
namespace etcd {

ResponseKind Classify(const etcdserverpb::WatchResponse& response) {
  ResponseKind out;
  if (response.canceled()) {
    out.kind = response.compact_revision() > 0 ? ResponseKind::kCompacted
                                               : ResponseKind::kCanceled;
    out.first = out.last = response.compact_revision();
    return out;
  }
  if (response.events_size() > 0) {
    out.kind = ResponseKind::kEvents;
    out.first = response.events(0).kv().mod_revision();
    out.last = out.first;
    for (const mvccpb::Event& e : response.events()) {
      out.first = std::min(out.first, e.kv().mod_revision());
      out.last = std::max(out.last, e.kv().mod_revision());
    }
    return out;
  }
  if (response.created() || response.header().revision() <= 0) {
    out.kind = ResponseKind::kControl;
    return out;
  }
  out.kind = ResponseKind::kProgress;
  out.first = out.last = response.header().revision();
  return out;
}

void TrimEventsAtOrBelow(etcdserverpb::WatchResponse& response,
                         std::int64_t last_delivered) {
  auto* events = response.mutable_events();
  auto keep = std::stable_partition(
      events->begin(), events->end(), [&](const mvccpb::Event& e) {
        return e.kv().mod_revision() > last_delivered;
      });
  int remove = static_cast<int>(events->end() - keep);
  for (int i = 0; i < remove; ++i) events->RemoveLast();
}

etcdserverpb::WatchRequest CreateWatchRequest(absl::string_view prefix,
                                              std::int64_t start_revision,
                                              bool progress_notify) {
  etcdserverpb::WatchRequest request;
  etcdserverpb::WatchCreateRequest* create = request.mutable_create_request();
  create->set_key(std::string(prefix));
  create->set_range_end(PrefixEnd(prefix));
  create->set_start_revision(start_revision);
  create->set_progress_notify(progress_notify);
  return request;
}

void KeyState::Reset(const Listing& listing) {
  keys_ = listing.keys;
  revision_ = listing.revision;
}

int KeyState::ApplyBatch(const etcdserverpb::WatchResponse& response) {
  int applied = 0;
  std::int64_t covered = revision_;
  for (const mvccpb::Event& event : response.events()) {
    std::int64_t rev = event.kv().mod_revision();
    if (rev <= covered) continue;
    if (event.type() == mvccpb::Event::DELETE) {
      keys_.erase(event.kv().key());
    } else {
      keys_[event.kv().key()] = rev;
    }
    revision_ = std::max(revision_, rev);
    ++applied;
  }
  return applied;
}

void KeyState::Advance(std::int64_t revision) {
  revision_ = std::max(revision_, revision);
}

}  // namespace etcd
}  // namespace examples
}  // namespace tether
