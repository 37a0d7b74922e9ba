// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// etcd_side_by_side: etcd's own Go client (`etcdctl watch --prefix`, Debian's
// etcd-client, clientv3) and tether's `etcd_watch` watch the same prefix of
// the same 3-member etcd cluster while a writer puts N new keys and every
// member is restarted in turn (SIGTERM, restart). Both run as child
// processes whose output this program reads through pipes and timestamps on
// arrival, so both are measured the same way.
//
// For each client: events (the writer's puts seen), lost (acknowledged puts
// never seen), duplicates, p50/p99 of put acknowledged -> event delivered,
// the longest stall between two delivered events. The last stdout line is
// one JSON object.
//
//   etcd_side_by_side [--keys=1000] [--interval_ms=5] [--rounds=1]
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

struct Figures {
  std::string name;
  int events = 0;
  int lost = 0;
  int duplicates = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  double max_stall_ms = 0;
};

using tether::support::Percentile;

Figures Measure(const std::string& name, const std::vector<Delivered>& got,
                const std::vector<etcd::WrittenKey>& written) {
  Figures f;
  f.name = name;
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
    if (prev != absl::InfinitePast()) {
      f.max_stall_ms =
          std::max(f.max_stall_ms, absl::ToDoubleMilliseconds(d.at - prev));
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
                           "--events-out=/dev/stdout"},
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
  absl::Time restart_start = absl::Now();
  for (int r = 0; r < rounds; ++r) {
    absl::Status s = c.RollingRestart();
    if (!s.ok()) return Fail("rolling restart: " + s.ToString());
  }
  absl::Duration restart_time = absl::Now() - restart_start;
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
                       written);
  Figures tw = Measure("etcd_watch (tether)",
                       ParseEtcdWatch(tether_watch.lines(), &json), written);

  std::printf("etcd 3.4 cluster of 3, %d keys put every %d ms, %d rolling "
              "restart(s) of every member (%.1f s)\n",
              keys, interval_ms, rounds,
              absl::ToDoubleSeconds(restart_time));
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
  auto obj = [](const Figures& f) {
    tether::support::JsonLine o;
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
  json_line.Set("etcdctl", obj(go));
  json_line.Set("etcd_watch", obj(tw));
  json_line.Print();
  return 0;
}
