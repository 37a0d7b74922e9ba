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
#include "grpcpp/support/client_interceptor.h"
#include "tether/circuit_breaker.h"
#include "tether/clock.h"
#include "tether/endpoints.h"
#include "tether/transport.h"
#include "tether/internal/visibility.h"

namespace tether {

namespace internal {
class TETHER_HIDDEN_TYPE PoolCore;
class TETHER_HIDDEN_TYPE GrpcConnectionDriver;
}  // namespace internal

// Receives a pool's connection events, for metrics and logs.
//
// All methods have empty defaults. They are called with no pool lock held,
// one at a time and in the order the pool decided them (a connection's
// `OnConnectionOpened` always comes before its `OnConnectionReady`), from
// the pool's watcher thread, the clock's thread or the thread calling a pool
// method. Implementations must not block: while one runs, the next events
// wait. The pool holds the observer by `std::shared_ptr`.
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
  // Streams' reports gave evidence that connection `id` is going away
  // although it looks READY (see `ConnectionPool`, "Suspect"); new picks
  // avoid it. `status` is the report that tipped it.
  virtual void OnConnectionSuspect(std::uint64_t /*id*/,
                                   const absl::Status& /*status*/) {}
  // Suspect connection `id` served its probation without new evidence and
  // takes new picks again.
  virtual void OnConnectionRestored(std::uint64_t /*id*/) {}
  // Connection `id` was closed (drained, suspect, idle, or pool destroyed).
  virtual void OnConnectionRetired(std::uint64_t /*id*/) {}

  // Endpoint `address` joined the endpoint set (see `ConnectionPool`,
  // "Endpoints"); its connection opens next.
  virtual void OnEndpointAdded(absl::string_view /*address*/) {}
  // Endpoint `address` was missing from the source's last answer: new picks
  // avoid it; it leaves if the next answer lacks it too (the flap rule).
  virtual void OnEndpointMissing(absl::string_view /*address*/) {}
  // Endpoint `address` left the set: its connections are draining.
  virtual void OnEndpointRemoved(absl::string_view /*address*/,
                                 absl::string_view /*why*/) {}
  // The endpoint source failed (`status`); the pool keeps its last set.
  virtual void OnEndpointsError(const absl::Status& /*status*/) {}
  // Endpoint `address` turned out to balance each call on its own (an L7
  // proxy; see `ConnectionPoolOptions::balancing`): streams' ends no longer
  // make its connections suspect. `why` names the evidence.
  virtual void OnEndpointBalancesCalls(absl::string_view /*address*/,
                                       absl::string_view /*why*/) {}
};

// How an endpoint spreads calls over servers: what the end of one call says
// about the connection it ran on (see `ConnectionPoolOptions::balancing`).
enum class EndpointBalancing {
  // Learn it: each endpoint starts as `kPerConnection` and turns `kPerCall`
  // when moving to new connections did not help (see `balancing`).
  kDetect,
  // Each connection reaches one server: a pod, a server, or an L4 balancer
  // (a virtual IP such as a Kubernetes ClusterIP Service) that picks a
  // server per connection. A server going away shows on its connections.
  kPerConnection,
  // The endpoint balances each call on its own: an L7 proxy (nginx
  // `grpc_pass`, HAProxy, Envoy, a service mesh sidecar). Two calls on one
  // connection may reach different servers, a server's GOAWAY stops at the
  // proxy, and a new connection reaches the same servers as the old one.
  kPerCall,
};

// How a `ConnectionPool` connects. Fill in exactly one of `target`,
// `addresses` and `endpoints`; every other field has a usable default.
struct ConnectionPoolOptions {
  // One gRPC target ("dns:///svc.example:443", "10.0.0.1:5000", a VIP behind
  // a proxy). Every connection of the pool goes to it, so behind a load
  // balancer each new connection may reach another backend. Default empty.
  std::string target;
  // Alternatively, a fixed endpoint set: backend addresses
  // ("127.0.0.1:5001", ...; the forms of `Endpoint::address`). The pool
  // keeps at least one connection per address and spreads picks over
  // endpoints, fewest streams first. `SetEndpoints` may replace the set
  // later. Default empty. At most `kMaxEndpoints` entries, valid and
  // distinct.
  std::vector<std::string> addresses;
  // Alternatively, a source of endpoint sets that change (`ResolvedEndpoints`
  // for "dns:///svc:443", `FixedEndpoints`, or your own discovery). The pool
  // starts it, follows its answers and stops it when destroyed; one pool per
  // source. Until the first answer picks fail with UNAVAILABLE. Default
  // null.
  std::shared_ptr<EndpointSource> endpoints;
  // The pool's name: the `grpc.target` label of its streams' metrics
  // (`ConnectionPool::label`, `tether::Client`) and a `Client` breaker's
  // default name. Default "": derived from where the pool connects (see
  // `PoolLabel`). At most 256 characters.
  std::string label;

  // Channel credentials for every connection: `grpc::SslCredentials(...)`
  // for TLS (with a client key and certificate for mutual TLS). With an
  // address list whose certificates name a host rather than the addresses,
  // set GRPC_SSL_TARGET_NAME_OVERRIDE_ARG in `channel_args` to that name.
  // Default null, meaning insecure.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // Client interceptors for every connection: the pool creates its channels
  // itself (`grpc::experimental::CreateCustomChannelWithInterceptors`), so
  // auth, tracing or metadata interceptors go here, in the order they should
  // run. Each factory is shared by all of the pool's connections and called
  // from gRPC threads for every call (the streams' attempts and the pool's
  // own health watches); it must be thread-safe. Default empty; entries
  // must not be null.
  std::vector<
      std::shared_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptor_factories;
  // Extra channel arguments for every connection. The pool sets its own keys
  // after these (subchannel isolation, a per-connection id, keepalive from
  // the fields below), so do not set keepalive here. Default empty.
  grpc::ChannelArguments channel_args;

  // At most this many open connections per endpoint (the target counts as
  // one), draining and suspect ones included. At the
  // cap a pick reuses the least-loaded usable connection, else the
  // least-loaded suspect one that is still READY; only when there is
  // neither does it fail with UNAVAILABLE "no usable connection". Default 8;
  // range [1, 1024].
  int max_connections = 8;

  // Warm spares: while a group has picks (streams on it), the pool keeps
  // this many usable connections in it beyond the first, within
  // `max_connections`, so that a GOAWAY or a drain finds a READY connection
  // already there and the streams move without a connect on their critical
  // path. Picks spread over all usable connections (fewest picks first), so
  // a standby usually carries part of the streams too; when one drains (or
  // turns suspect), the others take its streams at once and a new spare is
  // opened in the background, 20 ms later at the earliest (so that its
  // connect does not compete with the moves for the client's cores; at
  // once when no usable connection is left) and on the probe schedule.
  // A group without picks keeps no
  // spares: idle ones are closed after `idle_timeout` as usual, and a spare
  // is never closed for idleness while its group has picks. Behind a VIP a
  // spare likely reaches another backend; with `addresses` it is a second
  // connection to the same one (helps against per-connection GOAWAYs such
  // as a server's max connection age). Default 0 (off: one connection per
  // group; a drain then opens the replacement on the critical path); in
  // [0, 64] and < `max_connections`.
  int standby_connections = 0;

  // A soft cap on the picks (streams, unary calls in progress) one
  // connection holds: while an endpoint has picks, the pool keeps enough
  // live connections to it for all of them and the next one at this many
  // each (opened within `max_connections`, on the probe schedule), and a
  // pick goes to a connection below the cap (even one still connecting)
  // before one at it, fewest picks first. When every connection is at the
  // cap (at `max_connections`, or a burst of picks faster than connections
  // open) picks still go fewest first, above the cap. Why:
  // an HTTP/2 server admits a limited number of concurrent streams per
  // connection (SETTINGS_MAX_CONCURRENT_STREAMS: 100 on many servers and
  // proxies), and gRPC queues the calls beyond it without a sign; and a
  // gRPC channel's cost per completed operation grows with the calls it
  // holds (docs/performance.md, tens of thousands of streams). Counted over
  // the endpoint's draining connections too, so that streams moving off a
  // GOAWAY find room. Default 0: no cap (one connection per endpoint, plus
  // `standby_connections`); in [0, kMaxStreamsPerConnection] (1,000,000).
  int max_streams_per_connection = 0;
  static constexpr int kMaxStreamsPerConnection = 1000000;

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
  // Interval between pings. Default 6 min; in [10 s, 24 h], or
  // InfiniteDuration to disable keepalive.
  absl::Duration keepalive_time = absl::Minutes(6);
  // How long to wait for a ping's ack before closing the connection.
  // Default 20 s; in (0, 24 h].
  absl::Duration keepalive_timeout = absl::Seconds(20);
  // Also ping with no call open. Default false (servers punish it).
  bool keepalive_permit_without_calls = false;

  // Watch grpc.health.v1.Health/Watch on each connection once READY; a
  // NOT_SERVING answer makes the connection draining, like a GOAWAY. While
  // nothing needs a connection (no pick held, no stream waiting), a
  // NOT_SERVING connection is kept instead, and usable again when its watch
  // says SERVING; the next pick or wait drains and replaces it. A server
  // without the health service (UNIMPLEMENTED) counts as serving.
  // Default false.
  bool health_check = false;
  // The service name sent in the health request. Default "" (the server).
  std::string health_service;

  // Probing a group that has no usable connection. The pool opens a
  // group's connections at most this often: the first two at once (a
  // connection lost right after it opened is still replaced before break),
  // the next `probe_initial_backoff` later, then 1.6 times longer each time
  // up to `probe_max_backoff`, each delay jittered by +-20 % (drawn once per
  // open). The schedule starts over once a connection of the group has
  // stayed usable for `probe_max_backoff`, so a GOAWAY from a healthy
  // server is replaced at once (make before break), while servers that
  // accept and then GOAWAY, answer NOT_SERVING or fail to connect cost at
  // most one connect per probe interval. The same values drive gRPC's own
  // reconnect backoff of each connection (GRPC_ARG_INITIAL_ / _MAX_
  // RECONNECT_BACKOFF_MS; gRPC fixes its multiplier at 1.6 and its jitter at
  // 20 %, which is why these are not options), so a connection that cannot
  // connect retries on the same schedule instead of gRPC's 1 s..120 s; and
  // a health watch that ends is restarted on it. With the defaults a
  // dependency that comes back after an outage is connected to within about
  // 360 ms (300 ms + 20 %). gRPC's connect timeout
  // (GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 20 s) is left alone: it bounds one
  // connect attempt, and a short one would abort slow handshakes.
  //
  // Delay before the third open. Default 50 ms; in [1 ms,
  // probe_max_backoff].
  absl::Duration probe_initial_backoff = absl::Milliseconds(50);
  // The un-jittered delay never grows past this. Default 300 ms; in
  // [probe_initial_backoff, 1 h].
  absl::Duration probe_max_backoff = absl::Milliseconds(300);

  // Suspect connections: evidence that a READY connection is going away
  // although no GOAWAY came. One report of an attempt that ended (or
  // stalled) before its first message suffices (`ReportDrainEnd` counts as
  // such). Ends after a first message are weak evidence, since a healthy
  // server may shed load: the connection is suspect only once this many
  // different streams ended on it within `suspect_end_window` (a server
  // cancelling all its streams). One stream ending again and again is never
  // enough. Default 3; in [1, 10000].
  int suspect_after_ends = 3;
  // Default 1 s; in (0, 1 h].
  absl::Duration suspect_end_window = absl::Seconds(1);
  // A stream whose attempt just ended on a connection that still looks
  // READY (weak evidence, within `suspect_end_window`) does not go straight
  // back there: its next pick takes any other usable connection and, when
  // there is none, opens one if the probe schedule and `max_connections`
  // allow (else it goes back). Before `suspect_after_ends` streams have
  // ended, the first streams of a server that ends its streams before its
  // GOAWAY then reopen elsewhere instead of on the connection going away.
  // A server that sheds one stream spreads it to another connection (which
  // the idle rules close again). Default true.
  bool reopen_elsewhere_after_end = true;
  // Whether a stream's unannounced end is evidence about its connection.
  // Per connection (pods, L4 balancers), an end (see above) may make the
  // connection suspect, and new picks and moves go to another connection,
  // opened if needed (behind an L4 balancer a new connection may reach
  // another server). Per call (L7 proxies), ends never make a connection
  // suspect and no connection is opened to escape one: a stream whose call
  // was refused retries on the endpoint's connections (the proxy sends the
  // next call wherever it balances it) after its `recovery_jitter` rather
  // than its backoff, up to 3 times per `suspect_end_window` (later
  // refusals within it wait the backoff: the service behind the proxy may
  // be down), and no new connection's health watch takes the proxy's next
  // round-robin turn ahead of the stream's call (which would send every
  // retry to the same server). Stalls stay evidence either way (a proxy
  // connection can hang).
  // `kDetect` learns it per endpoint (for as long as it stays in the set):
  // per call once a call was refused (ended before its first message) on a
  // connection opened to get away from evidence against its other ones,
  // while streams ran on through those (a server going away ends them all),
  // or on two such connections within one `suspect_probation`. Its suspects
  // are restored then (`OnEndpointBalancesCalls`, `EndpointStats::per_call`).
  // A pod or L4 balancer rarely shows this; if it does, its streams retry on
  // its existing connections until a GOAWAY, a stall or the endpoint set
  // moves them: that drain's refusals, never an error (docs/endpoints.md).
  // Set `kPerConnection` or `kPerCall` when you know. Default `kDetect`; one
  // of the three values.
  EndpointBalancing balancing = EndpointBalancing::kDetect;
  // A suspect connection still READY after this long with no new evidence
  // takes picks again (`OnConnectionRestored`); each new report restarts
  // the period. Default 30 s; in (0, 24 h], or InfiniteDuration to keep it
  // suspect until it leaves READY or its last pick is released.
  absl::Duration suspect_probation = absl::Seconds(30);

  // Told `OnDependencyAvailable()` (an open breaker turns half-open at
  // once) whenever a group goes from no usable connection to a usable one.
  // Usually the breaker the streams on this pool share. Default null (none).
  std::shared_ptr<CircuitBreaker> breaker;

  // Time source for idle, probe and probation timers. Default null, meaning
  // `SystemClock()`.
  std::shared_ptr<Clock> clock;
  // Connection events. Default null (none).
  std::shared_ptr<ConnectionObserver> observer;
};

// OK, or INVALID_ARGUMENT naming the first field that is out of range.
absl::Status Validate(const ConnectionPoolOptions& options);

// The label a pool made from `options` has: `label` if set, else `target`,
// else `AddressListLabel(addresses)`, else `endpoints->Label()`.
std::string PoolLabel(const ConnectionPoolOptions& options);

// A snapshot of a pool's connections.
struct ConnectionPoolStats {
  std::size_t open = 0;            // connections not yet retired (all below)
  std::size_t ready = 0;           // READY and usable (not draining or suspect)
  std::size_t draining = 0;        // draining, waiting for their picks to end
  std::size_t suspect = 0;         // suspect (and not draining)
  std::uint64_t restored = 0;      // suspects ever restored after probation
  std::size_t picks = 0;           // picks held over all connections
  std::uint64_t total_opened = 0;  // connections ever opened
  std::size_t endpoints = 0;       // endpoints in the set (missing included)
  std::uint64_t endpoint_errors = 0;  // endpoint source errors, ever
};

// One endpoint's share of a pool (`ConnectionPool::Endpoints`).
struct EndpointStats {
  std::string address;          // as the set gave it
  std::size_t streams = 0;      // picks held on its connections
  std::size_t connections = 0;  // open connections to it
  bool missing = false;         // missing from the last answer (flap rule)
  bool leaving = false;         // out of the set; its connections are draining
  // It balances each call (`EndpointBalancing::kPerCall`, set or learned).
  bool per_call = false;
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
//   listener holding a pick on it hears `OnConnectionDraining` exactly once
//   (many listeners are told from up to 8 threads at once, so the streams
//   leaving a connection start their new calls in parallel; the pool
//   method or watcher callback that saw the drain returns once all were
//   told).
//   Make before break: if that leaves its group without a usable
//   connection, one replacement is opened at once (a burst of streams moving
//   together shares it). A draining connection is closed when its last pick
//   is released.
// - Suspect: reports (`ReportUnannouncedEnd`, `ReportDrainEnd`) that give
//   evidence a READY connection is going away (see `suspect_after_ends`)
//   make it suspect: new picks avoid it while any other connection can take
//   them (it is a last resort before failing a pick, never a reason to
//   fail one). Streams already on it keep running and are not told; if it
//   leaves READY it becomes draining as above. It is closed when its last
//   pick is released (at once if it has none), or takes picks again after
//   `suspect_probation` without new evidence. A replacement is opened as
//   for draining. A report on a connection that is not READY is ignored,
//   and so is every end (not a stall) on an endpoint that balances each
//   call (`balancing`; a stream whose call it refused is told available as
//   soon as it asks, up to 3 times per `suspect_end_window`, and retries
//   on the same connections).
// - Probing: a group opens connections no faster than the probe backoff
//   (`probe_initial_backoff`); while it waits, a pick that finds no other
//   connection fails with UNAVAILABLE saying when the next probe is due.
// - Available: usable means READY, not draining or suspect, and SERVING
//   when `health_check` is on. When a group goes from no usable connection
//   to one, every listener registered by `NotifyWhenAvailable` is told once
//   (then forgotten) and `options.breaker` hears `OnDependencyAvailable`.
// - Idle: a usable connection with no picks for `idle_timeout` is closed.
// - Endpoints: the pool connects to a set of endpoints (the target as one,
//   `addresses`, the answers of `endpoints`, or `SetEndpoints`), each
//   connection to exactly one endpoint, and keeps a connection to each.
//   Picks spread over endpoints: among connections of equal rank (READY
//   first, then connecting), the one whose endpoint holds the fewest picks,
//   then the one holding the fewest itself; ties go to the oldest. So N
//   streams over k endpoints differ by at most one per endpoint when they
//   open while all are READY, and a new endpoint takes every pick that
//   moves or opens until it has caught up. An endpoint that leaves the set
//   is draining: its connections are marked draining (listeners told, make
//   before break, nothing counts against the breaker) and never reopened.
//   The flap rule, for a source's answers: an endpoint missing from one
//   answer is only avoided by new picks (`OnEndpointMissing`); it leaves
//   when the next answer lacks it too, or at once if one of its
//   connections drains or none is READY. `SetEndpoints` removes at once.
//   The pool asks its source to look again (`EndpointSource::Refresh`) on
//   every drain, failed connect and suspect connection.
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
class TETHER_API ConnectionPool final : public ConnectionSource {
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
  // Strong evidence: as `ReportUnannouncedEnd` with `before_first_message`.
  void ReportDrainEnd(std::uint64_t connection_id,
                      const absl::Status& status) override;
  void ReportUnannouncedEnd(std::uint64_t connection_id,
                            const EndReport& report) override;
  void NotifyWhenAvailable(std::weak_ptr<DrainListener> listener) override;
  // True iff connection `connection_id` is open and READY right now
  // (draining or suspect included); false for retired or unknown ids.
  bool IsConnected(std::uint64_t connection_id) override;
  // The streams leaving one draining connection get points that cover the
  // spread window evenly, in an order offset at random per connection.
  absl::optional<double> SpreadShare(std::uint64_t connection_id) override;
  // The streams that one connection loses together after they delivered
  // (ends less than `suspect_end_window` apart) reopen at points that cover
  // their part of `reopen_after_progress_jitter` evenly; the part grows
  // with the streams the connection carried at the first of those ends (a
  // stream alone: at once; the whole window from 128).
  absl::optional<double> ReopenShare(std::uint64_t connection_id) override;

  ConnectionPoolStats Stats() const;

  // Replaces the endpoint set (see "Endpoints" above): new endpoints are
  // connected to, endpoints left out are drained at once. A pool with an
  // `endpoints` source takes the source's next answer over this one.
  // INVALID_ARGUMENT as `ValidateEndpoints` (the set is then unchanged).
  absl::Status SetEndpoints(std::vector<Endpoint> endpoints);
  // The endpoints and their streams, in the order they joined.
  std::vector<EndpointStats> Endpoints() const;

  // The pool's name for metrics and logs (`PoolLabel` of its options), e.g.
  // `MakeMetricsObserver(sink, method, pool->label())`.
  const std::string& label() const { return label_; }

 private:
  ConnectionPool() = default;

  std::string label_;
  std::shared_ptr<internal::GrpcConnectionDriver> driver_;
  std::shared_ptr<internal::PoolCore> core_;
  std::shared_ptr<EndpointSource> source_;
};

}  // namespace tether

#endif  // TETHER_CONNECTION_POOL_H_
