// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_TEST_SUPPORT_L7_PROXY_H_
#define TETHER_TEST_SUPPORT_L7_PROXY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "support/child_process.h"

namespace tether {
namespace testsupport {

// A real L7 proxy on loopback for tests: Debian's nginx (`grpc_pass`) or
// HAProxy (`mode http`, h2 on both sides), run as a child process on
// 127.0.0.1 and a free port, round-robining gRPC over h2 to `backends`
// (ports on 127.0.0.1). Each call is balanced on its own: two calls on one
// client connection may reach different servers, and a server's GOAWAY
// stops at the proxy.
//
// Thread safety: none; one owner (the test body).
//
//   if (!L7Proxy::Installed(L7Proxy::Kind::kNginx)) GTEST_SKIP();
//   auto proxy = L7Proxy::Start(L7Proxy::Kind::kNginx, {a.port(), b.port()});
//   ASSERT_TRUE(proxy.ok()) << proxy.status();
//   options.target = (*proxy)->address();
class L7Proxy {
 public:
  enum class Kind { kNginx, kHaproxy };

  // Whether the proxy's binary is installed (tests skip when not).
  static bool Installed(Kind kind);
  // "nginx" or "haproxy".
  static const char* Name(Kind kind);

  struct Settings {
    // The proxy's read/send (nginx) or client/server (HAProxy) timeouts, in
    // whole milliseconds.
    absl::Duration timeouts = absl::Hours(1);
    // nginx only: `keepalive_requests`, the calls a client connection takes
    // before nginx says goodbye (a graceful GOAWAY on the last one). 0:
    // nginx's default (1000).
    int keepalive_requests = 0;
    // nginx only: run a master process, so that `Reload()` works as in
    // production (new workers, the old ones GOAWAY their connections and
    // finish their calls, for at most `worker_shutdown_timeout` 10 s).
    bool reloadable = false;
  };

  // Starts the proxy and waits until it accepts connections. UNAVAILABLE
  // when it is missing or does not come up (with its log).
  static absl::StatusOr<std::unique_ptr<L7Proxy>> Start(
      Kind kind, const std::vector<int>& backends, const Settings& settings);
  static absl::StatusOr<std::unique_ptr<L7Proxy>> Start(
      Kind kind, const std::vector<int>& backends,
      absl::Duration timeouts = absl::Hours(1)) {
    Settings settings;
    settings.timeouts = timeouts;
    return Start(kind, backends, settings);
  }
  // `nginx -s reload` (SIGHUP to the master). Returns at once; the new
  // workers take over within milliseconds. FAILED_PRECONDITION unless
  // started `reloadable`.
  absl::Status Reload();
  // Kills the proxy and removes its files.
  ~L7Proxy();
  L7Proxy(const L7Proxy&) = delete;
  L7Proxy& operator=(const L7Proxy&) = delete;

  // "127.0.0.1:<port>".
  std::string address() const;
  // What the proxy wrote to stdout and stderr so far.
  std::string log() const;

 private:
  L7Proxy() = default;

  std::string dir_;
  int port_ = 0;
  bool reloadable_ = false;
  support::ChildProcess process_;
};

}  // namespace testsupport
}  // namespace tether

#endif  // TETHER_TEST_SUPPORT_L7_PROXY_H_
