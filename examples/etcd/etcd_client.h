// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// A small unary etcd v3 client for tether's etcd example, its tests and its
// benchmark: list a prefix, put, put-if-absent, delete, compact, status.
#ifndef TETHER_EXAMPLES_ETCD_ETCD_CLIENT_H_
#define TETHER_EXAMPLES_ETCD_ETCD_CLIENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd/rpc.grpc.pb.h"
#include "grpcpp/channel.h"

namespace tether {
namespace examples {
namespace etcd {

// The `range_end` that selects every key starting with `prefix` (etcd's
// convention): the prefix with its last byte below 0xff incremented and what
// follows dropped; "\0" (every key) when there is none.
std::string PrefixEnd(absl::string_view prefix);

// Splits "a:1,b:2" into {"a:1", "b:2"}; INVALID_ARGUMENT for an empty list,
// an empty entry, a duplicate or an entry without ":port".
absl::StatusOr<std::vector<std::string>> ParseEndpoints(absl::string_view list);

// A prefix's keys at one revision: key -> mod_revision.
struct Listing {
  std::int64_t revision = 0;  // the store's revision of the read
  std::map<std::string, std::int64_t> keys;
};

// The outcome of a put.
struct PutResult {
  std::int64_t revision = 0;  // the key's mod_revision after the put
  bool written = true;        // false: PutIfAbsent found the key already there
};

// Unary calls to an etcd cluster over one channel per endpoint.
//
// Each call goes to the endpoint that last answered; on an error that another
// member may not have (UNAVAILABLE, DEADLINE_EXCEEDED, "no leader", ...) it
// tries the next endpoint after a short pause, until `deadline`; other
// errors are returned at once. Every attempt has its own `rpc_timeout`.
//
// Thread-safe: calls may run concurrently from any thread, also with
// `SetEndpoints`.
class EtcdClient {
 public:
  // `endpoints` non-empty ("host:port"); `rpc_timeout` > 0.
  explicit EtcdClient(std::vector<std::string> endpoints,
                      absl::Duration rpc_timeout = absl::Seconds(2));

  std::vector<std::string> endpoints() const;
  // Replaces the endpoints (the cluster's membership changed); channels to
  // endpoints that stay are kept. An empty list is ignored. Calls in
  // progress finish on the endpoint they are on.
  void SetEndpoints(std::vector<std::string> endpoints);

  // Linearizable read of every key under `prefix`.
  absl::StatusOr<Listing> List(absl::string_view prefix, absl::Time deadline);
  // Put; the revision it created.
  absl::StatusOr<PutResult> Put(absl::string_view key, absl::string_view value,
                                absl::Time deadline);
  // Puts only if the key does not exist (a Txn on create_revision == 0), so a
  // put retried after a lost answer is applied once. When the key exists,
  // returns its mod_revision and `written` false.
  absl::StatusOr<PutResult> PutIfAbsent(absl::string_view key,
                                        absl::string_view value,
                                        absl::Time deadline);
  // Deletes one key; the revision of the delete (the store's revision if the
  // key did not exist).
  absl::StatusOr<std::int64_t> Delete(absl::string_view key,
                                      absl::Time deadline);
  // Compacts the history up to `revision` (physical: returns once applied).
  // An already compacted revision is OK.
  absl::Status Compact(std::int64_t revision, absl::Time deadline);
  // Maintenance.Status of one endpoint (no failover), one attempt.
  absl::StatusOr<etcdserverpb::StatusResponse> Status(std::size_t endpoint,
                                                      absl::Duration timeout);
  // Cluster.MemberList: every member as the answering member knows them.
  absl::StatusOr<std::vector<etcdserverpb::Member>> MemberList(
      absl::Time deadline);
  // Cluster.MemberAdd of a member that will serve its peers at `peer_url`;
  // the new member (its ID; no name or client URLs until it starts).
  absl::StatusOr<etcdserverpb::Member> MemberAdd(const std::string& peer_url,
                                                 absl::Time deadline);
  // Cluster.MemberRemove of member `id`.
  absl::Status MemberRemove(std::uint64_t id, absl::Time deadline);

 private:
  // Runs `call(stub, context)` with failover; see the class comment.
  template <class Call>
  grpc::Status WithFailover(absl::Time deadline, Call call);

  static std::shared_ptr<grpc::Channel> NewChannel(const std::string& endpoint);
  // Endpoint `i`'s channel (`i` taken modulo the endpoint count) and the
  // endpoint count.
  std::shared_ptr<grpc::Channel> ChannelFor(std::size_t i, std::size_t* count);
  // Replaces the channel `failed` by a new one to the same endpoint, if it
  // is still in use.
  void ReplaceChannel(const std::shared_ptr<grpc::Channel>& failed);

  const absl::Duration rpc_timeout_;
  mutable absl::Mutex mu_;
  std::vector<std::string> endpoints_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
  std::size_t current_ ABSL_GUARDED_BY(mu_) = 0;
};

// grpc::Status -> absl::Status (same code and message).
absl::Status ToAbsl(const grpc::Status& status);

}  // namespace etcd
}  // namespace examples
}  // namespace tether

#endif  // TETHER_EXAMPLES_ETCD_ETCD_CLIENT_H_
