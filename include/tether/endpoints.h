// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Where a `ConnectionPool`'s connections go: a set of endpoints that may
// change at any time (a Kubernetes headless Service's pods, etcd's members,
// your own discovery), and the sources that keep it up to date.
#ifndef TETHER_ENDPOINTS_H_
#define TETHER_ENDPOINTS_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tether {

// One place a pool connects to. Each of the pool's connections goes to
// exactly one endpoint, so the pool knows which endpoint every stream is on.
struct Endpoint {
  // One address: "ipv4:10.0.0.7:443" (or "10.0.0.7:443"), "ipv6:[::1]:443"
  // (or "[::1]:443"), "unix:/run/svc.sock" or "unix-abstract:name". A
  // "host:port" is accepted too and handed to gRPC as it is (gRPC resolves
  // it inside that endpoint's connections, which then see only the first
  // address it reaches). Required.
  std::string address;
  // The name the server is known by: sent as :authority and checked
  // against the server's TLS certificate (GRPC_ARG_DEFAULT_AUTHORITY and,
  // unless `channel_args` sets it, GRPC_SSL_TARGET_NAME_OVERRIDE_ARG with
  // the host part). Default empty: gRPC's default for `address`. The DNS
  // source sets the name it resolved ("svc.ns.svc:443").
  std::string authority;
};

// At most this many endpoints in one set (the pool keeps a connection to
// each).
constexpr std::size_t kMaxEndpoints = 1024;

// The address's identity: two addresses that name the same place give the
// same key ("10.0.0.7:443" and "ipv4:10.0.0.7:443" both give the latter).
// INVALID_ARGUMENT ("Endpoint.address must ...") when `address` is none of
// the forms `Endpoint::address` lists, names more than one address, or has
// a port outside [1, 65535].
absl::StatusOr<std::string> EndpointKey(absl::string_view address);

// OK, or INVALID_ARGUMENT naming the first bad entry: an empty set, more
// than `kMaxEndpoints`, an invalid address, the same address twice (by
// `EndpointKey`), an authority with spaces or control characters.
absl::Status ValidateEndpoints(const std::vector<Endpoint>& endpoints);

// Tells a pool its current endpoint set. The pool owns one source (set as
// `ConnectionPoolOptions::endpoints`), starts it once, asks it to look again
// when it sees a sign that the set may be stale (a drain, a failed connect,
// a stream that ended unannounced) and stops it when the pool is destroyed.
//
// Thread safety: `Start`, `Refresh` and `Stop` are called by the pool with
// no pool lock held, `Refresh` from any thread and concurrently with
// anything but `Stop`. The source calls its sink from any thread, one call
// at a time, never while holding a lock that `Refresh` or `Stop` takes (the
// sink may call `Refresh` inline, and the streams it moves may drop the
// last reference to the pool, whose destructor calls `Stop`). `Stop` must
// therefore not wait for a sink call in progress when called from inside
// one, or from a thread that one waits for; sink calls that come after
// `Stop` are ignored by the pool.
//
// Example: a source fed by your own discovery.
//
//   class MySource final : public tether::EndpointSource {
//    public:
//     void Start(std::shared_ptr<Sink> sink) override { sink_ = sink; }
//     void Stop() override { sink_.reset(); }
//     // on each update from discovery: sink_->OnEndpoints(list);
//     ...
//   };
class EndpointSource {
 public:
  // The pool's side. Thread-safe; never blocks on the network.
  class Sink {
   public:
    virtual ~Sink() = default;
    // A complete answer: the set becomes `endpoints`. Endpoints missing
    // from it leave the pool's set under the pool's flap rule (see
    // `ConnectionPool`, "Endpoints"). An empty or invalid answer is
    // treated as `OnEndpointsError` (the last good set stays).
    virtual void OnEndpoints(std::vector<Endpoint> endpoints) = 0;
    // The source could not get an answer (NXDOMAIN, no record, server
    // down): the pool keeps its last good set, tells its observer and
    // counts the error.
    virtual void OnEndpointsError(const absl::Status& status) = 0;
  };

  virtual ~EndpointSource() = default;
  // Begins delivering answers to `sink` (the first may come before this
  // returns). Called once.
  virtual void Start(std::shared_ptr<Sink> sink) = 0;
  // A hint that the set may be stale: look again soon. A source rate-limits
  // these itself. Default: nothing.
  virtual void Refresh() {}
  // Stops delivering and releases the sink (see the class comment on sink
  // calls in progress).
  virtual void Stop() = 0;
  // What the set is called: the default label of a pool fed by this source
  // (`ConnectionPool::label`, the `grpc.target` of its metrics), e.g. the
  // name a resolver looks up. Called once, from `ConnectionPool::Create`.
  // Default "endpoints".
  virtual std::string Label() const { return "endpoints"; }
};

// A source that delivers `endpoints` once and never changes them (what
// `ConnectionPoolOptions::addresses` is made of). INVALID_ARGUMENT as
// `ValidateEndpoints`.
absl::StatusOr<std::shared_ptr<EndpointSource>> FixedEndpoints(
    std::vector<Endpoint> endpoints);

// A label for an address list, as a fixed source and a pool made from
// `addresses` have: the first three addresses joined with ",", then
// "+N" for the N others ("10.0.0.1:5000,10.0.0.2:5000,10.0.0.3:5000,+2").
std::string AddressListLabel(const std::vector<std::string>& addresses);

}  // namespace tether

#endif  // TETHER_ENDPOINTS_H_
