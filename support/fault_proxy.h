// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The one loopback TCP proxy of tether's tests, examples, demo and
// benchmarks: it routes connections like a Kubernetes Service and injects
// the network faults that nobody announces (black holes, pauses, latency,
// slow links, resets, refused connections, half-closes).
#ifndef TETHER_SUPPORT_FAULT_PROXY_H_
#define TETHER_SUPPORT_FAULT_PROXY_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tether {
namespace support {

// Which open connections a fault applies to: all of them, those routed to one
// backend (as given to `SetBackend`/`AddBackend`), or one by its id (see
// `FaultProxy::Connections`). A selection is evaluated when the fault is
// applied: connections accepted later are not affected.
class Select {
 public:
  static Select All() { return Select(Kind::kAll, "", 0); }
  static Select Backend(absl::string_view host_port) {
    return Select(Kind::kBackend, host_port, 0);
  }
  static Select Connection(std::uint64_t id) {
    return Select(Kind::kId, "", id);
  }

 private:
  friend class FaultProxy;
  enum class Kind { kAll, kBackend, kId };
  Select(Kind kind, absl::string_view backend, std::uint64_t id)
      : kind_(kind), backend_(backend), id_(id) {}
  Kind kind_;
  std::string backend_;
  std::uint64_t id_;
};

// What the proxy does with NEW connections (connections already open are not
// touched; use the faults below for them).
enum class Admission {
  kAccept,  // Route to a backend (the default).
  kClose,   // Accept, then close at once with a FIN (the peer reads EOF).
  kReset,   // Accept, then close at once with a RST (ECONNRESET).
  // Stop calling accept(): the kernel still completes handshakes into the
  // listen backlog, so clients connect and then hear nothing, like an
  // overloaded server. They are accepted (and routed) once admission goes
  // back to kAccept; kClose/kReset close them.
  kHold,
};

// A side of a proxied connection.
enum class Side {
  kClient,   // the peer that connected to the proxy
  kBackend,  // the peer the proxy connected to
};

// One open connection pair, from `FaultProxy::Connections`.
struct ConnectionInfo {
  std::uint64_t id = 0;  // 1, 2, ... in accept order, never reused
  std::string backend;
  bool black_holed = false;
  bool paused = false;
  absl::Duration delay = absl::ZeroDuration();
  std::int64_t drip_bytes = 0;  // 0: no drip
  absl::Duration drip_interval = absl::ZeroDuration();
  std::int64_t bytes_to_backend = 0;  // forwarded (written) so far
  std::int64_t bytes_to_client = 0;
  // Read and thrown away (black hole, half-close).
  std::int64_t bytes_dropped = 0;
};

// A loopback TCP proxy that behaves like a Kubernetes ClusterIP Service
// during a rollout, with faults on demand.
//
// Routing: each NEW client connection goes to the next backend of the
// current set, round robin (`SetBackend` makes a set of one); connections
// already open stay on their backend until one side closes them, as with
// kube-proxy. With no backend, or when the backend refuses, the client
// connection is closed at once (FIN).
//
// Forwarding: bytes are copied both ways unchanged. A half-close (EOF) of one
// side is passed on as `shutdown(SHUT_WR)` to the other, whose direction
// keeps going; a reset or error on one side resets the other (RST).
//
// Faults, each on the connections a `Select` names (and returning how many
// it touched): `BlackHole`, `Pause`/`Resume`, `SetDelay`, `SetDrip`,
// `Reset`, `Close`, `HalfClose`; `SetAdmission` for new connections. When a
// fault method returns, every selected connection already runs under it
// (no byte is forwarded against it afterwards). `Heal` clears pause, delay
// and drip.
//
// Thread safety: every method may be called from any thread concurrently,
// except the destructor. Threads: one accepts, one per connection pair copies
// bytes (poll()-driven, non-blocking sockets). Every wait inside is bounded.
// `Stop()` (and the destructor) closes every socket and joins every thread.
//
// Example:
//   FaultProxy proxy;
//   ASSERT_TRUE(proxy.Start().ok());
//   ASSERT_TRUE(proxy.SetBackend(server_a.address()).ok());
//   auto channel = grpc::CreateChannel(proxy.address(), ...);   // -> a
//   ASSERT_TRUE(proxy.SetBackend(server_b.address()).ok());     // new -> b
//   proxy.BlackHole(Select::Backend(server_a.address()));  // a goes silent
class FaultProxy {
 public:
  FaultProxy();
  ~FaultProxy();  // Stop().

  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  // Listens on 127.0.0.1:`port` (0: the OS picks; valid 0..65535) and starts
  // accepting. INVALID_ARGUMENT for a bad port, FAILED_PRECONDITION if
  // already started, UNAVAILABLE if the port cannot be bound.
  absl::Status Start(int port = 0);
  // The listening port (0 before `Start`), and "127.0.0.1:<port>".
  int port() const;
  std::string address() const;
  // Stops listening, closes every connection (FIN) and joins every thread.
  // Idempotent.
  void Stop();

  // --- Routing (new connections only). Backends are "host:port" with an
  // IPv4 literal or "localhost" as host; INVALID_ARGUMENT if unparsable.
  // Makes `host_port` the only backend.
  absl::Status SetBackend(absl::string_view host_port);
  // Adds a backend to the round robin (no-op if present).
  absl::Status AddBackend(absl::string_view host_port);
  // Takes a backend out of the round robin; its open connections stay.
  void RemoveBackend(absl::string_view host_port);
  // No backend: new connections are closed at once.
  void ClearBackends();
  std::vector<std::string> backends() const;

  void SetAdmission(Admission admission);
  Admission admission() const;

  // --- Faults on open connections. Each returns the number of connections
  // selected.
  // Stops forwarding both ways and keeps both sockets open: bytes that
  // arrive are read and dropped, FINs and resets are swallowed (the side
  // that sent one is closed, the other hears nothing). Like a peer whose
  // network vanished. Not undone by `Heal` (the byte streams are broken):
  // end such connections with `Reset` or `Close`.
  int BlackHole(const Select& which);
  // Stops forwarding (and reading) both ways; `Resume` carries on with the
  // bytes buffered meanwhile, in order. Readers see back-pressure.
  int Pause(const Select& which);
  int Resume(const Select& which);
  // Adds `delay` (>= 0; zero clears) to every chunk read, both ways.
  int SetDelay(const Select& which, absl::Duration delay);
  // Forwards at most `bytes` per `interval`, each way (bytes <= 0 clears).
  int SetDrip(const Select& which, std::int64_t bytes, absl::Duration interval);
  // Clears pause, delay and drip.
  int Heal(const Select& which);
  // Closes both sockets with a RST (SO_LINGER 0); both peers see ECONNRESET.
  int Reset(const Select& which);
  // Closes both sockets with a FIN, dropping what is buffered (the kernel
  // sends a RST instead if bytes were waiting unread on a socket).
  int Close(const Select& which);
  // Sends a FIN to `toward` (shutdown(SHUT_WR)) and stops forwarding to it;
  // what its peer sends later is dropped. The other direction carries on.
  int HalfClose(const Select& which, Side toward);

  // --- Counters.
  // Client connections accepted (including those closed for lack of a
  // backend or by admission).
  int total_accepted() const;
  // Open connection pairs, all backends.
  int live_connections() const;
  // Open pairs to `backend`, and pairs ever made to it.
  int LiveConnectionsTo(absl::string_view backend) const;
  int TotalConnectionsTo(absl::string_view backend) const;
  // Ever made, per backend.
  std::map<std::string, int> TotalConnectionsPerBackend() const;
  // The open pairs, in accept order.
  std::vector<ConnectionInfo> Connections() const;

  // Wait until a count reaches (at least, or for Live: exactly) `n`, or
  // `timeout` passes; true if it did.
  bool WaitForAccepted(int n, absl::Duration timeout);
  bool WaitForTotalConnectionsTo(absl::string_view backend, int n,
                                 absl::Duration timeout);
  bool WaitForLiveConnectionsTo(absl::string_view backend, int n,
                                absl::Duration timeout);
  bool WaitForLiveConnections(int n, absl::Duration timeout);
  // Until `pred(Connections())` holds (checked on every change of a
  // connection's counters), or `timeout`. `pred` must not call the proxy.
  bool WaitForConnections(
      const std::function<bool(const std::vector<ConnectionInfo>&)>& pred,
      absl::Duration timeout);

 private:
  struct Conn;
  struct Direction;

  void AcceptLoop();
  void Route(int client);
  void Pump(Conn* conn);
  // Applies `change` to every selected connection under mu_, wakes their
  // threads and waits (bounded) until each has adopted the change.
  int Apply(const Select& which, const std::function<void(Conn*)>& change);
  bool Selected(const Select& which, const Conn& c) const;
  bool WaitUntil(absl::Duration timeout, const std::function<bool()>& pred);
  void ReapLocked(std::list<std::unique_ptr<Conn>>* done);
  std::vector<ConnectionInfo> ConnectionsLocked() const;

  // std::mutex (not absl::Mutex) so that TSan sees the synchronization with
  // the system's uninstrumented abseil. `cv_` is notified on every change of
  // the counters and on every adopted fault.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // All guarded by mu_:
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: wakes the accept loop
  int port_ = 0;
  bool started_ = false;
  bool stopping_ = false;
  Admission admission_ = Admission::kAccept;
  std::vector<std::string> backends_;
  std::size_t next_backend_ = 0;
  std::uint64_t next_id_ = 1;
  std::map<std::string, int, std::less<>> live_;
  std::map<std::string, int, std::less<>> total_;
  int live_count_ = 0;
  int accepted_ = 0;
  std::list<std::unique_ptr<Conn>> conns_;

  std::thread accept_thread_;  // Touched only by Start and Stop.
  std::mutex stop_mu_;         // Serializes Start and Stop.
};

}  // namespace support
}  // namespace tether

#endif  // TETHER_SUPPORT_FAULT_PROXY_H_
