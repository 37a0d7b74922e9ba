// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "support/fault_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tether {
namespace support {
namespace {

// How long a fault method waits for the connection threads to adopt it, and
// the longest a thread sleeps in poll() between two looks at its state.
constexpr absl::Duration kAdoptTimeout = absl::Seconds(10);
constexpr int kMaxPollMs = 1000;
// How long the proxy waits for a backend to accept its connection.
constexpr int kConnectTimeoutMs = 5000;
// Bytes queued per direction before the proxy stops reading (back-pressure).
constexpr std::size_t kMaxQueued = 4 << 20;
constexpr std::size_t kReadSize = 64 * 1024;

constexpr int kClient = 0;
constexpr int kBackend = 1;

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

absl::Status CheckBackend(absl::string_view host_port) {
  sockaddr_in addr;
  if (ParseHostPort(host_port, &addr)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("bad backend address '", host_port,
                   "'; want host:port with an IPv4 host or localhost"));
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// close() that sends a RST instead of a FIN.
void CloseWithReset(int fd) {
  if (fd < 0) return;
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  close(fd);
}

void Wake(int event_fd) {
  std::uint64_t one = 1;
  ssize_t ignored = write(event_fd, &one, sizeof(one));
  (void)ignored;
}

void DrainWake(int event_fd) {
  std::uint64_t value;
  ssize_t ignored = read(event_fd, &value, sizeof(value));
  (void)ignored;
}

// A connected, non-blocking socket to `addr`, or -1 (refused, or no answer
// within kConnectTimeoutMs).
int ConnectBounded(const sockaddr_in& addr) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) ==
      0) {
    return fd;
  }
  if (errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  pollfd p{fd, POLLOUT, 0};
  int r;
  do {
    r = poll(&p, 1, kConnectTimeoutMs);
  } while (r < 0 && errno == EINTR);
  int err = 0;
  socklen_t len = sizeof(err);
  if (r != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
      err != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int ToPollMs(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return 0;
  int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(d, absl::Milliseconds(1)));
  return static_cast<int>(std::min<int64_t>(ms, kMaxPollMs));
}

}  // namespace

// One connection pair. Fields below "guarded" are guarded by
// FaultProxy::mu_; the sockets belong to the pump thread, which closes them.
// `wake_fd` lives as long as the Conn (closed by its destructor).
struct FaultProxy::Conn {
  ~Conn() {
    if (wake_fd >= 0) close(wake_fd);
  }
  std::uint64_t id = 0;
  std::string backend;
  int fd[2] = {-1, -1};
  int wake_fd = -1;
  std::thread thread;

  // Guarded by mu_:
  bool black_holed = false;
  bool paused = false;
  absl::Duration delay = absl::ZeroDuration();
  std::int64_t drip_bytes = 0;
  absl::Duration drip_interval = absl::ZeroDuration();
  bool reset_requested = false;
  bool close_requested = false;
  bool half_close_requested[2] = {false, false};  // toward kClient/kBackend
  std::uint64_t epoch = 0;    // bumped by every fault request
  std::uint64_t adopted = 0;  // the epoch the pump thread runs under
  std::int64_t bytes_to[2] = {0, 0};
  std::int64_t bytes_dropped = 0;
  bool done = false;  // sockets closed, thread about to exit
  int waiters = 0;    // Apply calls waiting on this Conn
};

// One direction of a pair, owned by the pump thread.
struct FaultProxy::Direction {
  struct Chunk {
    std::string data;
    std::size_t offset = 0;
    absl::Time due;
  };
  int from = kClient;
  int to = kBackend;
  std::deque<Chunk> queue;
  std::size_t queued = 0;
  bool eof_read = false;   // `from` sent a FIN
  bool shut_sent = false;  // we sent a FIN to `to`
  bool dropping = false;   // half-closed by a fault: read and drop
  bool blocked = false;    // last send() hit EAGAIN: wait for POLLOUT
  std::int64_t drip_budget = 0;
  absl::Time drip_refill = absl::InfinitePast();
  std::int64_t written = 0;
  std::int64_t dropped = 0;  // read and thrown away

  void Clear() {
    queue.clear();
    queued = 0;
    blocked = false;
  }
  bool Finished() const { return eof_read && (queue.empty() || dropping); }
};

FaultProxy::FaultProxy() = default;

FaultProxy::~FaultProxy() { Stop(); }

absl::Status FaultProxy::Start(int port) {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError("port must be in [0, 65535]");
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    if (started_) return absl::FailedPreconditionError("already started");
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::UnavailableError("socket() failed");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 256) != 0) {
    int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat(
        "FaultProxy cannot listen on 127.0.0.1:", port, ": ", strerror(err)));
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    close(fd);
    return absl::UnavailableError("eventfd() failed");
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    listen_fd_ = fd;
    wake_fd_ = wake;
    port_ = ntohs(addr.sin_port);
    started_ = true;
    stopping_ = false;
  }
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return absl::OkStatus();
}

int FaultProxy::port() const {
  std::lock_guard<std::mutex> l(mu_);
  return port_;
}

std::string FaultProxy::address() const {
  return absl::StrCat("127.0.0.1:", port());
}

void FaultProxy::Stop() {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!started_ || stopping_) return;
    stopping_ = true;
    Wake(wake_fd_);
  }
  accept_thread_.join();
  Close(Select::All());
  std::list<std::unique_ptr<Conn>> conns;
  {
    // Fault calls still running on other threads finish their (bounded)
    // waits before their Conns go.
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, absl::ToChronoNanoseconds(kAdoptTimeout), [this] {
      for (const auto& c : conns_) {
        if (c->waiters > 0) return false;
      }
      return true;
    });
    conns.swap(conns_);
  }
  for (auto& c : conns) c->thread.join();
  std::lock_guard<std::mutex> l(mu_);
  close(listen_fd_);
  close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
  started_ = false;
}

// --- Routing -----------------------------------------------------------------

absl::Status FaultProxy::SetBackend(absl::string_view host_port) {
  absl::Status s = CheckBackend(host_port);
  if (!s.ok()) return s;
  std::lock_guard<std::mutex> l(mu_);
  backends_.assign(1, std::string(host_port));
  next_backend_ = 0;
  return absl::OkStatus();
}

absl::Status FaultProxy::AddBackend(absl::string_view host_port) {
  absl::Status s = CheckBackend(host_port);
  if (!s.ok()) return s;
  std::lock_guard<std::mutex> l(mu_);
  if (std::find(backends_.begin(), backends_.end(), host_port) ==
      backends_.end()) {
    backends_.emplace_back(host_port);
  }
  return absl::OkStatus();
}

void FaultProxy::RemoveBackend(absl::string_view host_port) {
  std::lock_guard<std::mutex> l(mu_);
  backends_.erase(std::remove(backends_.begin(), backends_.end(), host_port),
                  backends_.end());
}

void FaultProxy::ClearBackends() {
  std::lock_guard<std::mutex> l(mu_);
  backends_.clear();
}

std::vector<std::string> FaultProxy::backends() const {
  std::lock_guard<std::mutex> l(mu_);
  return backends_;
}

void FaultProxy::SetAdmission(Admission admission) {
  std::lock_guard<std::mutex> l(mu_);
  admission_ = admission;
  if (wake_fd_ >= 0) Wake(wake_fd_);
}

Admission FaultProxy::admission() const {
  std::lock_guard<std::mutex> l(mu_);
  return admission_;
}

void FaultProxy::AcceptLoop() {
  int listen_fd;
  int wake_fd;
  {
    std::lock_guard<std::mutex> l(mu_);
    listen_fd = listen_fd_;
    wake_fd = wake_fd_;
  }
  while (true) {
    bool hold;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stopping_) return;
      hold = admission_ == Admission::kHold;
    }
    // While holding, the listen socket is left out: handshakes queue up in
    // the kernel's backlog.
    pollfd fds[2] = {{wake_fd, POLLIN, 0}, {hold ? -1 : listen_fd, POLLIN, 0}};
    int r = poll(fds, 2, kMaxPollMs);
    if (r < 0 && errno != EINTR) return;
    if (r <= 0) continue;
    if (fds[0].revents != 0) DrainWake(wake_fd);
    if ((fds[1].revents & POLLIN) == 0) continue;
    int client;
    {
      // Admission is checked and the connection taken under one lock, so
      // once SetAdmission(kHold) returns nothing more is accepted.
      std::lock_guard<std::mutex> l(mu_);
      if (admission_ == Admission::kHold) continue;
      client = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    }
    if (client < 0) continue;
    Route(client);
  }
}

void FaultProxy::Route(int client) {
  SetNoDelay(client);
  std::string backend;
  Admission admission;
  std::list<std::unique_ptr<Conn>> reaped;
  {
    std::lock_guard<std::mutex> l(mu_);
    ++accepted_;
    admission = admission_;
    if (admission == Admission::kAccept && !backends_.empty()) {
      backend = backends_[next_backend_++ % backends_.size()];
    }
    ReapLocked(&reaped);
    cv_.notify_all();
  }
  for (auto& c : reaped) c->thread.join();

  if (admission == Admission::kReset) {
    CloseWithReset(client);
    return;
  }
  sockaddr_in addr;
  int server = -1;
  if (!backend.empty() && ParseHostPort(backend, &addr)) {
    server = ConnectBounded(addr);
  }
  if (server < 0) {
    close(client);  // kClose, no backend, or it refused.
    return;
  }
  SetNoDelay(server);
  SetNonBlocking(client);
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    close(client);
    close(server);
    return;
  }
  std::lock_guard<std::mutex> l(mu_);
  auto conn = std::make_unique<Conn>();
  Conn* c = conn.get();
  c->id = next_id_++;
  c->backend = backend;
  c->fd[kClient] = client;
  c->fd[kBackend] = server;
  c->wake_fd = wake;
  ++live_[backend];
  ++total_[backend];
  ++live_count_;
  conns_.push_back(std::move(conn));
  // `c` lives until its thread is joined (ReapLocked or Stop).
  c->thread = std::thread([this, c] { Pump(c); });
  cv_.notify_all();
}

void FaultProxy::ReapLocked(std::list<std::unique_ptr<Conn>>* done) {
  for (auto it = conns_.begin(); it != conns_.end();) {
    if ((*it)->done && (*it)->waiters == 0) {
      done->push_back(std::move(*it));
      it = conns_.erase(it);
    } else {
      ++it;
    }
  }
}

// --- The pump ----------------------------------------------------------------

void FaultProxy::Pump(Conn* c) {
  Direction dir[2];
  dir[0].from = kClient;
  dir[0].to = kBackend;
  dir[1].from = kBackend;
  dir[1].to = kClient;
  int* fd = c->fd;
  bool side_open[2] = {true, true};  // black hole: a side that ended
  std::int64_t drip_bytes = 0;
  absl::Duration drip_interval = absl::ZeroDuration();
  std::vector<char> buf(kReadSize);
  // Publishes the byte counters (mu_ held); wakes WaitForConnections.
  auto publish_locked = [&] {
    std::int64_t dropped = dir[0].dropped + dir[1].dropped;
    if (c->bytes_to[kBackend] == dir[0].written &&
        c->bytes_to[kClient] == dir[1].written && c->bytes_dropped == dropped) {
      return;
    }
    c->bytes_to[kBackend] = dir[0].written;
    c->bytes_to[kClient] = dir[1].written;
    c->bytes_dropped = dropped;
    cv_.notify_all();
  };

  enum class End { kNone, kClose, kReset };
  End end = End::kNone;
  while (end == End::kNone) {
    // 1. Adopt the current faults.
    bool black_holed, paused;
    absl::Duration delay;
    bool half_close[2];
    {
      std::lock_guard<std::mutex> l(mu_);
      publish_locked();
      black_holed = c->black_holed;
      paused = c->paused;
      delay = c->delay;
      if (c->drip_bytes != drip_bytes || c->drip_interval != drip_interval) {
        drip_bytes = c->drip_bytes;
        drip_interval = c->drip_interval;
        for (Direction& d : dir) d.drip_refill = absl::InfinitePast();
      }
      half_close[kClient] = c->half_close_requested[kClient];
      half_close[kBackend] = c->half_close_requested[kBackend];
      c->half_close_requested[kClient] = c->half_close_requested[kBackend] =
          false;
      if (c->reset_requested) {
        end = End::kReset;
      } else if (c->close_requested) {
        end = End::kClose;
      }
      if (c->adopted != c->epoch) {
        c->adopted = c->epoch;
        cv_.notify_all();
      }
    }
    if (end != End::kNone) break;
    for (Direction& d : dir) {
      if (half_close[d.to] && !d.shut_sent) {
        shutdown(fd[d.to], SHUT_WR);
        d.shut_sent = true;
        d.dropping = true;
        d.Clear();
      }
      if (black_holed) d.Clear();
    }

    // 2. Write what is due.
    absl::Time now = absl::Now();
    absl::Time wake_at = absl::InfiniteFuture();
    if (!black_holed && !paused) {
      for (Direction& d : dir) {
        if (d.dropping || d.blocked) continue;
        while (!d.queue.empty()) {
          Direction::Chunk& chunk = d.queue.front();
          if (chunk.due > now) {
            wake_at = std::min(wake_at, chunk.due);
            break;
          }
          std::size_t size = chunk.data.size() - chunk.offset;
          if (drip_bytes > 0) {
            if (now >= d.drip_refill) {
              d.drip_budget = drip_bytes;
              d.drip_refill = now + drip_interval;
            }
            if (d.drip_budget <= 0) {
              wake_at = std::min(wake_at, d.drip_refill);
              break;
            }
            size = std::min(size, static_cast<std::size_t>(d.drip_budget));
          }
          ssize_t n = send(fd[d.to], chunk.data.data() + chunk.offset, size,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
          if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
              d.blocked = true;
              break;
            }
            end = End::kReset;  // `to` is gone: reset the other side.
            break;
          }
          chunk.offset += static_cast<std::size_t>(n);
          d.queued -= static_cast<std::size_t>(n);
          d.written += n;
          if (drip_bytes > 0) d.drip_budget -= n;
          if (chunk.offset == chunk.data.size()) d.queue.pop_front();
        }
        if (end != End::kNone) break;
        if (d.eof_read && d.queue.empty() && !d.shut_sent) {
          shutdown(fd[d.to], SHUT_WR);  // Pass the half-close on.
          d.shut_sent = true;
        }
      }
    }
    if (end != End::kNone) break;
    if (black_holed) {
      if (!side_open[kClient] && !side_open[kBackend]) {
        end = End::kClose;
        break;
      }
    } else if (dir[0].Finished() && dir[1].Finished() && dir[0].shut_sent &&
               dir[1].shut_sent) {
      end = End::kClose;  // Both sides closed their halves.
      break;
    }

    // 3. Wait for bytes, room, a due time or a new fault.
    pollfd p[3] = {{c->wake_fd, POLLIN, 0}, {-1, 0, 0}, {-1, 0, 0}};
    for (int side : {kClient, kBackend}) {
      const Direction& out = dir[side == kClient ? 0 : 1];  // reads `side`
      const Direction& in = dir[side == kClient ? 1 : 0];   // writes `side`
      short events = 0;
      if (!paused && side_open[side] && !out.eof_read &&
          (black_holed || out.dropping || out.queued < kMaxQueued)) {
        events |= POLLIN;
      }
      if (!paused && !black_holed && in.blocked) events |= POLLOUT;
      if (events != 0) p[1 + side] = {fd[side], events, 0};
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      publish_locked();
    }
    int timeout = kMaxPollMs;
    if (wake_at != absl::InfiniteFuture()) {
      timeout = ToPollMs(wake_at - absl::Now());
    }
    int r = poll(p, 3, timeout);
    if (r < 0 && errno != EINTR) {
      end = End::kReset;
      break;
    }
    if (r <= 0) continue;
    if (p[0].revents != 0) DrainWake(c->wake_fd);

    // 4. Read what arrived.
    now = absl::Now();
    for (int side : {kClient, kBackend}) {
      short rev = p[1 + side].revents;
      if (rev == 0) continue;
      Direction& out = dir[side == kClient ? 0 : 1];
      Direction& in = dir[side == kClient ? 1 : 0];
      if ((rev & POLLOUT) != 0) in.blocked = false;
      if ((p[1 + side].events & POLLIN) == 0) {
        if ((rev & (POLLERR | POLLHUP)) != 0) in.blocked = false;  // retry
        continue;
      }
      if ((rev & (POLLIN | POLLERR | POLLHUP)) == 0) continue;
      ssize_t n = read(fd[side], buf.data(), buf.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n > 0) {
        if (black_holed || out.dropping) {
          out.dropped += n;  // Swallowed.
          continue;
        }
        Direction::Chunk chunk;
        chunk.data.assign(buf.data(), static_cast<std::size_t>(n));
        chunk.due = now + delay;
        out.queued += chunk.data.size();
        out.queue.push_back(std::move(chunk));
        continue;
      }
      if (n == 0) {
        out.eof_read = true;
        if (black_holed) side_open[side] = false;  // Swallowed.
        continue;
      }
      // A reset or error on `side`.
      if (black_holed) {
        side_open[side] = false;
        out.eof_read = true;
        continue;
      }
      end = End::kReset;
      break;
    }
  }

  if (end == End::kClose) {
    close(fd[kClient]);
    close(fd[kBackend]);
  } else {
    CloseWithReset(fd[kClient]);
    CloseWithReset(fd[kBackend]);
  }
  std::lock_guard<std::mutex> l(mu_);
  fd[kClient] = fd[kBackend] = -1;
  publish_locked();
  c->adopted = c->epoch;
  c->done = true;
  --live_[c->backend];
  --live_count_;
  cv_.notify_all();
}

// --- Faults ------------------------------------------------------------------

bool FaultProxy::Selected(const Select& which, const Conn& c) const {
  switch (which.kind_) {
    case Select::Kind::kAll:
      return true;
    case Select::Kind::kBackend:
      return c.backend == which.backend_;
    case Select::Kind::kId:
      return c.id == which.id_;
  }
  return false;
}

int FaultProxy::Apply(const Select& which,
                      const std::function<void(Conn*)>& change) {
  std::vector<std::pair<Conn*, std::uint64_t>> targets;
  std::unique_lock<std::mutex> l(mu_);
  for (auto& c : conns_) {
    if (c->done || !Selected(which, *c)) continue;
    change(c.get());
    ++c->epoch;
    ++c->waiters;
    targets.emplace_back(c.get(), c->epoch);
    Wake(c->wake_fd);
  }
  // `waiters` keeps the selected Conns in conns_ (ReapLocked and Stop skip
  // or wait for them) while mu_ is released inside the wait.
  cv_.wait_for(l, absl::ToChronoNanoseconds(kAdoptTimeout), [&] {
    for (auto& [c, epoch] : targets) {
      if (c->adopted < epoch) return false;
    }
    return true;
  });
  for (auto& target : targets) --target.first->waiters;
  cv_.notify_all();
  return static_cast<int>(targets.size());
}

int FaultProxy::BlackHole(const Select& which) {
  return Apply(which, [](Conn* c) { c->black_holed = true; });
}

int FaultProxy::Pause(const Select& which) {
  return Apply(which, [](Conn* c) { c->paused = true; });
}

int FaultProxy::Resume(const Select& which) {
  return Apply(which, [](Conn* c) { c->paused = false; });
}

int FaultProxy::SetDelay(const Select& which, absl::Duration delay) {
  if (delay < absl::ZeroDuration()) delay = absl::ZeroDuration();
  return Apply(which, [delay](Conn* c) { c->delay = delay; });
}

int FaultProxy::SetDrip(const Select& which, std::int64_t bytes,
                        absl::Duration interval) {
  if (bytes <= 0 || interval <= absl::ZeroDuration()) {
    bytes = 0;
    interval = absl::ZeroDuration();
  }
  return Apply(which, [bytes, interval](Conn* c) {
    c->drip_bytes = bytes;
    c->drip_interval = interval;
  });
}

int FaultProxy::Heal(const Select& which) {
  return Apply(which, [](Conn* c) {
    c->paused = false;
    c->delay = absl::ZeroDuration();
    c->drip_bytes = 0;
    c->drip_interval = absl::ZeroDuration();
  });
}

int FaultProxy::Reset(const Select& which) {
  return Apply(which, [](Conn* c) { c->reset_requested = true; });
}

int FaultProxy::Close(const Select& which) {
  return Apply(which, [](Conn* c) { c->close_requested = true; });
}

int FaultProxy::HalfClose(const Select& which, Side toward) {
  int side = toward == Side::kClient ? kClient : kBackend;
  return Apply(which,
               [side](Conn* c) { c->half_close_requested[side] = true; });
}

// --- Counters ----------------------------------------------------------------

int FaultProxy::total_accepted() const {
  std::lock_guard<std::mutex> l(mu_);
  return accepted_;
}

int FaultProxy::live_connections() const {
  std::lock_guard<std::mutex> l(mu_);
  return live_count_;
}

int FaultProxy::LiveConnectionsTo(absl::string_view backend) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = live_.find(backend);
  return it == live_.end() ? 0 : it->second;
}

int FaultProxy::TotalConnectionsTo(absl::string_view backend) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = total_.find(backend);
  return it == total_.end() ? 0 : it->second;
}

std::map<std::string, int> FaultProxy::TotalConnectionsPerBackend() const {
  std::lock_guard<std::mutex> l(mu_);
  return std::map<std::string, int>(total_.begin(), total_.end());
}

std::vector<ConnectionInfo> FaultProxy::Connections() const {
  std::lock_guard<std::mutex> l(mu_);
  return ConnectionsLocked();
}

std::vector<ConnectionInfo> FaultProxy::ConnectionsLocked() const {
  std::vector<ConnectionInfo> out;
  for (const auto& c : conns_) {
    if (c->done) continue;
    ConnectionInfo info;
    info.id = c->id;
    info.backend = c->backend;
    info.black_holed = c->black_holed;
    info.paused = c->paused;
    info.delay = c->delay;
    info.drip_bytes = c->drip_bytes;
    info.drip_interval = c->drip_interval;
    info.bytes_to_backend = c->bytes_to[kBackend];
    info.bytes_to_client = c->bytes_to[kClient];
    info.bytes_dropped = c->bytes_dropped;
    out.push_back(std::move(info));
  }
  return out;
}

bool FaultProxy::WaitUntil(absl::Duration timeout,
                           const std::function<bool()>& pred) {
  std::unique_lock<std::mutex> l(mu_);
  return cv_.wait_for(l, absl::ToChronoNanoseconds(timeout), pred);
}

bool FaultProxy::WaitForAccepted(int n, absl::Duration timeout) {
  return WaitUntil(timeout, [this, n]() { return accepted_ >= n; });
}

bool FaultProxy::WaitForTotalConnectionsTo(absl::string_view backend, int n,
                                           absl::Duration timeout) {
  return WaitUntil(timeout, [this, backend, n]() {
    auto it = total_.find(backend);
    return it != total_.end() && it->second >= n;
  });
}

bool FaultProxy::WaitForLiveConnectionsTo(absl::string_view backend, int n,
                                          absl::Duration timeout) {
  return WaitUntil(timeout, [this, backend, n]() {
    auto it = live_.find(backend);
    return (it == live_.end() ? 0 : it->second) == n;
  });
}

bool FaultProxy::WaitForLiveConnections(int n, absl::Duration timeout) {
  return WaitUntil(timeout, [this, n]() { return live_count_ == n; });
}

bool FaultProxy::WaitForConnections(
    const std::function<bool(const std::vector<ConnectionInfo>&)>& pred,
    absl::Duration timeout) {
  return WaitUntil(timeout,
                   [this, &pred]() { return pred(ConnectionsLocked()); });
}

}  // namespace support
}  // namespace tether
