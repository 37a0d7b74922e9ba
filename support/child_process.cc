// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "support/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tether {
namespace support {

absl::StatusOr<std::vector<int>> FreeLoopbackPorts(int n) {
  std::vector<int> fds;
  std::vector<int> ports;
  absl::Status status;
  for (int i = 0; i < n && status.ok(); ++i) {
    // A TCP port the OS picks, then the same port for UDP.
    int port = 0;
    for (int type : {SOCK_STREAM, SOCK_DGRAM}) {
      const int fd = socket(AF_INET, type, 0);
      if (fd < 0) {
        status = absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
        break;
      }
      fds.push_back(fd);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<std::uint16_t>(port));
      socklen_t len = sizeof(addr);
      if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
          getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        status = absl::InternalError(
            absl::StrCat("bind port ", port, ": ", strerror(errno)));
        break;
      }
      port = ntohs(addr.sin_port);
    }
    if (status.ok()) ports.push_back(port);
  }
  for (int fd : fds) close(fd);
  if (!status.ok()) return status;
  return ports;
}

int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool AcceptsConnections(int port) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return false;
  close(fd);
  return true;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) (void)Stop(SIGKILL, absl::Seconds(10));
}

absl::Status ChildProcess::Spawn(std::vector<std::string> argv,
                                 const std::string& log_path) {
  if (pid_ > 0) return absl::FailedPreconditionError("child already running");
  // Everything the child needs is prepared before fork (only async-signal-
  // safe calls after it).
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const int log_fd =
      open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::InternalError(
        absl::StrCat("open ", log_path, ": ", strerror(errno)));
  }
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    if (devnull >= 0) close(devnull);
    return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    execv(args[0], args.data());
    _exit(127);
  }
  close(log_fd);
  if (devnull >= 0) close(devnull);
  pid_ = pid;
  return absl::OkStatus();
}

void ChildProcess::Signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

bool ChildProcess::Exited() {
  if (pid_ <= 0) return true;
  int st = 0;
  const pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_ || (r < 0 && errno == ECHILD)) {
    pid_ = -1;
    return true;
  }
  return false;
}

absl::Status ChildProcess::Stop(int signal, absl::Duration timeout) {
  if (pid_ <= 0) return absl::OkStatus();
  kill(pid_, signal);
  const absl::Time deadline = absl::Now() + timeout;
  while (!Exited()) {
    if (absl::Now() >= deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
      return absl::DeadlineExceededError(absl::StrCat(
          "child did not exit within ", absl::FormatDuration(timeout),
          " of signal ", signal, "; killed"));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return absl::OkStatus();
}

}  // namespace support
}  // namespace tether
