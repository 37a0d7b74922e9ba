// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// A small loopback TCP proxy for the examples (kept apart from the test
// support library so the examples build without tests).
#ifndef TETHER_EXAMPLES_COMMON_SERVICE_PROXY_H_
#define TETHER_EXAMPLES_COMMON_SERVICE_PROXY_H_

#include <list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace tether {
namespace examples {

// Routes TCP connections like a Kubernetes Service: each NEW connection goes
// to the next endpoint of the current set (round robin); connections already
// open stay on their endpoint until one side closes. Removing an endpoint
// does not touch its open connections (as with kube-proxy); `Cut` closes them
// (to stand for a process that died).
//
// Thread safety: all methods may be called concurrently from any thread,
// except the destructor. One thread accepts, one thread per connection
// copies bytes both ways. `Stop` (and the destructor) joins them all.
//
//   ServiceProxy proxy;
//   if (!proxy.Start().ok()) ...;
//   proxy.AddEndpoint("127.0.0.1:5001");
//   channel = grpc::CreateChannel(proxy.address(), ...);
class ServiceProxy {
 public:
  ServiceProxy() = default;
  ~ServiceProxy();

  ServiceProxy(const ServiceProxy&) = delete;
  ServiceProxy& operator=(const ServiceProxy&) = delete;

  // Listens on 127.0.0.1:`port` (0: any free port).
  absl::Status Start(int port = 0);
  std::string address() const;

  // "127.0.0.1:PORT" endpoints (IPv4 literal or "localhost").
  absl::Status AddEndpoint(absl::string_view host_port);
  void RemoveEndpoint(absl::string_view host_port);
  // Closes (with a TCP reset) every open connection to `host_port`.
  void Cut(absl::string_view host_port);
  std::vector<std::string> endpoints() const;

  void Stop();

 private:
  struct Conn {
    int client = -1;
    int backend = -1;
    std::string endpoint;
    std::thread thread;
    bool done = false;
  };

  void AcceptLoop();
  void Pump(Conn* c);
  void ReapLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> endpoints_ ABSL_GUARDED_BY(mu_);
  std::size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  std::list<std::unique_ptr<Conn>> conns_ ABSL_GUARDED_BY(mu_);
  std::thread accept_thread_;
};

}  // namespace examples
}  // namespace tether

#endif  // TETHER_EXAMPLES_COMMON_SERVICE_PROXY_H_
