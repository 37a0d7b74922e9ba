// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// ledger_rollout_check: the ctest driver of the ledger example.
//
// Starts `--replicas` ledger_server processes behind a Service-like proxy,
// runs `ledger_watch --mode=tether` and `ledger_watch --mode=naive` through
// the proxy side by side, and performs a rolling restart in which every
// replica is replaced (a new one joins, the old one gets SIGTERM and leaves
// in `--shutdown` mode). Then it checks tether's JSON: zero errors, gaps,
// duplicates and bad events, and events from every phase. The naive
// client's line is printed, not checked. Exit 0 on success.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "examples/common/flag_names.h"
#include "support/fault_proxy.h"

ABSL_FLAG(std::string, server, "", "path of ledger_server");
ABSL_FLAG(std::string, watch, "", "path of ledger_watch");
ABSL_FLAG(std::string, shutdown, "graceful",
          "graceful|cancel-first|abrupt|tether");
ABSL_FLAG(int, replicas, 2, "replicas behind the proxy");
ABSL_FLAG(int, accounts, 8, "watches per client");
ABSL_FLAG(int, tick_ms, 20, "server tick");
ABSL_FLAG(int, drain_ms, 1000, "server drain time");

namespace {

struct Child {
  pid_t pid = -1;
  int out = -1;  // read end of its stdout
  std::string buffered;
};

std::vector<pid_t> g_children;

void KillAll() {
  for (pid_t p : g_children) kill(p, SIGKILL);
  for (pid_t p : g_children) waitpid(p, nullptr, 0);
  g_children.clear();
}

[[noreturn]] void Fail(const std::string& why) {
  std::fprintf(stderr, "FAIL: %s\n", why.c_str());
  KillAll();
  std::exit(1);
}

Child Spawn(const std::vector<std::string>& argv) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) Fail("pipe");
  pid_t pid = fork();
  if (pid < 0) Fail("fork");
  if (pid == 0) {
    dup2(p[1], 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(p[1]);
  g_children.push_back(pid);
  Child c;
  c.pid = pid;
  c.out = p[0];
  return c;
}

// Reads until EOF or `deadline`; returns true at EOF.
bool ReadAll(Child& c, absl::Time deadline) {
  char buf[4096];
  while (true) {
    int ms =
        static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (ms <= 0) return false;
    pollfd pf{c.out, POLLIN, 0};
    if (poll(&pf, 1, ms) <= 0) continue;
    ssize_t n = read(c.out, buf, sizeof(buf));
    if (n <= 0) return true;
    c.buffered.append(buf, static_cast<size_t>(n));
  }
}

// Waits for the server's "READY host:port" line.
std::string WaitReady(Child& c) {
  absl::Time deadline = absl::Now() + absl::Seconds(15);
  char buf[256];
  while (c.buffered.find('\n') == std::string::npos) {
    int ms =
        static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (ms <= 0) Fail("replica did not print READY within 15 s");
    pollfd pf{c.out, POLLIN, 0};
    if (poll(&pf, 1, ms) <= 0) continue;
    ssize_t n = read(c.out, buf, sizeof(buf));
    if (n <= 0) Fail("replica exited before READY");
    c.buffered.append(buf, static_cast<size_t>(n));
  }
  std::string line = c.buffered.substr(0, c.buffered.find('\n'));
  if (line.rfind("READY ", 0) != 0) Fail("unexpected line: " + line);
  return line.substr(6);
}

int WaitExit(pid_t pid, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      for (auto it = g_children.begin(); it != g_children.end(); ++it) {
        if (*it == pid) {
          g_children.erase(it);
          break;
        }
      }
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    absl::SleepFor(absl::Milliseconds(20));  // polling a child's exit
  }
  Fail(absl::StrCat("process ", pid, " did not exit within ",
                    absl::FormatDuration(timeout)));
}

double JsonNumber(const std::string& json, const std::string& key) {
  std::string k = "\"" + key + "\":";
  auto pos = json.find(k);
  if (pos == std::string::npos) Fail("JSON has no key " + key + ": " + json);
  return std::strtod(json.c_str() + pos + k.size(), nullptr);
}

std::string LastLine(const std::string& out) {
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  return lines.empty() ? "" : lines.back();
}

}  // namespace

int main(int argc, char** argv) {
  tether::examples::AcceptDashedFlags(argc, argv);
  absl::ParseCommandLine(argc, argv);
  const std::string server = absl::GetFlag(FLAGS_server);
  const std::string watch = absl::GetFlag(FLAGS_watch);
  const std::string mode = absl::GetFlag(FLAGS_shutdown);
  const int replicas = absl::GetFlag(FLAGS_replicas);
  const int accounts = absl::GetFlag(FLAGS_accounts);
  const int tick_ms = absl::GetFlag(FLAGS_tick_ms);
  const int drain_ms = absl::GetFlag(FLAGS_drain_ms);
  if (server.empty() || watch.empty() || replicas < 1) {
    std::fprintf(stderr, "need --server, --watch, --replicas >= 1\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);

  tether::support::FaultProxy proxy;
  if (!proxy.Start().ok()) Fail("proxy did not start");

  int generation = 0;
  auto start_replica = [&](int i) {
    std::string name = absl::StrCat("r", i, "-", generation++);
    Child c = Spawn({server, "--listen=127.0.0.1:0", "--replica=" + name,
                     absl::StrCat("--tick-ms=", tick_ms), "--shutdown=" + mode,
                     absl::StrCat("--drain-ms=", drain_ms)});
    std::string addr = WaitReady(c);
    if (!proxy.AddBackend(addr).ok()) Fail("bad address " + addr);
    std::printf("replica %s up at %s (pid %d)\n", name.c_str(), addr.c_str(),
                static_cast<int>(c.pid));
    return std::make_pair(c, addr);
  };

  std::vector<std::pair<Child, std::string>> live;
  for (int i = 0; i < replicas; ++i) live.push_back(start_replica(i));

  // The rollout below takes about replicas * (drain + 1.5 s); watch longer.
  const int duration_s = 3 + replicas * (drain_ms / 1000 + 3);
  auto watch_args = [&](const char* m) {
    return std::vector<std::string>{watch,
                                    "--target=" + proxy.address(),
                                    absl::StrCat("--accounts=", accounts),
                                    absl::StrCat("--duration=", duration_s),
                                    std::string("--mode=") + m,
                                    "--give-up-after=30"};
  };
  Child tw = Spawn(watch_args("tether"));
  Child nw = Spawn(watch_args("naive"));
  std::fflush(stdout);

  absl::SleepFor(absl::Seconds(2));  // let the watches run a while first
  for (int i = 0; i < replicas; ++i) {
    auto fresh = start_replica(i);
    proxy.RemoveBackend(live[i].second);
    std::printf("SIGTERM %s (%s)\n", live[i].second.c_str(), mode.c_str());
    std::fflush(stdout);
    kill(live[i].first.pid, SIGTERM);
    int rc = WaitExit(live[i].first.pid,
                      absl::Milliseconds(drain_ms) + absl::Seconds(10));
    if (rc != 0) Fail(absl::StrCat("replica exited with ", rc));
    close(live[i].first.out);
    live[i] = fresh;
    absl::SleepFor(absl::Seconds(1));  // steady state between replicas
  }

  absl::Time deadline = absl::Now() + absl::Seconds(duration_s + 20);
  if (!ReadAll(tw, deadline)) Fail("tether watch did not finish");
  if (!ReadAll(nw, deadline)) Fail("naive watch did not finish");
  int trc = WaitExit(tw.pid, absl::Seconds(10));
  int nrc = WaitExit(nw.pid, absl::Seconds(10));
  std::string tj = LastLine(tw.buffered);
  std::string nj = LastLine(nw.buffered);
  std::printf("tether (exit %d): %s\nnaive  (exit %d): %s\n", trc, tj.c_str(),
              nrc, nj.c_str());
  for (auto& r : live) {
    kill(r.first.pid, SIGTERM);
    WaitExit(r.first.pid, absl::Milliseconds(drain_ms) + absl::Seconds(10));
  }
  proxy.Stop();

  int failures = 0;
  for (const char* key : {"errors", "gaps", "duplicates", "bad_events"}) {
    if (JsonNumber(tj, key) != 0) {
      std::fprintf(stderr, "FAIL: tether %s = %g\n", key, JsonNumber(tj, key));
      ++failures;
    }
  }
  // Each watch should see most ticks: at least half of them.
  double expected = accounts * duration_s * 1000.0 / tick_ms;
  if (JsonNumber(tj, "events") < expected / 2) {
    std::fprintf(stderr, "FAIL: tether events %g < %g\n",
                 JsonNumber(tj, "events"), expected / 2);
    ++failures;
  }
  if (JsonNumber(tj, "streams") != accounts) ++failures;
  if (trc != 0) {
    std::fprintf(stderr, "FAIL: ledger_watch --mode=tether exited %d\n", trc);
    ++failures;
  }
  std::printf(
      "naive client (reported, not asserted): errors=%g reopens=%g "
      "max_stall_ms=%g\n",
      JsonNumber(nj, "errors"), JsonNumber(nj, "reopens"),
      JsonNumber(nj, "max_stall_ms"));
  if (failures != 0) {
    KillAll();
    return 1;
  }
  std::printf("PASS (%s)\n", mode.c_str());
  return 0;
}
