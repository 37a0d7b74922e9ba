// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// etcd_side_by_side: etcd's own Go client (`etcdctl watch --prefix`, Debian's
// etcd-client, clientv3) and tether's `etcd_watch` watch the same prefix of
// the same 3-member etcd cluster while a writer puts N new keys and the
// cluster goes through faults, in the order given by --faults:
//
//   restart  every member in turn: SIGTERM, restart (--rounds times)
//   kill     every member in turn: kill -9, --down_ms later restart
//   replace  member 0 removed from the cluster (Cluster.MemberRemove) and a
//            new member with new ports added in its place
//   quorum   members 1 and 2 killed (-9) together: no leader, no writes;
//            --down_ms later both restart
//
// Both clients run as child processes whose output this program reads
// through pipes and timestamps on arrival, so both are measured the same way.
//
// For each client: events (the writer's puts seen), lost (acknowledged puts
// never seen), duplicates, p50/p99 of put acknowledged -> event delivered,
// the longest stall between two delivered events, and per fault (from it to
// the next) the longest stall that began then and the longest latency of the
// puts acknowledged then. The last stdout line is one JSON object.
//
//   etcd_side_by_side [--keys=1000] [--interval_ms=5] [--faults=restart]
//                     [--rounds=1] [--down_ms=1000] [--member_sync_ms=5000]
//                     [--etcdctl=etcdctl] [--etcd_watch=PATH]
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "examples/etcd/etcd_client.h"
#include "examples/etcd/etcd_cluster.h"
#include "examples/etcd/etcd_writer.h"
#include "support/figures.h"

ABSL_FLAG(int, keys, 1000, "keys the writer puts, [1, 1e6]");
ABSL_FLAG(int, interval_ms, 5, "pause between puts, [0, 10000] ms");
ABSL_FLAG(int, rounds, 1, "rolling restarts of the cluster, [0, 100]");
ABSL_FLAG(std::string, faults, "restart",
          "comma-separated faults in order: restart, kill, replace");
ABSL_FLAG(int, down_ms, 1000,
          "kill: how long a killed member stays down, [0, 60000] ms");
ABSL_FLAG(int, member_sync_ms, 5000,
          "etcd_watch's --member-sync-ms (0: the endpoints stay as given)");
ABSL_FLAG(std::string, etcdctl, "etcdctl", "etcd's CLI (Go clientv3)");
ABSL_FLAG(std::string, etcd_watch, TETHER_ETCD_WATCH_BINARY,
          "tether's etcd_watch");

namespace etcd = ::tether::examples::etcd;

namespace {

// A child process whose stdout is read line by line, each line timestamped.
class Child {
 public:
  ~Child() { Stop(SIGKILL); }

  // `stderr_path`: where the child's stderr goes.
  bool Start(std::vector<std::string> args,
             const std::vector<std::string>& env,
             const std::string& stderr_path) {
    int fds[2];
    if (pipe(fds) != 0) return false;
    int err_fd = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err_fd < 0) return false;
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_copy = env;
    pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      dup2(fds[1], 1);
      dup2(err_fd, 2);
      close(fds[0]);
      close(fds[1]);
      for (std::string& e : env_copy) putenv(e.data());
      execvp(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    close(err_fd);
    fd_ = fds[0];
    reader_ = std::thread([this] { Read(); });
    return true;
  }

  // Signals the child, waits for it and for the end of its output.
  void Stop(int sig) {
    if (pid_ > 0) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        exited_early_ = true;
      } else {
        kill(pid_, sig);
        waitpid(pid_, nullptr, 0);
      }
      pid_ = -1;
    }
    if (reader_.joinable()) reader_.join();
    if (fd_ >= 0) {
      close(fd_);
      fd_ = -1;
    }
  }

  // The child had exited by itself before Stop.
  bool exited_early() const { return exited_early_; }

  std::vector<std::pair<absl::Time, std::string>> lines() {
    absl::MutexLock lock(&mu_);
    return lines_;
  }
  // Waits until a line equal to (or, with `suffix`, ending in) `text`.
  bool WaitForLine(const std::string& text, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const auto& l : lines_) {
        if (absl::EndsWith(l.second, text)) return true;
      }
      return eof_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&seen), timeout);
    for (const auto& l : lines_) {
      if (absl::EndsWith(l.second, text)) return true;
    }
    return false;
  }

 private:
  void Read() {
    std::string partial;
    char buf[4096];
    while (true) {
      ssize_t n = read(fd_, buf, sizeof(buf));
      if (n <= 0) break;
      absl::Time now = absl::Now();
      partial.append(buf, static_cast<std::size_t>(n));
      std::size_t pos;
      absl::MutexLock lock(&mu_);
      while ((pos = partial.find('\n')) != std::string::npos) {
        lines_.emplace_back(now, partial.substr(0, pos));
        partial.erase(0, pos + 1);
      }
    }
    absl::MutexLock lock(&mu_);
    eof_ = true;
  }

  pid_t pid_ = -1;
  bool exited_early_ = false;
  int fd_ = -1;
  std::thread reader_;
  absl::Mutex mu_;
  std::vector<std::pair<absl::Time, std::string>> lines_ ABSL_GUARDED_BY(mu_);
  bool eof_ ABSL_GUARDED_BY(mu_) = false;
};

struct Delivered {
  std::string key;
  absl::Time at;
};

// etcdctl watch prints each event as three lines: type, key, value.
std::vector<Delivered> ParseEtcdctl(
    const std::vector<std::pair<absl::Time, std::string>>& lines) {
  std::vector<Delivered> out;
  for (std::size_t i = 0; i + 2 < lines.size();) {
    if (lines[i].second == "PUT" || lines[i].second == "DELETE") {
      out.push_back(Delivered{lines[i + 1].second, lines[i + 2].first});
      i += 3;
    } else {
      ++i;
    }
  }
  return out;
}

// etcd_watch --events-out=/dev/stdout: "<rev> <PUT|DELETE> <key>".
std::vector<Delivered> ParseEtcdWatch(
    const std::vector<std::pair<absl::Time, std::string>>& lines,
    std::string* json) {
  std::vector<Delivered> out;
  for (const auto& [at, line] : lines) {
    if (absl::StartsWith(line, "{")) {
      *json = line;
      continue;
    }
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(' ', 2));
    if (parts.size() == 3) out.push_back(Delivered{parts[2], at});
  }
  return out;
}

// One fault of the run: its name ("kill m1") and when it began.
struct Fault {
  std::string name;
  absl::Time at;
};

struct Figures {
  std::string name;
  int events = 0;
  int lost = 0;
  int duplicates = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  double max_stall_ms = 0;
  // Per fault: the longest stall that began after it and before the next
  // one, and the longest put-acknowledged -> delivered latency of the puts
  // acknowledged in that time.
  std::vector<double> fault_stall_ms;
  std::vector<double> fault_max_ms;
};

// The fault in effect at `t` (the last one begun before it), or -1.
int FaultAt(const std::vector<Fault>& faults, absl::Time t) {
  for (std::size_t i = faults.size(); i-- > 0;) {
    if (faults[i].at <= t) return static_cast<int>(i);
  }
  return -1;
}

using tether::support::Percentile;

Figures Measure(const std::string& name, const std::vector<Delivered>& got,
                const std::vector<etcd::WrittenKey>& written,
                const std::vector<Fault>& faults) {
  Figures f;
  f.name = name;
  f.fault_stall_ms.assign(faults.size(), 0);
  f.fault_max_ms.assign(faults.size(), 0);
  std::map<std::string, absl::Time> acked;
  for (const auto& w : written) acked[w.key] = w.acked;
  std::map<std::string, int> times;
  std::vector<double> latency;
  absl::Time prev = absl::InfinitePast();
  for (const Delivered& d : got) {
    auto it = acked.find(d.key);
    if (it == acked.end()) continue;  // warm-up keys
    ++f.events;
    if (++times[d.key] > 1) {
      ++f.duplicates;
      continue;
    }
    latency.push_back(absl::ToDoubleMilliseconds(d.at - it->second));
    const int acked_in = FaultAt(faults, it->second);
    if (acked_in >= 0) {
      f.fault_max_ms[acked_in] =
          std::max(f.fault_max_ms[acked_in], latency.back());
    }
    if (prev != absl::InfinitePast()) {
      const double stall = absl::ToDoubleMilliseconds(d.at - prev);
      f.max_stall_ms = std::max(f.max_stall_ms, stall);
      const int began_in = FaultAt(faults, prev);
      if (began_in >= 0) {
        f.fault_stall_ms[began_in] =
            std::max(f.fault_stall_ms[began_in], stall);
      }
    }
    prev = d.at;
  }
  for (const auto& w : written) {
    if (times.count(w.key) == 0) ++f.lost;
  }
  f.p50_ms = Percentile(latency, 0.50);
  f.p99_ms = Percentile(latency, 0.99);
  f.max_ms = Percentile(latency, 1.0);
  return f;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "etcd_side_by_side: %s\n", message.c_str());
  std::printf("{\"error\":\"%s\"}\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int keys = absl::GetFlag(FLAGS_keys);
  const int interval_ms = absl::GetFlag(FLAGS_interval_ms);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  if (keys < 1 || keys > 1000000) return Fail("--keys must be in [1, 1e6]");
  if (interval_ms < 0 || interval_ms > 10000) {
    return Fail("--interval_ms must be in [0, 10000]");
  }
  if (rounds < 0 || rounds > 100) return Fail("--rounds must be in [0, 100]");
  const int down_ms = absl::GetFlag(FLAGS_down_ms);
  if (down_ms < 0 || down_ms > 60000) {
    return Fail("--down_ms must be in [0, 60000]");
  }
  std::vector<std::string> fault_kinds =
      absl::StrSplit(absl::GetFlag(FLAGS_faults), ',', absl::SkipEmpty());
  for (const std::string& kind : fault_kinds) {
    if (kind != "restart" && kind != "kill" && kind != "replace" &&
        kind != "quorum") {
      return Fail("--faults must list restart, kill, replace or quorum; got " +
                  kind);
    }
  }

  etcd::EtcdClusterOptions cluster_options;
  cluster_options.progress_notify_interval = absl::Seconds(1);
  auto cluster = etcd::EtcdCluster::Start(cluster_options);
  if (!cluster.ok()) return Fail(cluster.status().ToString());
  etcd::EtcdCluster& c = **cluster;
  etcd::EtcdClient client(c.client_addresses());
  const std::string prefix = "/side-by-side/";

  char dir_template[] = "/tmp/etcd-side-by-side-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return Fail("mkdtemp");
  const std::string work_dir = dir_template;
  Child etcdctl;
  Child tether_watch;
  if (!etcdctl.Start({absl::GetFlag(FLAGS_etcdctl),
                      "--endpoints=" + c.endpoints(), "watch", "--prefix",
                      prefix},
                     {"ETCDCTL_API=3"}, work_dir + "/etcdctl.stderr")) {
    return Fail("cannot start etcdctl");
  }
  if (!tether_watch.Start({absl::GetFlag(FLAGS_etcd_watch),
                           "--endpoints=" + c.endpoints(),
                           "--prefix=" + prefix, "--duration=3600",
                           "--stall-timeout-ms=3000",
                           absl::StrCat("--member-sync-ms=",
                                        absl::GetFlag(FLAGS_member_sync_ms)),
                           "--events-out=/dev/stdout", "--log"},
                          {}, work_dir + "/etcd_watch.stderr")) {
    return Fail("cannot start etcd_watch");
  }
  // Both watching: a warm-up key reaches both (put again until it does).
  bool up = false;
  for (int i = 0; i < 60 && !up; ++i) {
    std::string key = absl::StrCat(prefix, "warmup-", i);
    if (!client.Put(key, "w", absl::Now() + absl::Seconds(10)).ok()) continue;
    up = etcdctl.WaitForLine(key, absl::Milliseconds(500)) &&
         tether_watch.WaitForLine(key, absl::Milliseconds(500));
  }
  if (!up) return Fail("the watchers did not start");

  etcd::EtcdWriter writer(&client, prefix, keys,
                          absl::Milliseconds(interval_ms));
  writer.Start();
  writer.WaitForWritten(std::min(keys, 50), absl::Seconds(30));
  absl::Time faults_start = absl::Now();
  std::vector<Fault> faults;
  // Each fault on stdout with the time and the members' roles (to set beside
  // etcd_watch's log).
  auto announce = [&c](const std::string& name) {
    absl::StatusOr<int> leader = c.Leader();
    auto watched = c.MembersWithWatchStreams();
    std::printf("%s %s (leader: member %s; watch streams on members %s)\n",
                absl::FormatTime("%H:%M:%E3S", absl::Now(),
                                 absl::UTCTimeZone()).c_str(),
                name.c_str(),
                leader.ok() ? absl::StrCat(*leader).c_str() : "none",
                watched.ok() ? absl::StrJoin(*watched, ",").c_str() : "?");
    std::fflush(stdout);
    return Fault{name, absl::Now()};
  };
  for (const std::string& kind : fault_kinds) {
    absl::Status s;
    if (kind == "replace") {
      faults.push_back(announce("replace member 0 (new ports)"));
      s = c.Replace(0);
    }
    if (kind == "quorum") {
      faults.push_back(announce("kill -9 members 1 and 2"));
      s = c.Kill(1);
      if (s.ok()) s = c.Kill(2);
      absl::SleepFor(absl::Milliseconds(down_ms));  // no leader meanwhile
      if (s.ok()) s = c.Restart(1);
      if (s.ok()) s = c.Restart(2);
    }
    for (int r = 0; kind == "restart" && r < rounds && s.ok(); ++r) {
      for (int i = 0; i < c.size() && s.ok(); ++i) {
        faults.push_back(announce(absl::StrCat("restart member ", i)));
        s = c.Stop(i);
        if (s.ok()) s = c.Restart(i);
      }
    }
    for (int i = 0; kind == "kill" && i < c.size() && s.ok(); ++i) {
      faults.push_back(announce(absl::StrCat("kill -9 member ", i)));
      s = c.Kill(i);
      absl::SleepFor(absl::Milliseconds(down_ms));  // the member stays down
      if (s.ok()) s = c.Restart(i);
    }
    if (!s.ok()) return Fail(kind + ": " + s.ToString());
  }
  absl::Duration restart_time = absl::Now() - faults_start;
  const bool writer_outlasted_faults = !writer.WaitForWritten(keys, absl::ZeroDuration());
  absl::Status written_ok = writer.Join();
  if (!written_ok.ok()) return Fail("writer: " + written_ok.ToString());
  std::vector<etcd::WrittenKey> written = writer.written();
  const std::string last_key = written.back().key;
  // Up to 30 s for the last put to reach each client.
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  etcdctl.WaitForLine(last_key, deadline - absl::Now());
  tether_watch.WaitForLine(last_key, deadline - absl::Now());
  etcdctl.Stop(SIGTERM);
  tether_watch.Stop(SIGTERM);

  std::string json;
  Figures go = Measure("etcdctl (Go clientv3)", ParseEtcdctl(etcdctl.lines()),
                       written, faults);
  Figures tw = Measure("etcd_watch (tether)",
                       ParseEtcdWatch(tether_watch.lines(), &json), written,
                       faults);

  std::printf("etcd 3.4 cluster of 3, %d keys put every %d ms, faults %s "
              "(%.1f s)\n",
              keys, interval_ms, absl::GetFlag(FLAGS_faults).c_str(),
              absl::ToDoubleSeconds(restart_time));
  if (!writer_outlasted_faults) {
    std::printf("warning: the writer finished before the last fault did; "
                "raise --keys\n");
  }
  // Per fault: the longest gap between events (it includes the writer's
  // own pause while the cluster has no leader), and the longest put ->
  // event latency (what the client adds).
  std::printf("%-30s %21s %21s\n", "per fault", "max stall (ms)",
              "max latency (ms)");
  std::printf("%-30s %10s %10s %10s %10s\n", "", "etcdctl", "etcd_watch",
              "etcdctl", "etcd_watch");
  for (std::size_t i = 0; i < faults.size(); ++i) {
    std::printf("%-30s %10.0f %10.0f %10.1f %10.1f\n",
                faults[i].name.c_str(), go.fault_stall_ms[i],
                tw.fault_stall_ms[i], go.fault_max_ms[i], tw.fault_max_ms[i]);
  }
  std::printf("%-24s %7s %5s %5s %9s %9s %9s %11s\n", "client", "events",
              "lost", "dups", "p50 ms", "p99 ms", "max ms", "max stall");
  for (const Figures& f : {go, tw}) {
    std::printf("%-24s %7d %5d %5d %9.1f %9.1f %9.1f %8.0f ms\n",
                f.name.c_str(), f.events, f.lost, f.duplicates, f.p50_ms,
                f.p99_ms, f.max_ms, f.max_stall_ms);
  }
  if (!json.empty()) std::printf("etcd_watch summary: %s\n", json.c_str());
  for (auto* child : {&etcdctl, &tether_watch}) {
    if (child->exited_early()) {
      std::printf("%s exited by itself before the end\n",
                  child == &etcdctl ? "etcdctl" : "etcd_watch");
    }
  }
  std::printf("stderr of both: %s/\n", work_dir.c_str());
  auto obj = [&faults](const Figures& f) {
    tether::support::JsonLine o;
    tether::support::JsonLine stall, latency;
    for (std::size_t i = 0; i < faults.size(); ++i) {
      stall.Set(faults[i].name, f.fault_stall_ms[i]);
      latency.Set(faults[i].name, f.fault_max_ms[i]);
    }
    o.Set("max_stall_ms_per_fault", stall);
    o.Set("max_ms_per_fault", latency);
    o.Set("events", f.events);
    o.Set("lost", f.lost);
    o.Set("duplicates", f.duplicates);
    o.Set("p50_ms", f.p50_ms);
    o.Set("p99_ms", f.p99_ms);
    o.Set("max_ms", f.max_ms);
    o.Set("max_stall_ms", f.max_stall_ms);
    return o;
  };
  tether::support::JsonLine json_line;
  json_line.Set("keys", keys);
  json_line.Set("rounds", rounds);
  json_line.Set("faults", absl::GetFlag(FLAGS_faults));
  json_line.Set("etcdctl", obj(go));
  json_line.Set("etcd_watch", obj(tw));
  json_line.Print();
  return 0;
}
