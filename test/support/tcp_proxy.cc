// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "test/support/tcp_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tether {
namespace testsupport {
namespace {

// Parses "host:port" (IPv4 literal or "localhost") into `out`.
bool ParseHostPort(absl::string_view host_port, sockaddr_in* out) {
  std::size_t colon = host_port.rfind(':');
  if (colon == absl::string_view::npos) return false;
  std::string host(host_port.substr(0, colon));
  int port = 0;
  if (!absl::SimpleAtoi(host_port.substr(colon + 1), &port) || port <= 0 ||
      port > 65535) {
    return false;
  }
  if (host == "localhost") host = "127.0.0.1";
  std::memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  out->sin_port = htons(static_cast<std::uint16_t>(port));
  return inet_pton(AF_INET, host.c_str(), &out->sin_addr) == 1;
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Writes all of `data`; false on error (the peer is gone).
bool SendAll(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

struct TcpProxy::Conn {
  int client_fd = -1;
  int backend_fd = -1;
  std::string backend;
  int directions_left = 2;  // Guarded by TcpProxy::mu_.
  bool closed = false;      // Guarded by TcpProxy::mu_.
  std::thread up;           // client -> backend
  std::thread down;         // backend -> client
};

TcpProxy::TcpProxy() = default;

TcpProxy::~TcpProxy() { Stop(); }

absl::Status TcpProxy::Start(int port) {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError("port must be in [0, 65535]");
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    if (started_) return absl::FailedPreconditionError("already started");
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError("socket() failed");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 128) != 0) {
    int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat(
        "TcpProxy cannot listen on 127.0.0.1:", port, ": ", strerror(err)));
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    close(fd);
    return absl::UnavailableError("pipe2() failed");
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    listen_fd_ = fd;
    wake_pipe_[0] = pipe_fds[0];
    wake_pipe_[1] = pipe_fds[1];
    port_ = ntohs(addr.sin_port);
    started_ = true;
    stopping_ = false;
  }
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return absl::OkStatus();
}

int TcpProxy::port() const {
  std::lock_guard<std::mutex> l(mu_);
  return port_;
}

std::string TcpProxy::address() const {
  return absl::StrCat("127.0.0.1:", port());
}

absl::Status TcpProxy::SetBackend(absl::string_view host_port) {
  sockaddr_in addr;
  if (!ParseHostPort(host_port, &addr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad backend address '", host_port,
                     "'; want host:port with an IPv4 host or localhost"));
  }
  std::lock_guard<std::mutex> l(mu_);
  backend_ = std::string(host_port);
  return absl::OkStatus();
}

void TcpProxy::ClearBackend() {
  std::lock_guard<std::mutex> l(mu_);
  backend_.clear();
}

std::string TcpProxy::backend() const {
  std::lock_guard<std::mutex> l(mu_);
  return backend_;
}

void TcpProxy::AcceptLoop() {
  int listen_fd;
  int wake_fd;
  {
    std::lock_guard<std::mutex> l(mu_);
    listen_fd = listen_fd_;
    wake_fd = wake_pipe_[0];
  }
  while (true) {
    pollfd fds[2] = {{listen_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    int r = poll(fds, 2, -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;  // Stop().
    if ((fds[0].revents & POLLIN) == 0) continue;
    int client = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    SetNoDelay(client);

    std::string backend;
    std::list<std::unique_ptr<Conn>> done;
    {
      std::lock_guard<std::mutex> l(mu_);
      ++accepted_;
      backend = backend_;
      ReapLocked(&done);
      cv_.notify_all();
    }
    for (auto& c : done) {
      c->up.join();
      c->down.join();
    }
    sockaddr_in addr;
    int server = -1;
    if (!backend.empty() && ParseHostPort(backend, &addr)) {
      server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (server >= 0 && connect(server, reinterpret_cast<sockaddr*>(&addr),
                                 sizeof(addr)) != 0) {
        close(server);
        server = -1;
      }
    }
    if (server < 0) {
      close(client);  // No backend, or it refused.
      continue;
    }
    SetNoDelay(server);

    {
      std::lock_guard<std::mutex> l(mu_);
      auto conn = std::make_unique<Conn>();
      Conn* c = conn.get();
      c->client_fd = client;
      c->backend_fd = server;
      c->backend = backend;
      ++live_[backend];
      ++total_[backend];
      ++live_count_;
      conns_.push_back(std::move(conn));
      // The threads take mu_ before touching `c`'s guarded fields, and `c`
      // lives until both are joined.
      c->up = std::thread([this, c] { Pump(c, c->client_fd, c->backend_fd); });
      c->down =
          std::thread([this, c] { Pump(c, c->backend_fd, c->client_fd); });
      cv_.notify_all();
    }
  }
}

void TcpProxy::Pump(Conn* conn, int from, int to) {
  std::vector<char> buf(64 * 1024);
  bool clean_eof = false;
  while (true) {
    ssize_t n = read(from, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      clean_eof = true;
      break;
    }
    if (n < 0) break;
    if (!SendAll(to, buf.data(), static_cast<std::size_t>(n))) break;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    if (clean_eof) {
      // Pass the half-close on; the other direction keeps going.
      shutdown(to, SHUT_WR);
    } else {
      // An error on one side ends both directions.
      shutdown(conn->client_fd, SHUT_RDWR);
      shutdown(conn->backend_fd, SHUT_RDWR);
    }
  }
  FinishDirection(conn);
}

void TcpProxy::FinishDirection(Conn* conn) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (--conn->directions_left > 0) return;
    close(conn->client_fd);
    close(conn->backend_fd);
    conn->closed = true;
    --live_[conn->backend];
    --live_count_;
    cv_.notify_all();
  }
}

void TcpProxy::ReapLocked(std::list<std::unique_ptr<Conn>>* done) {
  for (auto it = conns_.begin(); it != conns_.end();) {
    if ((*it)->closed) {
      done->push_back(std::move(*it));
      it = conns_.erase(it);
    } else {
      ++it;
    }
  }
}

void TcpProxy::CloseAll() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& c : conns_) {
    if (c->closed) continue;
    shutdown(c->client_fd, SHUT_RDWR);
    shutdown(c->backend_fd, SHUT_RDWR);
  }
}

void TcpProxy::Stop() {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!started_ || stopping_) return;
    stopping_ = true;
    char byte = 1;
    ssize_t ignored = write(wake_pipe_[1], &byte, 1);
    (void)ignored;
  }
  accept_thread_.join();
  CloseAll();
  std::list<std::unique_ptr<Conn>> conns;
  {
    std::lock_guard<std::mutex> l(mu_);
    conns.swap(conns_);
  }
  for (auto& c : conns) {
    c->up.join();
    c->down.join();
  }
  std::lock_guard<std::mutex> l(mu_);
  close(listen_fd_);
  close(wake_pipe_[0]);
  close(wake_pipe_[1]);
  listen_fd_ = wake_pipe_[0] = wake_pipe_[1] = -1;
  started_ = false;
}

int TcpProxy::LiveConnectionsTo(absl::string_view backend) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = live_.find(backend);
  return it == live_.end() ? 0 : it->second;
}

int TcpProxy::TotalConnectionsTo(absl::string_view backend) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = total_.find(backend);
  return it == total_.end() ? 0 : it->second;
}

int TcpProxy::live_connections() const {
  std::lock_guard<std::mutex> l(mu_);
  return live_count_;
}

int TcpProxy::total_accepted() const {
  std::lock_guard<std::mutex> l(mu_);
  return accepted_;
}

bool TcpProxy::WaitUntil(absl::Duration timeout,
                         const std::function<bool()>& pred) {
  std::unique_lock<std::mutex> l(mu_);
  return cv_.wait_for(l, absl::ToChronoNanoseconds(timeout), pred);
}

bool TcpProxy::WaitForAccepted(int n, absl::Duration timeout) {
  return WaitUntil(timeout, [this, n]() { return accepted_ >= n; });
}

bool TcpProxy::WaitForTotalConnectionsTo(absl::string_view backend, int n,
                                         absl::Duration timeout) {
  return WaitUntil(timeout, [this, backend, n]() {
    auto it = total_.find(backend);
    return it != total_.end() && it->second >= n;
  });
}

bool TcpProxy::WaitForLiveConnectionsTo(absl::string_view backend, int n,
                                        absl::Duration timeout) {
  return WaitUntil(timeout, [this, backend, n]() {
    auto it = live_.find(backend);
    return (it == live_.end() ? 0 : it->second) == n;
  });
}

}  // namespace testsupport
}  // namespace tether
