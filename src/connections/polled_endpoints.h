// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// An endpoint source that looks its set up again and again on a thread of
// its own: the engine of `ResolvedEndpoints` (DNS) and `PolledEndpoints`
// (any look-up function).
#ifndef TETHER_SRC_CONNECTIONS_POLLED_ENDPOINTS_H_
#define TETHER_SRC_CONNECTIONS_POLLED_ENDPOINTS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tether/endpoints.h"
#include "tether/internal/visibility.h"
#include "tether/resolved_endpoints.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

// One answer of a look-up.
struct PolledAnswer {
  std::vector<Endpoint> endpoints;
  // The shortest TTL the answer came with; InfiniteDuration when none.
  absl::Duration shortest_ttl = absl::InfiniteDuration();
};

// One look-up, bounded by about `timeout`.
using PolledLookup =
    std::function<absl::StatusOr<PolledAnswer>(absl::Duration timeout)>;

// A source that calls `look_up` (with `options.query_timeout`) on its own
// thread, on the schedule of `ResolveSchedule`. An error, or an answer with
// no endpoint, is passed on as `OnEndpointsError` (the pool keeps its last
// set) and backs off. `options` must be valid; `look_up` not null.
// `label` is the source's `Label()`.
std::shared_ptr<EndpointSource> NewPolledSource(
    PolledLookup look_up, ResolverOptions options,
    std::string label = "endpoints");

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_CONNECTIONS_POLLED_ENDPOINTS_H_
