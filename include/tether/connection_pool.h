// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_CONNECTION_POOL_H_
#define TETHER_CONNECTION_POOL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "tether/clock.h"
#include "tether/transport.h"

namespace tether {

namespace internal {
class PoolCore;
class GrpcConnectionDriver;
}  // namespace internal

// Receives a pool's connection events, for metrics and logs.
//
// All methods have empty defaults. They are called with no pool lock held,
// from the pool's watcher thread, the clock's thread or the thread calling a
// pool method, possibly concurrently. Implementations must be thread-safe and
// must not block. The pool holds the observer by `std::shared_ptr`.
class ConnectionObserver {
 public:
  virtual ~ConnectionObserver() = default;
  // Connection `id` was created toward `target` (the pool's target, or one
  // of its addresses).
  virtual void OnConnectionOpened(std::uint64_t /*id*/,
                                  absl::string_view /*target*/) {}
  // Connection `id` reached READY for the first time.
  virtual void OnConnectionReady(std::uint64_t /*id*/) {}
  // Connection `id` is draining (left READY, or its health watch said
  // NOT_SERVING); it is never picked again.
  virtual void OnConnectionDraining(std::uint64_t /*id*/,
                                    absl::string_view /*why*/) {}
  // A stream reported an unannounced drain-class end on connection `id`
  // while it looked READY; it is never picked again.
  virtual void OnConnectionSuspect(std::uint64_t /*id*/,
                                   const absl::Status& /*status*/) {}
  // Connection `id` was closed (drained, suspect, idle, or pool destroyed).
  virtual void OnConnectionRetired(std::uint64_t /*id*/) {}
};

// How a `ConnectionPool` connects. Fill in exactly one of `target` and
// `addresses`; every other field has a usable default.
struct ConnectionPoolOptions {
  // One gRPC target ("dns:///svc.example:443", "10.0.0.1:5000", a VIP behind
  // a proxy). Every connection of the pool goes to it, so behind a load
  // balancer each new connection may reach another backend. Default empty.
  std::string target;
  // Alternatively, a list of backend addresses ("127.0.0.1:5001", ...). The
  // pool keeps at least one connection per address and spreads picks over
  // READY connections, least-loaded first. Default empty. Entries must be
  // non-empty and distinct.
  std::vector<std::string> addresses;

  // Channel credentials. Default null, meaning insecure.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // Extra channel arguments for every connection. The pool sets its own keys
  // after these (subchannel isolation, a per-connection id, keepalive from
  // the fields below), so do not set keepalive here. Default empty.
  grpc::ChannelArguments channel_args;

  // At most this many open connections per group (the target counts as one
  // group, each address as one), draining and suspect ones included. At the
  // cap a pick reuses the least-loaded usable connection; when none is
  // usable it fails with UNAVAILABLE "no usable connection". Default 8;
  // range [1, 1024].
  int max_connections = 8;

  // A connection that holds no pick for this long is closed (the next pick
  // opens a new one). Default 30 s; > 0, or `absl::InfiniteDuration()` to
  // keep idle connections.
  absl::Duration idle_timeout = absl::Seconds(30);

  // Keepalive. gRPC servers by default reject pings that come less than 5
  // minutes apart (GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS)
  // and send GOAWAY "too_many_pings" after 2 strikes, ending every stream on
  // the connection. So the default pings every 6 minutes (a margin over 5,
  // since equal intervals can arrive a hair early) and only while calls are
  // open, and the pool lifts the client's own limit on pings without data
  // (GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA = 0); otherwise a quiet stream
  // stops being probed after two pings. A dead peer under a quiet stream is
  // then detected within keepalive_time + keepalive_timeout (about 6.3 min).
  // Lower `keepalive_time` only for servers configured to allow it.
  //
  // Interval between pings. Default 6 min; >= 10 s, or InfiniteDuration to
  // disable keepalive.
  absl::Duration keepalive_time = absl::Minutes(6);
  // How long to wait for a ping's ack before closing the connection.
  // Default 20 s; > 0 and finite.
  absl::Duration keepalive_timeout = absl::Seconds(20);
  // Also ping with no call open. Default false (servers punish it).
  bool keepalive_permit_without_calls = false;

  // Watch grpc.health.v1.Health/Watch on each connection once READY; a
  // NOT_SERVING answer makes the connection draining, like a GOAWAY. A
  // server without the health service (UNIMPLEMENTED) counts as serving.
  // Default false.
  bool health_check = false;
  // The service name sent in the health request. Default "" (the server).
  std::string health_service;

  // Time source for idle timers. Default null, meaning `SystemClock()`.
  std::shared_ptr<Clock> clock;
  // Connection events. Default null (none).
  std::shared_ptr<ConnectionObserver> observer;
};

// OK, or INVALID_ARGUMENT naming the first field that is out of range.
absl::Status Validate(const ConnectionPoolOptions& options);

// A snapshot of a pool's connections.
struct ConnectionPoolStats {
  std::size_t open = 0;            // connections not yet retired (all below)
  std::size_t ready = 0;           // READY and usable (not draining or suspect)
  std::size_t draining = 0;        // draining, waiting for their picks to end
  std::size_t suspect = 0;         // suspect (and not draining)
  std::size_t picks = 0;           // picks held over all connections
  std::uint64_t total_opened = 0;  // connections ever opened
};

// A pool of gRPC connections to one target (or one address list) that knows
// when a connection starts draining, and implements `ConnectionSource`.
//
// One connection is one `grpc::Channel` with its own subchannel, so the
// channel's connectivity state is that connection's state. The pool watches
// every connection on one completion queue served by one thread.
//
// - Pick: a READY connection that is neither draining nor suspect, fewest
//   picks first; else a connection that has never been READY yet (new or
//   connecting; a call on it waits for the connect or fails fast, per gRPC);
//   a group without a usable connection gets a new one if under the cap.
//   A new connection is pickable at once.
// - Draining: a connection that leaves READY (GOAWAY, failure, shutdown) or
//   whose health watch says NOT_SERVING is never picked again, and every
//   listener holding a pick on it hears `OnConnectionDraining` exactly once.
//   Make before break: if that leaves its group without a usable
//   connection, one replacement is opened at once (a burst of streams moving
//   together shares it). A draining connection is closed when its last pick
//   is released.
// - Suspect: `ReportDrainEnd` on a connection that still looks READY stops
//   new picks on it. Streams already on it keep running and are not told
//   (the pool has no evidence the connection is going away, only that one
//   stream ended); if it later leaves READY it becomes draining as above. It
//   is closed when its last pick is released. A replacement is opened as for
//   draining. A report on a connection that is not READY is ignored.
// - Idle: a usable connection with no picks for `idle_timeout` is closed.
//
// Ids are 1, 2, ... and never reused. Retired connections' ids passed to
// `Release` or `ReportDrainEnd` are ignored.
//
// Thread safety: all methods may be called concurrently from any thread.
// Listeners and the observer are called with no pool lock held, so they may
// call back into the pool. Listeners are held weakly.
//
// Ownership: hold the pool by `std::shared_ptr` (streams do). Destroying it
// closes every connection (listeners are not told), stops the watcher
// thread and waits for it. Dropping the last reference from a listener or
// observer callback is allowed: the thread then finishes on its own.
//
//   tether::ConnectionPoolOptions o;
//   o.addresses = {"10.0.0.1:5000", "10.0.0.2:5000"};
//   auto pool = tether::ConnectionPool::Create(std::move(o));
//   if (!pool.ok()) return pool.status();
//   auto pick = (*pool)->Pick(my_listener);   // pick->channel is a Channel
//   ...
//   (*pool)->Release(pick->connection_id, my_listener);
class ConnectionPool final : public ConnectionSource {
 public:
  // Validates `options`, opens the first connection(s) and starts watching.
  static absl::StatusOr<std::shared_ptr<ConnectionPool>> Create(
      ConnectionPoolOptions options);

  ~ConnectionPool() override;
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  absl::StatusOr<ConnectionPick> Pick(
      std::weak_ptr<DrainListener> listener) override;
  void Release(std::uint64_t connection_id,
               const std::weak_ptr<DrainListener>& listener) override;
  void ReportDrainEnd(std::uint64_t connection_id,
                      const absl::Status& status) override;
  // True iff connection `connection_id` is open and READY right now
  // (draining or suspect included); false for retired or unknown ids.
  bool IsConnected(std::uint64_t connection_id) override;

  ConnectionPoolStats Stats() const;

 private:
  ConnectionPool() = default;

  std::shared_ptr<internal::GrpcConnectionDriver> driver_;
  std::shared_ptr<internal::PoolCore> core_;
};

}  // namespace tether

#endif  // TETHER_CONNECTION_POOL_H_
