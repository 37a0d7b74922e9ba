// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Child processes for tests and examples (a DNS server, etcd members), and
// free loopback ports to give them.
#ifndef TETHER_SUPPORT_CHILD_PROCESS_H_
#define TETHER_SUPPORT_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tether {
namespace support {

// Reserves `n` distinct loopback ports free for both TCP and UDP right now
// (bound together, then released: another process could still take one
// before the child binds it, which fails the child's start loudly).
absl::StatusOr<std::vector<int>> FreeLoopbackPorts(int n);

// A TCP connection to 127.0.0.1:`port`: its socket (the caller closes it),
// or -1 when refused.
int ConnectLoopback(int port);
// True when something accepts a TCP connection on 127.0.0.1:`port`.
bool AcceptsConnections(int port);

// One child process, started by `Spawn` with stdout and stderr appended to
// a log file, stdin from /dev/null. It is killed (SIGKILL) if the thread
// that spawned it dies, and by the destructor if still running.
//
// Thread safety: none; one owner.
class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Runs `argv` (argv[0] an absolute path). FAILED_PRECONDITION if running.
  absl::Status Spawn(std::vector<std::string> argv,
                     const std::string& log_path);
  // Sends `signal` (no wait). Nothing if not running.
  void Signal(int signal);
  // Sends `signal` and waits up to `timeout` for the exit; kills it then
  // (DEADLINE_EXCEEDED). OK when not running.
  absl::Status Stop(int signal, absl::Duration timeout);
  // Whether it has exited by now (reaps it).
  bool Exited();
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

}  // namespace support
}  // namespace tether

#endif  // TETHER_SUPPORT_CHILD_PROCESS_H_
