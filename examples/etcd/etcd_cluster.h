// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// A real etcd cluster on loopback for tests and benchmarks: N members of the
// `etcd` binary (Debian's etcd-server), each in its own temporary data
// directory on free ports, started, stopped, killed and restarted by PID.
#ifndef TETHER_EXAMPLES_ETCD_ETCD_CLUSTER_H_
#define TETHER_EXAMPLES_ETCD_ETCD_CLUSTER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "examples/etcd/etcd_client.h"
#include "support/child_process.h"

namespace tether {
namespace examples {
namespace etcd {

struct EtcdClusterOptions {
  // Members. Default 3; [1, 7].
  int members = 3;
  // The etcd binary. Default empty: $TETHER_ETCD, else `etcd` on PATH, else
  // /usr/bin/etcd. Missing: `Start` fails with NOT_FOUND saying how to
  // install it.
  std::string etcd_binary;
  // How long `Start` and `Restart` wait for the cluster to serve (a leader,
  // every running member answering). Default 30 s; > 0.
  absl::Duration start_timeout = absl::Seconds(30);
  // etcd's --experimental-watch-progress-notify-interval: how often a watch
  // created with progress_notify hears the current revision. Default 1 s.
  absl::Duration progress_notify_interval = absl::Seconds(1);
  // Where the data directories and logs go. Default empty: a new directory
  // under $TMPDIR (else /tmp), removed by the destructor.
  std::string base_dir;
};

// A running etcd cluster.
//
// Every member process is started with fork/exec and a parent-death signal
// (SIGKILL), so none outlives the test process even when it crashes; the
// destructor kills the running ones by PID, reaps them and removes the
// temporary directory. Each member logs to <base_dir>/mN.log.
//
// Not thread-safe: drive it from one thread (clients of the cluster may run
// on any).
//
// Example:
//   auto cluster = EtcdCluster::Start(EtcdClusterOptions());
//   ASSERT_TRUE(cluster.ok()) << cluster.status();
//   EtcdClient client((*cluster)->client_addresses());
//   ASSERT_TRUE((*cluster)->Stop(0).ok());      // SIGTERM, waits for exit
//   ASSERT_TRUE((*cluster)->Restart(0).ok());   // same data, waits to serve
class EtcdCluster {
 public:
  static absl::StatusOr<std::unique_ptr<EtcdCluster>> Start(
      EtcdClusterOptions options);
  ~EtcdCluster();

  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  int size() const { return static_cast<int>(members_.size()); }
  // "127.0.0.1:<client port>" of member `i`, and of all of them.
  std::string client_address(int i) const;
  std::vector<std::string> client_addresses() const;
  // The addresses joined by commas (for --endpoints).
  std::string endpoints() const;
  bool running(int i) const { return members_[i].process->running(); }
  pid_t pid(int i) const { return members_[i].process->pid(); }

  // Sends `signal` (default SIGTERM) to member `i` and waits up to `timeout`
  // for it to exit (then SIGKILL). OK if it was not running.
  absl::Status Stop(int i, int signal = 15,
                    absl::Duration timeout = absl::Seconds(15));
  // kill -9, reaped.
  absl::Status Kill(int i);
  // Starts member `i` again on its data directory and ports, then waits
  // until the cluster serves with it (see WaitServing).
  absl::Status Restart(int i);
  // Waits until there is a leader and every running member answers a
  // linearizable read, up to `timeout`.
  absl::Status WaitServing(absl::Duration timeout);
  // Rolling restart: for each member in turn, Stop (SIGTERM) and Restart.
  absl::Status RollingRestart();
  // Replaces member `i` by a new one on new ports with an empty data
  // directory, as etcd's runtime reconfiguration does: removes it from the
  // cluster (Cluster.MemberRemove; it then stops), adds the new member
  // (Cluster.MemberAdd), starts it (--initial-cluster-state existing) and
  // waits until the cluster serves with it. Index `i` then names the new
  // member (a new name, `client_address(i)` a new port).
  absl::Status Replace(int i);

  // Reads etcd's watch-stream gauge on each running member's /metrics (the
  // client port also speaks HTTP/1.1) and returns the members that hold at
  // least one watch stream.
  absl::StatusOr<std::vector<int>> MembersWithWatchStreams();

  // The member that is the leader now (by Maintenance.Status of the running
  // members); UNAVAILABLE when none answers with a leader among them.
  absl::StatusOr<int> Leader();

  // The last `bytes` of member `i`'s log (for failure messages).
  std::string LogTail(int i, std::size_t bytes = 2000) const;

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    // --initial-cluster and --initial-cluster-state of its first start.
    std::string initial_cluster;
    std::string initial_state = "new";
    std::string data_dir;
    std::string log_path;
    std::unique_ptr<support::ChildProcess> process =
        std::make_unique<support::ChildProcess>();
  };

  explicit EtcdCluster(EtcdClusterOptions options)
      : options_(std::move(options)) {}
  absl::Status Spawn(int i);
  // A member named `name` on two new free ports.
  absl::StatusOr<Member> NewMember(const std::string& name);
  // "name=http://127.0.0.1:peer_port" of member `m`.
  static std::string PeerEntry(const Member& m);
  absl::Status WaitServingUntil(absl::Time deadline);

  EtcdClusterOptions options_;
  std::string binary_;
  std::string base_dir_;
  bool remove_base_dir_ = false;
  std::vector<Member> members_;
  int names_used_ = 0;  // members ever created (the next is m<names_used_>)
  std::set<int> ports_used_;  // by any member ever created
  std::unique_ptr<EtcdClient> client_;  // one endpoint per member
};

}  // namespace etcd
}  // namespace examples
}  // namespace tether

#endif  // TETHER_EXAMPLES_ETCD_ETCD_CLUSTER_H_
