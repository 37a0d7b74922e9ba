// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "examples/etcd/delivery_check.h"

#include <algorithm>

namespace tether {
namespace examples {
namespace etcd {

void DeliveryCheck::OnEvent(std::int64_t revision, const std::string& key,
                            absl::Time at) {
  absl::MutexLock lock(&mu_);
  ++counts_.events;
  if (last_at_ != absl::InfinitePast()) {
    counts_.max_stall = std::max(counts_.max_stall, at - last_at_);
  }
  last_at_ = at;
  if (revision < counts_.last_revision) {
    ++counts_.out_of_order;
    return;
  }
  if (revision == counts_.last_revision) {
    if (!keys_at_last_.insert(key).second) ++counts_.duplicates;
    return;
  }
  counts_.last_revision = revision;
  keys_at_last_.clear();
  keys_at_last_.insert(key);
}

void DeliveryCheck::OnResync(std::int64_t revision) {
  absl::MutexLock lock(&mu_);
  counts_.last_revision = revision;
  keys_at_last_.clear();
}

DeliveryCounts DeliveryCheck::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

}  // namespace etcd
}  // namespace examples
}  // namespace tether
