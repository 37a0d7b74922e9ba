// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "examples/etcd/etcd_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "support/child_process.h"

namespace tether {
namespace examples {
namespace etcd {
namespace {

bool IsExecutable(const std::string& path) {
  return !path.empty() && access(path.c_str(), X_OK) == 0;
}

std::string FindEtcd(const std::string& configured) {
  if (!configured.empty()) return configured;
  const char* env = getenv("TETHER_ETCD");
  if (env != nullptr && *env != '\0') return env;
  const char* path = getenv("PATH");
  if (path != nullptr) {
    for (absl::string_view dir : absl::StrSplit(path, ':')) {
      std::string candidate = absl::StrCat(dir, "/etcd");
      if (!dir.empty() && IsExecutable(candidate)) return candidate;
    }
  }
  return "/usr/bin/etcd";
}

// GET http://127.0.0.1:port/path; the body, or an error.
absl::StatusOr<std::string> HttpGet(int port, absl::string_view path,
                                    absl::Duration timeout) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket");
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(absl::ToInt64Seconds(timeout));
  tv.tv_usec = 0;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect to port ", port,
                                               ": ", strerror(errno)));
  }
  std::string request = absl::StrCat("GET ", path,
                                     " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("send");
  }
  std::string response;
  char buf[8192];
  while (true) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      response.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return absl::UnavailableError(absl::StrCat("recv: ", strerror(errno)));
    }
    break;
  }
  close(fd);
  std::size_t body = response.find("\r\n\r\n");
  if (!absl::StartsWith(response, "HTTP/1.") || body == std::string::npos) {
    return absl::UnavailableError("not an HTTP response");
  }
  return response.substr(body + 4);
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdCluster>> EtcdCluster::Start(
    EtcdClusterOptions options) {
  if (options.members < 1 || options.members > 7) {
    return absl::InvalidArgumentError("members must be in [1, 7]");
  }
  if (options.start_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("start_timeout must be > 0");
  }
  if (options.progress_notify_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("progress_notify_interval must be > 0");
  }
  std::unique_ptr<EtcdCluster> cluster(new EtcdCluster(options));
  cluster->binary_ = FindEtcd(options.etcd_binary);
  if (!IsExecutable(cluster->binary_)) {
    return absl::NotFoundError(absl::StrCat(
        "etcd binary not found (looked at $TETHER_ETCD, PATH, ",
        cluster->binary_,
        "); install Debian's etcd-server (the README's `bash scripts/test` "
        "does: apt-get install etcd-server etcd-client)"));
  }
  if (options.base_dir.empty()) {
    const char* tmp = getenv("TMPDIR");
    std::string templ =
        absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                     "/tether-etcd-XXXXXX");
    if (mkdtemp(templ.data()) == nullptr) {
      return absl::InternalError(
          absl::StrCat("mkdtemp ", templ, ": ", strerror(errno)));
    }
    cluster->base_dir_ = templ;
    cluster->remove_base_dir_ = true;
  } else {
    cluster->base_dir_ = options.base_dir;
    std::error_code ec;
    std::filesystem::create_directories(cluster->base_dir_, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("mkdir ", cluster->base_dir_,
                                              ": ", ec.message()));
    }
  }
  std::vector<std::string> peers;
  for (int i = 0; i < options.members; ++i) {
    absl::StatusOr<Member> m =
        cluster->NewMember(absl::StrCat("m", cluster->names_used_++));
    if (!m.ok()) return m.status();
    peers.push_back(PeerEntry(*m));
    cluster->members_.push_back(*std::move(m));
  }
  for (Member& m : cluster->members_) {
    m.initial_cluster = absl::StrJoin(peers, ",");
  }
  cluster->client_ = std::make_unique<EtcdClient>(
      cluster->client_addresses(), absl::Seconds(1));
  for (int i = 0; i < options.members; ++i) {
    absl::Status s = cluster->Spawn(i);
    if (!s.ok()) return s;
  }
  absl::Status s = cluster->WaitServing(options.start_timeout);
  if (!s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("etcd cluster did not start: ", s.message(),
                               "\n--- m0 log tail ---\n",
                               cluster->LogTail(0)));
  }
  return cluster;
}

EtcdCluster::~EtcdCluster() {
  for (Member& m : members_) (void)m.process->Stop(SIGKILL, absl::Seconds(10));
  client_.reset();
  if (remove_base_dir_ && !base_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(base_dir_, ec);
  }
}

std::string EtcdCluster::client_address(int i) const {
  return absl::StrCat("127.0.0.1:", members_[i].client_port);
}

std::vector<std::string> EtcdCluster::client_addresses() const {
  std::vector<std::string> out;
  for (int i = 0; i < size(); ++i) out.push_back(client_address(i));
  return out;
}

std::string EtcdCluster::endpoints() const {
  return absl::StrJoin(client_addresses(), ",");
}

absl::StatusOr<EtcdCluster::Member> EtcdCluster::NewMember(
    const std::string& name) {
  // Ports no member has had: a replaced member's address must be new.
  for (int tries = 0; tries < 20; ++tries) {
    absl::StatusOr<std::vector<int>> ports = support::FreeLoopbackPorts(2);
    if (!ports.ok()) return ports.status();
    if (ports_used_.count((*ports)[0]) != 0 ||
        ports_used_.count((*ports)[1]) != 0) {
      continue;
    }
    ports_used_.insert(ports->begin(), ports->end());
    Member m;
    m.name = name;
    m.client_port = (*ports)[0];
    m.peer_port = (*ports)[1];
    m.data_dir = absl::StrCat(base_dir_, "/", m.name, ".etcd");
    m.log_path = absl::StrCat(base_dir_, "/", m.name, ".log");
    return m;
  }
  return absl::ResourceExhaustedError("no new loopback ports for a member");
}

std::string EtcdCluster::PeerEntry(const Member& m) {
  return absl::StrCat(m.name, "=http://127.0.0.1:", m.peer_port);
}

absl::Status EtcdCluster::Spawn(int i) {
  Member& m = members_[i];
  if (m.process->running()) {
    return absl::FailedPreconditionError("already running");
  }
  std::string client_url = absl::StrCat("http://127.0.0.1:", m.client_port);
  std::string peer_url = absl::StrCat("http://127.0.0.1:", m.peer_port);
  std::vector<std::string> args = {
      binary_,
      "--name", m.name,
      "--data-dir", m.data_dir,
      "--listen-client-urls", client_url,
      "--advertise-client-urls", client_url,
      "--listen-peer-urls", peer_url,
      "--initial-advertise-peer-urls", peer_url,
      "--initial-cluster", m.initial_cluster,
      "--initial-cluster-state", m.initial_state,
      "--initial-cluster-token", "tether-test",
      "--logger", "zap",
      "--log-level", "warn",
      "--experimental-watch-progress-notify-interval",
      absl::StrCat(absl::ToInt64Milliseconds(
                       options_.progress_notify_interval), "ms"),
  };
  return m.process->Spawn(std::move(args), m.log_path);
}

absl::Status EtcdCluster::Stop(int i, int signal, absl::Duration timeout) {
  Member& m = members_[i];
  absl::Status s = m.process->Stop(signal, timeout);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(m.name, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status EtcdCluster::Kill(int i) { return Stop(i, SIGKILL); }

absl::Status EtcdCluster::Restart(int i) {
  absl::Status s = Spawn(i);
  if (!s.ok()) return s;
  s = WaitServing(options_.start_timeout);
  if (!s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat(members_[i].name, " restart: ",
                                     s.message(), "\n--- log tail ---\n",
                                     LogTail(i)));
  }
  return absl::OkStatus();
}

absl::Status EtcdCluster::RollingRestart() {
  for (int i = 0; i < size(); ++i) {
    absl::Status s = Stop(i);
    if (!s.ok()) return s;
    s = Restart(i);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

namespace {

// etcd refuses a membership change while members have been connected for
// less than its health interval (5 s: "unhealthy cluster", "not enough
// started members"), e.g. just after a restart. Tries `change` again until
// it is accepted, fails otherwise, or `deadline` passes.
const absl::Status& StatusOf(const absl::Status& s) { return s; }
template <class T>
const absl::Status& StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

template <class Change>
auto RetryWhileSettling(absl::Time deadline, Change change) {
  for (;;) {
    auto result = change();
    const absl::Status& s = StatusOf(result);
    const bool settling =
        absl::StrContains(s.message(), "unhealthy cluster") ||
        absl::StrContains(s.message(), "not enough started members");
    if (!settling || absl::Now() >= deadline) return result;
    absl::SleepFor(absl::Milliseconds(200));  // the health interval runs
  }
}

}  // namespace

absl::Status EtcdCluster::Replace(int i) {
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  auto listed = client_->MemberList(deadline);
  if (!listed.ok()) return listed.status();
  std::uint64_t id = 0;
  for (const etcdserverpb::Member& m : *listed) {
    if (m.name() == members_[i].name) id = m.id();
  }
  if (id == 0) {
    return absl::NotFoundError(
        absl::StrCat(members_[i].name, " is not in the member list"));
  }
  absl::Status s = RetryWhileSettling(
      deadline, [&] { return client_->MemberRemove(id, deadline); });
  // The member asked may be the one removed: it stops as it applies the
  // removal, its answer is lost, and the client asks another member, which
  // no longer knows the id. Members are only ever known from the initial
  // cluster or an add, so "not found" here means the removal is applied.
  if (absl::StrContains(s.message(), "member not found")) s = absl::OkStatus();
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("remove ", members_[i].name,
                                               ": ", s.message()));
  }
  // A removed member stops by itself; SIGTERM in case it has not yet.
  s = Stop(i);
  if (!s.ok()) return s;

  absl::StatusOr<Member> added = NewMember(absl::StrCat("m", names_used_++));
  if (!added.ok()) return added.status();
  std::vector<std::string> peers;
  for (int j = 0; j < size(); ++j) {
    if (j != i) peers.push_back(PeerEntry(members_[j]));
  }
  peers.push_back(PeerEntry(*added));
  added->initial_cluster = absl::StrJoin(peers, ",");
  added->initial_state = "existing";
  auto member = RetryWhileSettling(deadline, [&] {
    return client_->MemberAdd(
        absl::StrCat("http://127.0.0.1:", added->peer_port), deadline);
  });
  if (!member.ok()) {
    return absl::Status(member.status().code(),
                        absl::StrCat("add ", added->name, ": ",
                                     member.status().message()));
  }
  members_[i] = *std::move(added);
  client_->SetEndpoints(client_addresses());
  return Restart(i);
}

absl::Status EtcdCluster::WaitServing(absl::Duration timeout) {
  return WaitServingUntil(absl::Now() + timeout);
}

absl::Status EtcdCluster::WaitServingUntil(absl::Time deadline) {
  absl::Status last = absl::DeadlineExceededError("no check ran");
  while (true) {
    last = absl::OkStatus();
    std::set<std::uint64_t> leaders;
    for (int i = 0; i < size() && last.ok(); ++i) {
      if (!members_[i].process->running()) continue;
      if (members_[i].process->Exited()) {
        return absl::InternalError(absl::StrCat(
            members_[i].name, " exited\n--- log tail ---\n", LogTail(i)));
      }
      auto status = client_->Status(static_cast<std::size_t>(i),
                                    absl::Seconds(1));
      if (!status.ok()) {
        last = absl::UnavailableError(absl::StrCat(
            members_[i].name, " status: ", status.status().ToString()));
      } else if (status->leader() == 0) {
        last = absl::UnavailableError(
            absl::StrCat(members_[i].name, " has no leader"));
      } else {
        leaders.insert(status->leader());
      }
    }
    if (last.ok() && leaders.size() != 1) {
      last = absl::UnavailableError("members disagree on the leader");
    }
    if (last.ok()) {
      // A linearizable read goes through the leader: the cluster serves.
      absl::Duration left = deadline - absl::Now();
      auto listing = client_->List(
          "/tether-health/",
          absl::Now() + std::min(absl::Seconds(2),
                                 std::max(left, absl::Milliseconds(1))));
      if (listing.ok()) return absl::OkStatus();
      last = listing.status();
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("cluster not serving: ", last.ToString()));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::StatusOr<std::vector<int>> EtcdCluster::MembersWithWatchStreams() {
  std::vector<int> out;
  for (int i = 0; i < size(); ++i) {
    if (!members_[i].process->running()) continue;
    auto body = HttpGet(members_[i].client_port, "/metrics", absl::Seconds(2));
    if (!body.ok()) return body.status();
    bool found = false;
    for (absl::string_view line : absl::StrSplit(*body, '\n')) {
      if (!absl::ConsumePrefix(&line,
                               "etcd_debugging_mvcc_watch_stream_total ")) {
        continue;
      }
      double value = 0;
      if (!absl::SimpleAtod(line, &value)) {
        return absl::InternalError(
            absl::StrCat("bad watch-stream gauge: ", line));
      }
      found = true;
      if (value >= 1) out.push_back(i);
    }
    if (!found) {
      return absl::InternalError(
          "no etcd_debugging_mvcc_watch_stream_total in /metrics");
    }
  }
  return out;
}

absl::StatusOr<int> EtcdCluster::Leader() {
  std::map<std::uint64_t, int> by_id;
  std::uint64_t leader = 0;
  for (int i = 0; i < size(); ++i) {
    if (!members_[i].process->running()) continue;
    auto status = client_->Status(static_cast<std::size_t>(i),
                                  absl::Seconds(1));
    if (!status.ok()) continue;
    by_id[status->header().member_id()] = i;
    if (status->leader() != 0) leader = status->leader();
  }
  auto it = by_id.find(leader);
  if (it == by_id.end()) {
    return absl::UnavailableError("no running member is the leader");
  }
  return it->second;
}

std::string EtcdCluster::LogTail(int i, std::size_t bytes) const {
  std::ifstream in(members_[i].log_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string all = ss.str();
  if (all.size() > bytes) all = all.substr(all.size() - bytes);
  return all;
}

}  // namespace etcd
}  // namespace examples
}  // namespace tether
