// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The cluster's own list of its members as a pool's endpoint source, so that
// a watcher follows members that are replaced, added or removed (what etcd's
// Go client does with `AutoSyncInterval`).
#ifndef TETHER_EXAMPLES_ETCD_MEMBER_LIST_H_
#define TETHER_EXAMPLES_ETCD_MEMBER_LIST_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "etcd/rpc.pb.h"
#include "examples/etcd/etcd_client.h"
#include "tether/endpoints.h"

namespace tether {
namespace examples {
namespace etcd {

// The client endpoints ("host:port") of `members`, in member order: the
// plain-HTTP client URLs ("http://host:port") of every member that has
// started (it has a name) and is not a learner (a learner serves no watch).
// Other URLs (https://, unix://) are skipped: the example connects without
// TLS. Duplicates are dropped. May be empty.
std::vector<std::string> ClientEndpoints(
    const std::vector<etcdserverpb::Member>& members);

// An endpoint source that first answers `client`'s endpoints (inside
// `Start`, so a stream need not wait for a call), then asks the cluster for
// its member list (`Cluster.MemberList`, through `client`, which fails over
// between the members it knows) at once, every `interval` and when the pool
// sees a drain or a failed connect (at most every 500 ms), and answers the
// members' `ClientEndpoints`. Each answer also becomes `client`'s endpoint
// list, so the listings follow the cluster too. A failed call or a list with
// no usable member keeps the last good set. INVALID_ARGUMENT
// ("MemberListEndpoints ... must ...") for a null `client` or an `interval`
// outside [500 ms, 1 h].
absl::StatusOr<std::shared_ptr<EndpointSource>> MemberListEndpoints(
    std::shared_ptr<EtcdClient> client, absl::Duration interval);

}  // namespace etcd
}  // namespace examples
}  // namespace tether

#endif  // TETHER_EXAMPLES_ETCD_MEMBER_LIST_H_
