// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Checks a stream of etcd watch events as an application sees it: counts
// events, duplicates and revisions out of order, and the longest silence
// between two events. Used by etcd_watch and the side-by-side benchmark.
#ifndef TETHER_EXAMPLES_ETCD_DELIVERY_CHECK_H_
#define TETHER_EXAMPLES_ETCD_DELIVERY_CHECK_H_

#include <cstdint>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tether {
namespace examples {
namespace etcd {

struct DeliveryCounts {
  std::int64_t events = 0;        // events seen, duplicates included
  std::int64_t duplicates = 0;    // same (revision, key) as one already seen
  std::int64_t out_of_order = 0;  // revision below the last one seen
  std::int64_t last_revision = 0;
  absl::Duration max_stall = absl::ZeroDuration();  // between two events
};

// Thread-safe. An event is identified by (mod_revision, key): one revision
// may change several keys (a transaction), never one key twice.
class DeliveryCheck {
 public:
  void OnEvent(std::int64_t revision, const std::string& key,
               absl::Time at = absl::Now());
  // A resync starts a new baseline: the next event may be at any revision.
  void OnResync(std::int64_t revision);
  DeliveryCounts counts() const;

 private:
  mutable absl::Mutex mu_;
  DeliveryCounts counts_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> keys_at_last_ ABSL_GUARDED_BY(mu_);
  absl::Time last_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace etcd
}  // namespace examples
}  // namespace tether

#endif  // TETHER_EXAMPLES_ETCD_DELIVERY_CHECK_H_
