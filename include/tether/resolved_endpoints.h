// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Endpoint sources that look their set up again and again: one that resolves
// a name itself (A and AAAA records, with c-ares), so that a `ConnectionPool`
// connects to each address on its own, and one that calls your look-up
// function (a registry's API, etcd's member list) on the same schedule.
#ifndef TETHER_RESOLVED_ENDPOINTS_H_
#define TETHER_RESOLVED_ENDPOINTS_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tether/clock.h"
#include "tether/endpoints.h"

namespace tether {

// How `ResolvedEndpoints` looks a name up again. Every field has a usable
// default.
struct ResolverOptions {
  // Look the name up at least this often. A rollout adds and removes records
  // at any time, and a pod added is only used once it is in an answer;
  // CoreDNS serves a Kubernetes Service's records with a 5 s TTL, so
  // resolving more often finds nothing new. (gRPC's own DNS resolver looks
  // again only on a connection failure or GOAWAY, at most every 30 s.)
  // Default 5 s; in [min_resolve_interval, 1 h].
  absl::Duration resolve_interval = absl::Seconds(5);
  // Never look up sooner than this after the last lookup started: bounds
  // the queries that drains, failed connects and unannounced ends ask for
  // (`EndpointSource::Refresh`; a rollout of 100 streams asks 100 times),
  // and is the wait before confirming an answer that dropped an address.
  // Default 500 ms; in [10 ms, resolve_interval].
  absl::Duration min_resolve_interval = absl::Milliseconds(500);
  // One lookup (A and AAAA at once) gives up after this; the DNS server
  // then counts as down for this round. Default 2 s; in [10 ms, 60 s].
  absl::Duration query_timeout = absl::Seconds(2);
  // Look up again when the shortest TTL of an answer ends, if that is
  // before `resolve_interval` (never sooner than `min_resolve_interval`; a
  // TTL of 0 means "do not cache" and is ignored). Default true.
  bool honor_ttl = true;
  // Time source for the schedule. Default null, meaning `SystemClock()`.
  std::shared_ptr<Clock> clock;
};

// OK, or INVALID_ARGUMENT naming the first field out of range.
absl::Status Validate(const ResolverOptions& options);

// A source that resolves `target` itself, so that the pool connects to each
// address on its own (one endpoint per address, the name as authority):
//
// - "dns:///host:port", "dns:host:port" or "host:port": A and AAAA records
//   from the system's DNS servers (/etc/resolv.conf, with its search
//   domains), looked up again as `options` say and whenever the pool asks.
//   The port defaults to 443.
// - "dns://SERVER[:PORT]/host:port": the same, asking DNS server SERVER
//   (an IP literal; port 53 by default).
// - "ipv4:A:P,B:P", "ipv6:[A]:P,...", "unix:PATH", "IP:PORT": those
//   addresses, fixed (nothing to resolve).
//
// A lookup that fails (NXDOMAIN, no A or AAAA record, the server down or
// slow) keeps the last good set; the pool hears `OnEndpointsError` and looks
// again after `min_resolve_interval`, doubling up to `resolve_interval`.
// INVALID_ARGUMENT ("ResolvedEndpoints target must ...") for a target of
// another form, or invalid `options`.
//
// Lookups run on a thread of the source's own, started by `Start`. `Stop`
// (the pool's destructor) waits for a lookup in progress, at most
// `query_timeout`, except from that thread or a thread it waits for (then
// the thread ends on its own and calls the sink no more).
absl::StatusOr<std::shared_ptr<EndpointSource>> ResolvedEndpoints(
    absl::string_view target, ResolverOptions options = {});

// Looks the current endpoint set up once and returns within about `timeout`
// (`ResolverOptions::query_timeout`; give your RPC that deadline). An error,
// or an empty set, keeps the pool's last good set.
using EndpointLookup = std::function<absl::StatusOr<std::vector<Endpoint>>(
    absl::Duration timeout)>;

// A source that calls `look_up` on a thread of its own, on the schedule of
// `ResolvedEndpoints` (`honor_ttl` aside): at once, then every
// `resolve_interval`; `min_resolve_interval` after an answer that dropped an
// endpoint (the pool's flap rule confirms a removal on the next answer);
// after an error from `min_resolve_interval`, doubling up to
// `resolve_interval`; and when the pool asks (a drain, a failed connect),
// never sooner than `min_resolve_interval` after the last look-up began.
// For discovery you poll: a registry's API, etcd's member list (as etcd's
// clientv3 does with `AutoSyncInterval`).
//
// `look_up` runs on the source's thread only, one call at a time; `Stop`
// waits for a call in progress (hence the bound on its time), except from
// that thread or a thread it waits for. INVALID_ARGUMENT
// ("PolledEndpoints look_up must ...") for a null `look_up`, or invalid
// `options`.
//
//   auto source = tether::PolledEndpoints(
//       [registry](absl::Duration timeout)
//           -> absl::StatusOr<std::vector<tether::Endpoint>> {
//         return registry->Instances("billing", timeout);
//       });
//   if (!source.ok()) return source.status();
//   tether::ConnectionPoolOptions o;
//   o.endpoints = *source;
absl::StatusOr<std::shared_ptr<EndpointSource>> PolledEndpoints(
    EndpointLookup look_up, ResolverOptions options = {});

}  // namespace tether

#endif  // TETHER_RESOLVED_ENDPOINTS_H_
