// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// One replica of the example ledger service, usable in-process (the rollout
// demo, the benchmarks) and by the `ledger_server` program.
#ifndef TETHER_EXAMPLES_COMMON_LEDGER_REPLICA_H_
#define TETHER_EXAMPLES_COMMON_LEDGER_REPLICA_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"
#include "tether/server/drain_options.h"

namespace tether {
namespace examples {

// How a replica leaves when it is told to stop.
enum class ShutdownMode {
  // Health NOT_SERVING, a short pre-drain pause, then `Server::Shutdown`
  // with a deadline of drain time: GOAWAY at once, streams run on until the
  // deadline.
  kGraceful,
  // The ordering bug: every open stream ends with UNAVAILABLE "server is
  // shutting down" *before* any GOAWAY, new streams fail the same way
  // before their first message for the drain time, then a shutdown.
  kCancelFirst,
  // No GOAWAY at all. The `ledger_server` program exits the process; an
  // in-process replica can only stop its server (which sends a GOAWAY), so
  // the demo also cuts the replica's connections at its proxy first.
  kAbrupt,
  // `tether::server::DrainController`: health NOT_SERVING and serving on
  // for the pre-drain time, a drain notice (an `AccountEvent` with
  // `drain_notice`) on every open watch and up to `notice_grace` for them
  // to leave, then `Server::Shutdown` with a deadline of drain time (the
  // GOAWAY) and, a quarter of it later, the watches still open end
  // UNAVAILABLE "server is draining". Needs `LedgerReplicaOptions::
  // drain_controller`.
  kTether,
};

// "graceful", "cancel-first", "abrupt", "tether".
absl::string_view ShutdownModeName(ShutdownMode mode);
// Parses a name above; INVALID_ARGUMENT otherwise.
absl::Status ParseShutdownMode(absl::string_view name, ShutdownMode* mode);

struct LedgerReplicaOptions {
  // "HOST:PORT" to listen on. Port 0 lets the OS pick (see `address()`).
  // Default "127.0.0.1:0".
  std::string listen = "127.0.0.1:0";
  // Written into `AccountEvent.replica`. Default "replica"; not empty.
  std::string name = "replica";
  // Time between two events of one stream. Default 20 ms; > 0.
  absl::Duration tick = absl::Milliseconds(20);
  // Graceful: how long after NOT_SERVING the GOAWAY goes out.
  // Default 100 ms; >= 0.
  absl::Duration pre_drain = absl::Milliseconds(100);
  // Graceful: the shutdown deadline after the GOAWAY. Cancel-first: how long
  // new streams are failed before the shutdown. Default 2 s; >= 0.
  absl::Duration drain = absl::Seconds(2);
  // Tether: how long open watches get to leave after their drain notice.
  // Default 500 ms; in [0, 1 h].
  absl::Duration notice_grace = absl::Milliseconds(500);
  // Register every watch with a `tether::server::DrainController` made at
  // `Start`, which `Stop(kTether)` runs. Then `drain` must be >= 10 ms.
  // Default false.
  bool drain_controller = false;
  // Listening credentials (TLS). Default null: insecure.
  std::shared_ptr<grpc::ServerCredentials> credentials;
};

// OK, or INVALID_ARGUMENT naming the bad field.
absl::Status Validate(const LedgerReplicaOptions& options);

// The drain `Stop(kTether)` runs: unready window `pre_drain`, notice grace
// `notice_grace`, drain deadline `drain`, GOAWAY grace a quarter of it.
server::DrainOptions DrainOptionsFor(const LedgerReplicaOptions& options);

// A gRPC server (callback API) serving `tether.examples.ledger.v1.Ledger`
// and grpc.health.v1. Every replica produces the same events: for account
// A, event n has seq n and balance 10 * n; a watch gets the events with
// seq > after_seq, one per tick (a slow reader skips ticks, never events).
//
// Thread safety: all methods may be called from any thread. `Stop` blocks
// until the server is gone; calling it twice is harmless.
//
//   LedgerReplica r({.listen = "127.0.0.1:0", .name = "a"});
//   if (!r.Start().ok()) ...;
//   ... clients dial r.address() ...
//   r.Stop(ShutdownMode::kGraceful);
class LedgerReplica {
 public:
  explicit LedgerReplica(LedgerReplicaOptions options);
  ~LedgerReplica();  // Stop(kAbrupt) if still running.

  LedgerReplica(const LedgerReplica&) = delete;
  LedgerReplica& operator=(const LedgerReplica&) = delete;

  // Binds and serves. INVALID_ARGUMENT for bad options, UNAVAILABLE when
  // the address cannot be bound, FAILED_PRECONDITION when started twice.
  absl::Status Start();
  // "127.0.0.1:<port>" after `Start`.
  std::string address() const;
  const std::string& name() const;

  // Leaves in `mode` (see `ShutdownMode`); returns once the server stopped.
  // kAbrupt here means "stop now": an immediate shutdown deadline.
  void Stop(ShutdownMode mode);

  // Sets the grpc.health.v1 status (service "") without stopping: a health-
  // checking client treats NOT_SERVING as "drain this connection". SERVING
  // after `Start`. No-op when not running.
  void SetServing(bool serving);
  // Load shedding: while on, every new watch ends at once with
  // RESOURCE_EXHAUSTED "load shed" before its first event; turning it on also
  // ends every open watch that way. Off after `Start`.
  void SetShedding(bool on);

  // Streams opened, and streams that ended before their first event.
  std::int64_t watches_started() const;
  std::int64_t watches_failed_before_first() const;
  std::int64_t open_streams() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace examples
}  // namespace tether

#endif  // TETHER_EXAMPLES_COMMON_LEDGER_REPLICA_H_
