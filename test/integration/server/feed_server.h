// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// A real gRPC server on 127.0.0.1 serving tether.test.Feed
// (test/proto/feed.proto) whose handlers register with a
// `tether::server::DrainController`: callback reactors or sync handlers,
// server streams and bidi streams.
#ifndef TETHER_TEST_INTEGRATION_SERVER_FEED_SERVER_H_
#define TETHER_TEST_INTEGRATION_SERVER_FEED_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"
#include "support/child_process.h"
#include "tether/logging.h"
#include "tether/server/drain_controller.h"

namespace tether {
namespace testsupport {

struct FeedServerOptions {
  // Put in `FeedEvent.server`. Default "server".
  std::string name = "server";
  // Sync handlers (a thread per call, polling their `DrainCall`) instead of
  // callback reactors (hooks). Default false.
  bool sync = false;
  // Pause between two events of one call. Default 5 ms; > 0.
  absl::Duration tick = absl::Milliseconds(5);
  // Whether handlers send the drain notice (an event with `drain_notice`
  // set and seq 0) when the drain tells them to. Default true.
  bool send_notice = true;
  // Whether handlers end their call when the drain tells them to (or gRPC
  // cancels it). False: a handler told to end neither writes nor returns
  // until `ReleaseStuck()` (a handler that never ends). Default true.
  bool obey_end = true;
  // Whether handlers register with the drain at all. False: a service that
  // leaves everything to gRPC's `Shutdown` (no notice, no end; a handler
  // ends when gRPC cancels its call). Default true.
  bool register_calls = true;
  // The drain's options (observer, log sink, durations).
  server::DrainOptions drain;
  // Listening credentials. Default null: insecure.
  std::shared_ptr<grpc::ServerCredentials> credentials;
};

using support::AcceptsConnections;
using support::ConnectLoopback;

// Drops a drain's log lines (tests read its observer and report).
class QuietSink final : public LogSink {
 public:
  void Write(LogSeverity, absl::string_view) override {}
};

// Thread safety: every method from any thread, not concurrently with the
// destructor. The destructor releases stuck handlers and waits for the
// server to stop.
class FeedServer {
 public:
  explicit FeedServer(FeedServerOptions options);
  ~FeedServer();
  FeedServer(const FeedServer&) = delete;
  FeedServer& operator=(const FeedServer&) = delete;

  // Builds and starts the server with a new `DrainController`; after the
  // first run, on the same port.
  absl::Status Start();
  // Stops at once (deadline now); no drain. For setting a test up.
  void Kill();
  std::string address() const;
  int port() const;
  // The current run's controller (valid after `Start`).
  server::DrainController& drain();

  // Lets handlers that ignored their end return.
  void ReleaseStuck();

  // Calls (Watch and Chat) started since `t` (on `absl::Now()`).
  int CallsStartedSince(absl::Time t) const;
  int calls_started() const;
  int notices_sent() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace testsupport
}  // namespace tether

#endif  // TETHER_TEST_INTEGRATION_SERVER_FEED_SERVER_H_
