// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// A drain behind an L7 proxy (Debian's nginx and HAProxy, each forwarding
// gRPC over h2 to two servers on 127.0.0.1): the server's GOAWAY stops at
// the proxy, so the client sees no drain. With no drain notice (or a
// client that does not act on it), what the streams on the leaving server
// go through is printed: how their calls end, how tether classifies those
// ends, what the breaker records, the longest stall, and whether a reopen
// lands on the leaving server. The figures the drain notice is measured
// against once the client acts on it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "test/integration/server/feed_clients.h"
#include "test/integration/server/feed_server.h"
#include "tether/circuit_breaker.h"
#include "tether/classification.h"
#include "tether/connection_pool.h"
#include "tether/server/drain_controller.h"

namespace tether {
namespace testsupport {
namespace {

using feed::Clients;
using feed::Kind;
using feed::kWait;
using feed::Log;
using feed::PoolLog;
using ::tether::server::DrainReport;

// A port nothing listens on now (the OS's pick, released at once).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// One proxy process, its config and logs in a temporary directory; killed
// and reaped by the destructor.
class Proxy {
 public:
  // `kind`: "nginx" or "haproxy". Forwards 127.0.0.1:port() to `backends`.
  Proxy(const std::string& kind, const std::vector<int>& backends)
      : kind_(kind), port_(FreePort()) {
    char tmpl[] = "/tmp/tether-proxy-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::vector<std::string> argv;
    if (kind == "nginx") {
      std::string servers;
      for (int b : backends) {
        servers += absl::StrCat("    server 127.0.0.1:", b, ";\n");
      }
      WriteFile(
          "nginx.conf",
          absl::StrCat("daemon off;\nmaster_process off;\nworker_processes 1;\n"
                       "pid ",
                       dir_, "/nginx.pid;\nerror_log ", dir_,
                       "/error.log warn;\nevents { worker_connections 1024; }\n"
                       "http {\n  access_log off;\n"
                       "  client_body_temp_path ",
                       dir_,
                       "/body;\n"
                       "  proxy_temp_path ",
                       dir_,
                       "/proxy;\n"
                       "  fastcgi_temp_path ",
                       dir_,
                       "/fastcgi;\n"
                       "  uwsgi_temp_path ",
                       dir_,
                       "/uwsgi;\n"
                       "  scgi_temp_path ",
                       dir_,
                       "/scgi;\n"
                       "  upstream backends {\n",
                       servers,
                       "    keepalive 16;\n  }\n"
                       "  server {\n    listen 127.0.0.1:",
                       port_,
                       " http2;\n"
                       "    location / {\n"
                       "      grpc_pass grpc://backends;\n"
                       "      grpc_read_timeout 1h;\n"
                       "      grpc_send_timeout 1h;\n"
                       "      client_body_timeout 1h;\n"
                       "    }\n  }\n}\n"));
      argv = {"/usr/sbin/nginx",
              "-p",
              dir_,
              "-e",
              absl::StrCat(dir_, "/error.log"),
              "-c",
              absl::StrCat(dir_, "/nginx.conf")};
    } else {
      std::string servers;
      for (std::size_t i = 0; i < backends.size(); ++i) {
        servers += absl::StrCat("  server s", i, " 127.0.0.1:", backends[i],
                                " proto h2 check inter 1s\n");
      }
      WriteFile("haproxy.cfg",
                absl::StrCat("global\n  maxconn 1000\n"
                             "defaults\n  mode http\n  timeout connect 5s\n"
                             "  timeout client 1h\n  timeout server 1h\n"
                             "frontend fe\n  bind 127.0.0.1:",
                             port_,
                             " proto h2\n  default_backend be\n"
                             "backend be\n  balance roundrobin\n"
                             // A refused connect is retried on the other
                             // server, as nginx's grpc_next_upstream does
                             // by default.
                             "  retries 3\n  option redispatch 1\n"
                             "  retry-on conn-failure\n",
                             servers));
      argv = {"/usr/sbin/haproxy", "-db", "-f",
              absl::StrCat(dir_, "/haproxy.cfg")};
    }
    pid_ = fork();
    if (pid_ == 0) {
      const std::string log = absl::StrCat(dir_, "/stdout.log");
      FILE* out = std::freopen(log.c_str(), "w", stdout);
      FILE* err = std::freopen(log.c_str(), "a", stderr);
      (void)out;
      (void)err;
      std::vector<char*> args;
      for (std::string& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~Proxy() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::string rm = absl::StrCat("rm -rf ", dir_);
    if (std::system(rm.c_str()) != 0) {
      std::fprintf(stderr, "could not remove %s\n", dir_.c_str());
    }
  }

  // Waits until the proxy accepts connections (or exited).
  bool WaitListening() {
    const absl::Time until = absl::Now() + kWait;
    while (absl::Now() < until) {
      if (AcceptsConnections(port_)) return true;
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      // Polling a port: there is no event to wait on.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  std::string log() const {
    std::ifstream in(absl::StrCat(dir_, "/stdout.log"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  void WriteFile(const std::string& name, const std::string& text) {
    std::ofstream(absl::StrCat(dir_, "/", name)) << text;
  }

  const std::string kind_;
  const int port_;
  std::string dir_;
  pid_t pid_ = -1;
};

// `registered`: the handlers register with the drain (no notice sent; they
// end when told, `goaway_grace` after the GOAWAY); else gRPC alone cuts
// them at the deadline.
void DrainBehind(const std::string& kind, const std::string& binary,
                 bool registered) {
  if (access(binary.c_str(), X_OK) != 0) {
    GTEST_SKIP() << binary << " is not installed";
  }
  FeedServerOptions ao;
  ao.name = "a";
  ao.send_notice = false;
  ao.register_calls = registered;
  ao.drain.unready_window = absl::Milliseconds(200);
  ao.drain.notice_grace = absl::Milliseconds(200);
  ao.drain.goaway_grace = absl::Milliseconds(300);
  ao.drain.drain_deadline = absl::Seconds(1);
  ao.drain.log_sink = std::make_shared<QuietSink>();
  FeedServer a(ao);
  FeedServerOptions bo;
  bo.name = "b";
  FeedServer b(bo);
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  Proxy proxy(kind, {a.port(), b.port()});
  ASSERT_TRUE(proxy.WaitListening()) << proxy.log();

  auto log = std::make_shared<Log>();
  ConnectionPoolOptions po;
  po.target = proxy.address();
  po.observer = std::make_shared<PoolLog>(log);
  auto pool = ConnectionPool::Create(po);
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto breaker = CircuitBreaker::Create(CircuitBreakerOptions{});
  ASSERT_TRUE(breaker.ok()) << breaker.status();
  ReconnectingStreamOptions so;
  so.breaker = *breaker;
  constexpr int kStreams = 8;
  Clients clients(*pool, log, Kind::kWatch, kStreams, so);
  ASSERT_TRUE(clients.fleet().WaitEvents(3)) << proxy.log();

  // The proxy spread the streams over both servers.
  std::vector<int> on_a;
  for (int i = 0; i < kStreams; ++i) {
    if (clients.fleet().Get()[i].last_server == "a") on_a.push_back(i);
  }
  ASSERT_FALSE(on_a.empty()) << "the proxy sent no stream to a";
  const BreakerCounts before = (*breaker)->counts();

  const absl::Time begin = absl::Now();
  clients.fleet().MarkStallsFrom(begin);
  ASSERT_TRUE(a.drain().Begin());
  absl::optional<DrainReport> report =
      a.drain().WaitFor(server::HardBound(ao.drain) + kWait);
  ASSERT_TRUE(report.has_value());
  // Every stream delivers from b afterwards.
  ASSERT_TRUE(clients.fleet().WaitMoreFrom("b", 3)) << proxy.log();
  const BreakerCounts after = (*breaker)->counts();

  std::map<std::string, int> ends;  // "<code> <message> -> <class>"
  int cut = 0;
  for (const Log::Attempt& at : log->Attempts()) {
    if (at.by_client || at.ended == absl::InfiniteFuture()) continue;
    ++cut;
    ++ends[absl::StrCat(absl::StatusCodeToString(at.status.code()), " \"",
                        at.status.message(), "\" (", EndClassName(at.end_class),
                        ", ", absl::FormatDuration(at.ended - begin), ")")];
  }
  absl::Duration max_stall = absl::ZeroDuration();
  int bad = 0;
  for (int i : on_a) {
    const auto d = clients.fleet().Get()[i];
    max_stall = std::max(max_stall, d.max_gap);
    bad += d.bad;
    EXPECT_FALSE(d.done) << d.status;
  }
  EXPECT_EQ(bad, 0);
  std::vector<std::string> end_lines;
  for (const auto& [what, n] : ends) {
    end_lines.push_back(absl::StrCat(n, " x ", what));
  }
  std::printf(
      "behind %s, %s: %zu of %d streams on the leaving server; "
      "%d attempts ended by the server: %s; breaker +%llu failures +%llu "
      "ignored +%llu successes; max stall of a moved stream %s; calls opened "
      "on the leaving server after Begin(): %d; drain %s\n",
      kind.c_str(),
      registered ? "no drain notice, handlers told to end"
                 : "gRPC alone (cancel at the deadline)",
      on_a.size(), kStreams, cut,
      end_lines.empty() ? "none" : absl::StrJoin(end_lines, "; ").c_str(),
      static_cast<unsigned long long>(after.failed - before.failed),
      static_cast<unsigned long long>(after.ignored - before.ignored),
      static_cast<unsigned long long>(after.successful - before.successful),
      absl::FormatDuration(max_stall).c_str(), a.CallsStartedSince(begin),
      DrainReportToString(*report).c_str());
}

TEST(ProxyDrainTest, BehindNginxWithoutNotice) {
  DrainBehind("nginx", "/usr/sbin/nginx", /*registered=*/true);
}

TEST(ProxyDrainTest, BehindHaproxyWithoutNotice) {
  DrainBehind("haproxy", "/usr/sbin/haproxy", /*registered=*/true);
}

TEST(ProxyDrainTest, BehindNginxGrpcAlone) {
  DrainBehind("nginx", "/usr/sbin/nginx", /*registered=*/false);
}

TEST(ProxyDrainTest, BehindHaproxyGrpcAlone) {
  DrainBehind("haproxy", "/usr/sbin/haproxy", /*registered=*/false);
}

}  // namespace
}  // namespace testsupport
}  // namespace tether
