// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_TEST_SUPPORT_TCP_PROXY_H_
#define TETHER_TEST_SUPPORT_TCP_PROXY_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tether {
namespace testsupport {

// A loopback TCP proxy that behaves like a Kubernetes ClusterIP Service during
// a rollout: each NEW client connection goes to the backend that is current
// when it is accepted; connections already open stay on their backend until
// one side closes them. Bytes are copied both ways unchanged (one thread per
// direction, blocking I/O); a half-close (EOF) on one side is passed on as
// `shutdown(SHUT_WR)` to the other; an error on either side closes both. If
// the backend refuses (or none is set), the client connection is closed at
// once.
//
// Thread safety: every method may be called from any thread concurrently,
// except the destructor. The proxy owns its threads and sockets; `Stop()`
// (and the destructor) closes every socket and joins every thread.
//
// Example:
//   TcpProxy proxy;
//   ASSERT_TRUE(proxy.Start().ok());
//   ASSERT_TRUE(proxy.SetBackend(server_a.address()).ok());
//   auto channel = grpc::CreateChannel(proxy.address(), ...);  // -> a
//   ASSERT_TRUE(proxy.SetBackend(server_b.address()).ok());
//   // New connections now go to b; the channel above stays on a.
class TcpProxy {
 public:
  TcpProxy();
  ~TcpProxy();  // Stop().

  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  // Listens on 127.0.0.1:`port` (0: the OS picks; valid 0..65535) and starts
  // accepting. INVALID_ARGUMENT for a bad port, FAILED_PRECONDITION if already
  // started, UNAVAILABLE if the port cannot be bound.
  absl::Status Start(int port = 0);
  // The listening port (0 before `Start`).
  int port() const;
  // "127.0.0.1:<port>".
  std::string address() const;

  // The backend for connections accepted from now on: "host:port" with an
  // IPv4 literal or "localhost" as host. INVALID_ARGUMENT if unparsable.
  absl::Status SetBackend(absl::string_view host_port);
  // Connections accepted from now on are closed at once.
  void ClearBackend();
  // The current backend as given to `SetBackend` ("" when none).
  std::string backend() const;

  // Closes every open connection pair (both sockets, abruptly); keeps
  // listening.
  void CloseAll();
  // Stops listening, closes every connection and joins every thread.
  // Idempotent.
  void Stop();

  // Open connection pairs whose backend is `backend` (as given to
  // `SetBackend`).
  int LiveConnectionsTo(absl::string_view backend) const;
  // Connection pairs ever made to `backend`.
  int TotalConnectionsTo(absl::string_view backend) const;
  // Open connection pairs, all backends.
  int live_connections() const;
  // Client connections accepted (including those closed for lack of a
  // backend).
  int total_accepted() const;

  // Wait until a count reaches at least `n`, or `timeout` passes; true if it
  // did.
  bool WaitForAccepted(int n, absl::Duration timeout);
  bool WaitForTotalConnectionsTo(absl::string_view backend, int n,
                                 absl::Duration timeout);
  // Exactly `n` open pairs to `backend`.
  bool WaitForLiveConnectionsTo(absl::string_view backend, int n,
                                absl::Duration timeout);

 private:
  struct Conn;

  void AcceptLoop();
  void Pump(Conn* conn, int from, int to);
  void FinishDirection(Conn* conn);
  void ReapLocked(std::list<std::unique_ptr<Conn>>* done);  // mu_ held.
  bool WaitUntil(absl::Duration timeout, const std::function<bool()>& pred);

  // std::mutex (not absl::Mutex) so that TSan sees the synchronization with
  // the system's uninstrumented abseil. `cv_` is notified on every change.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // All guarded by mu_:
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  int port_ = 0;
  bool started_ = false;
  bool stopping_ = false;
  std::string backend_;
  std::map<std::string, int, std::less<>> live_;
  std::map<std::string, int, std::less<>> total_;
  int live_count_ = 0;
  int accepted_ = 0;
  std::list<std::unique_ptr<Conn>> conns_;

  std::thread accept_thread_;  // Touched only by Start and Stop.
  std::mutex stop_mu_;         // Serializes Start and Stop.
};

}  // namespace testsupport
}  // namespace tether

#endif  // TETHER_TEST_SUPPORT_TCP_PROXY_H_
