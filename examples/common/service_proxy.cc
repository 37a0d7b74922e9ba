// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "examples/common/service_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tether {
namespace examples {
namespace {

bool ParseHostPort(absl::string_view hp, sockaddr_in* out) {
  auto colon = hp.rfind(':');
  if (colon == absl::string_view::npos) return false;
  std::string host(hp.substr(0, colon));
  int port = 0;
  if (!absl::SimpleAtoi(hp.substr(colon + 1), &port) || port <= 0 ||
      port > 65535) {
    return false;
  }
  if (host == "localhost") host = "127.0.0.1";
  std::memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  out->sin_port = htons(static_cast<std::uint16_t>(port));
  return inet_pton(AF_INET, host.c_str(), &out->sin_addr) == 1;
}

void Reset(int fd) {
  linger l{1, 0};  // close() sends RST
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  shutdown(fd, SHUT_RDWR);
}

}  // namespace

ServiceProxy::~ServiceProxy() { Stop(); }

absl::Status ServiceProxy::Start(int port) {
  if (listen_fd_ >= 0) return absl::FailedPreconditionError("started");
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError("socket failed");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 256) != 0) {
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot listen on port ", port, ": ", strerror(errno)));
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  if (pipe2(wake_, O_CLOEXEC) != 0) {
    close(fd);
    return absl::UnavailableError("pipe failed");
  }
  listen_fd_ = fd;
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return absl::OkStatus();
}

std::string ServiceProxy::address() const {
  return absl::StrCat("127.0.0.1:", port_);
}

absl::Status ServiceProxy::AddEndpoint(absl::string_view host_port) {
  sockaddr_in a;
  if (!ParseHostPort(host_port, &a)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad endpoint '", host_port, "'"));
  }
  absl::MutexLock lock(&mu_);
  endpoints_.emplace_back(host_port);
  return absl::OkStatus();
}

void ServiceProxy::RemoveEndpoint(absl::string_view host_port) {
  absl::MutexLock lock(&mu_);
  endpoints_.erase(std::remove(endpoints_.begin(), endpoints_.end(), host_port),
                   endpoints_.end());
}

std::vector<std::string> ServiceProxy::endpoints() const {
  absl::MutexLock lock(&mu_);
  return endpoints_;
}

void ServiceProxy::Cut(absl::string_view host_port) {
  absl::MutexLock lock(&mu_);
  for (auto& c : conns_) {
    if (!c->done && c->endpoint == host_port) {
      Reset(c->client);
      Reset(c->backend);
    }
  }
}

void ServiceProxy::ReapLocked() {
  for (auto it = conns_.begin(); it != conns_.end();) {
    if ((*it)->done) {
      (*it)->thread.join();  // finished: returns at once
      close((*it)->client);
      close((*it)->backend);
      it = conns_.erase(it);
    } else {
      ++it;
    }
  }
}

void ServiceProxy::AcceptLoop() {
  while (true) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (p[1].revents != 0) return;
    if ((p[0].revents & POLLIN) == 0) continue;
    int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    int one = 1;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::string endpoint;
    {
      absl::MutexLock lock(&mu_);
      ReapLocked();
      if (stopping_) {
        close(client);
        return;
      }
      if (!endpoints_.empty()) {
        endpoint = endpoints_[next_++ % endpoints_.size()];
      }
    }
    sockaddr_in a;
    int backend = -1;
    if (!endpoint.empty() && ParseHostPort(endpoint, &a)) {
      backend = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (backend >= 0 &&
          connect(backend, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        close(backend);
        backend = -1;
      }
    }
    if (backend < 0) {
      Reset(client);
      close(client);
      continue;
    }
    setsockopt(backend, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    absl::MutexLock lock(&mu_);
    auto conn = std::make_unique<Conn>();
    conn->client = client;
    conn->backend = backend;
    conn->endpoint = endpoint;
    Conn* c = conn.get();
    conns_.push_back(std::move(conn));
    c->thread = std::thread([this, c] { Pump(c); });
  }
}

// Copies both ways until either side ends or fails, then resets the other
// side (HTTP/2 has no use for a half-open connection).
void ServiceProxy::Pump(Conn* c) {
  char buf[64 * 1024];
  bool open = true;
  while (open) {
    pollfd p[2] = {{c->client, POLLIN, 0}, {c->backend, POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2 && open; ++i) {
      if (p[i].revents == 0) continue;
      int from = i == 0 ? c->client : c->backend;
      int to = i == 0 ? c->backend : c->client;
      ssize_t n = read(from, buf, sizeof(buf));
      if (n <= 0) {
        open = false;
        break;
      }
      ssize_t off = 0;
      while (off < n) {
        ssize_t w =
            send(to, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
        if (w <= 0) {
          open = false;
          break;
        }
        off += w;
      }
    }
  }
  shutdown(c->client, SHUT_RDWR);
  shutdown(c->backend, SHUT_RDWR);
  absl::MutexLock lock(&mu_);
  c->done = true;
}

void ServiceProxy::Stop() {
  if (listen_fd_ < 0) return;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& c : conns_) {
      shutdown(c->client, SHUT_RDWR);
      shutdown(c->backend, SHUT_RDWR);
    }
  }
  char x = 1;
  (void)!write(wake_[1], &x, 1);
  accept_thread_.join();
  std::list<std::unique_ptr<Conn>> conns;
  {
    absl::MutexLock lock(&mu_);
    conns.swap(conns_);
  }
  for (auto& c : conns) {
    c->thread.join();
    close(c->client);
    close(c->backend);
  }
  close(listen_fd_);
  close(wake_[0]);
  close(wake_[1]);
}

}  // namespace examples
}  // namespace tether
