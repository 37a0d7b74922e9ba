// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_TEST_SUPPORT_TEST_SERVER_H_
#define TETHER_TEST_SUPPORT_TEST_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/status.h"

namespace tether {
namespace testsupport {

// Settings of a `TestServer`. Everything but `name` and `port` can also be
// changed while the server runs, through the setters of `TestServer`.
struct TestServerOptions {
  // Put in `Event.server` and `PingReply.server`. Default "server"; any text.
  std::string name = "server";
  // TCP port on `host`. Default 0: the OS picks one (see `port()`).
  // Valid: 0..65535.
  int port = 0;
  // The IPv4 loopback address to listen on, like a pod's own IP: replicas
  // on 127.0.0.11, 127.0.0.12, ... may share one port. Default
  // "127.0.0.1"; must be in 127.0.0.0/8.
  std::string host = "127.0.0.1";
  // Pause between two events of one stream, counted from the moment the
  // previous write completed. Default 5 ms. Zero: write as fast as flow
  // control allows. Valid: >= 0.
  absl::Duration tick = absl::Milliseconds(5);
  // Size of `Event.payload` in bytes. Default 0. Valid: 0..16 MiB.
  std::size_t payload_bytes = 0;
  // When > 0, each stream ends with `end_status` right after its
  // `end_every_n`-th message. Default 0 (never). Valid: >= 0.
  std::int64_t end_every_n = 0;
  // The status that `end_every_n` ends streams with. Default UNAVAILABLE.
  // OK is allowed (a clean end of stream).
  grpc::Status end_status =
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream ended by server");
  // When not OK, every Watch and every Ping is answered with this status at
  // once (no message): a permanent error such as NOT_FOUND. Default OK (off).
  grpc::Status permanent_status = grpc::Status::OK;
  // Health status ("" and "tether.test.SeqStream") right after `Start()`.
  // Default true (SERVING).
  bool serving = true;
  // gRPC's `GRPC_ARG_MAX_CONNECTION_AGE_MS`: each connection gets a GOAWAY
  // this long after it was accepted (gRPC adds up to +-10 %), and is closed
  // `max_connection_age_grace` later, with the calls still on it. Default
  // infinite (never). A short age is a server that accepts and says goodbye
  // at once. Valid: >= 1 ms.
  absl::Duration max_connection_age = absl::InfiniteDuration();
  // Default infinite. Valid: >= 0.
  absl::Duration max_connection_age_grace = absl::InfiniteDuration();
  // gRPC's `GRPC_ARG_MAX_CONCURRENT_STREAMS`: the calls one connection may
  // hold at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); a client's calls
  // beyond it wait in gRPC's queue until one ends. Default 0 (gRPC's: no
  // limit). Valid: >= 0.
  int max_concurrent_streams = 0;
  // Listening credentials: `grpc::SslServerCredentials(...)` for TLS or
  // mutual TLS. Default null: insecure.
  std::shared_ptr<grpc::ServerCredentials> credentials;
};

// A snapshot of a `TestServer`'s counters. Counters survive restarts; they
// only grow (except `open_streams`) until `ResetStats()`.
struct TestServerStats {
  // Watch calls that reached this server (including those failed at once).
  std::int64_t watches_started = 0;
  // Watch calls that ended (for any reason: scripted error, drain, client
  // cancel, shutdown) before their first message was written.
  std::int64_t watches_failed_before_first = 0;
  // Watch calls that ended, in any way.
  std::int64_t watches_ended = 0;
  // Messages whose write completed (handed to the transport).
  std::int64_t messages_sent = 0;
  // Watch calls open right now (started, OnDone not yet run).
  std::int64_t open_streams = 0;
  // Ping calls answered.
  std::int64_t pings = 0;
  // `WatchRequest.after_seq` of every Watch received, in arrival order.
  std::vector<std::uint64_t> after_seqs;
  // For every Watch and Ping received, in arrival order: the method
  // ("Watch" or "Ping") and the client's metadata whose keys start with
  // "x-" (what interceptors and `configure_attempt` add).
  struct Call {
    std::string method;
    std::map<std::string, std::string> metadata;
  };
  std::vector<Call> calls;
};

// A real gRPC server (callback API) on 127.0.0.1 serving
// `tether.test.SeqStream` and the grpc.health.v1 health service, with
// behaviour that tests can script: gap-free event streams, streams that end
// every N messages, permanent errors, the "cancel streams before GOAWAY"
// shutdown bug, graceful shutdown (real GOAWAYs) and abrupt kills.
//
// A server can be stopped and started again; it binds the same port again
// (the one `port()` reports), so a client channel aimed at it reconnects.
//
// Thread safety: every method may be called from any thread concurrently,
// except that the destructor must not race with other calls. `Shutdown` and
// `Kill` block until the server has stopped; `ShutdownAsync` and
// `CancelFirstDrain` return at once and stop it from a background thread
// that the destructor joins.
//
// Example:
//   TestServerOptions o;
//   o.name = "a";
//   TestServer server(o);
//   ASSERT_TRUE(server.Start().ok());
//   auto channel = grpc::CreateChannel(server.address(),
//                                      grpc::InsecureChannelCredentials());
//   ... stream ...
//   server.ShutdownAsync(absl::Seconds(2));   // GOAWAY now, cancel at +2 s
//   ASSERT_TRUE(server.WaitForStopped(absl::Seconds(10)));
class TestServer {
 public:
  explicit TestServer(TestServerOptions options = {});
  // Kills the server if it runs, joins background threads (waiting out a
  // graceful shutdown in progress), and waits until every stream is gone.
  ~TestServer();

  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  // Binds 127.0.0.1:port and starts serving. The port is `options.port`, or
  // after a previous run the port that run used. Returns INVALID_ARGUMENT for
  // invalid options, FAILED_PRECONDITION when already running, UNAVAILABLE
  // when the port cannot be bound.
  absl::Status Start();

  // The bound port (0 before the first successful `Start()`). Stays the same
  // after the server stops.
  int port() const;
  // "<host>:<port>" ("127.0.0.1:<port>" by default).
  std::string address() const;
  const std::string& name() const;
  // True between a successful `Start()` and the end of a shutdown.
  bool running() const;

  // Behaviour setters; they take effect for the next decision each stream
  // makes (the next message, or the next Watch).
  void SetTick(absl::Duration tick);
  // While muted, streams (new and running) write nothing and stay open: a
  // server that accepts calls and never speaks. Unmuting resumes writes
  // within 100 ms.
  void SetMute(bool mute);
  void SetEndEveryN(std::int64_t n, grpc::Status status);
  // OK turns the permanent error off.
  void SetPermanentStatus(grpc::Status status);
  // Trailing metadata added to every call the server ends with an error of
  // its own choosing (`permanent_status`, `end_every_n`, `EndAllStreams`,
  // `FailNextPings`), e.g. {"grpc-retry-pushback-ms", "300"}. Empty: none.
  void SetErrorTrailers(std::multimap<std::string, std::string> trailers);
  // The next `n` Pings fail with `status` (not OK); later ones answer.
  void FailNextPings(int n, grpc::Status status);

  // Ends every open Watch now with `status` (not OK); the server goes on
  // accepting and serving new ones.
  void EndAllStreams(grpc::Status status);

  // The "ordering bug": ends every open Watch with UNAVAILABLE "server is
  // shutting down" before any GOAWAY, then for `window` keeps accepting new
  // Watch calls but fails each before its first message with that same
  // status, then shuts down with `grace` (which sends the GOAWAYs). Returns at
  // once; use `WaitForStopped`. Pings keep working during the window.
  void CancelFirstDrain(absl::Duration window,
                        absl::Duration grace = absl::ZeroDuration());

  // Graceful shutdown: GOAWAY to every client at once, no new calls; calls in
  // flight run on until now + `grace`, then are cancelled (clients see
  // UNAVAILABLE or CANCELLED). Blocks until the server has stopped.
  void Shutdown(absl::Duration grace);
  // `Shutdown(grace)` on a background thread; returns at once.
  void ShutdownAsync(absl::Duration grace);
  // Shutdown with an immediate deadline: every call is cancelled at once.
  void Kill();

  // Sets the health status of "" and "tether.test.SeqStream" (SERVING or
  // NOT_SERVING); remembered across restarts.
  void SetServing(bool serving);

  TestServerStats stats() const;
  std::vector<std::uint64_t> after_seqs() const;
  void ResetStats();

  // Wait until a condition holds or `timeout` passes; true if it holds.
  // Thresholds are "at least".
  bool WaitForWatches(std::int64_t n, absl::Duration timeout);
  bool WaitForFailedWatches(std::int64_t n, absl::Duration timeout);
  bool WaitForMessages(std::int64_t n, absl::Duration timeout);
  // Exactly `n` streams open.
  bool WaitForOpenStreams(std::int64_t n, absl::Duration timeout);
  // Until the server is not running (after a shutdown finished).
  bool WaitForStopped(absl::Duration timeout);
  // Any predicate on the counters; evaluated under the server's lock, so it
  // must not call back into this server.
  bool WaitFor(std::function<bool(const TestServerStats&)> pred,
               absl::Duration timeout);

  class Impl;  // Public only so the .cc's reactors can name it.

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace testsupport
}  // namespace tether

#endif  // TETHER_TEST_SUPPORT_TEST_SERVER_H_
