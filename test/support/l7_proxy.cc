// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "test/support/l7_proxy.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tether {
namespace testsupport {
namespace {

const char* Binary(L7Proxy::Kind kind) {
  return kind == L7Proxy::Kind::kNginx ? "/usr/sbin/nginx"
                                       : "/usr/sbin/haproxy";
}

std::string NginxConfig(const std::string& dir, int port,
                        const std::vector<int>& backends,
                        const std::string& timeout,
                        const L7Proxy::Settings& settings) {
  std::string servers;
  for (int b : backends) {
    absl::StrAppend(&servers, "    server 127.0.0.1:", b, ";\n");
  }
  std::string temp_paths;
  for (const char* what : {"client_body", "proxy", "fastcgi", "uwsgi",
                           "scgi"}) {
    absl::StrAppend(&temp_paths, "  ", what, "_temp_path ", dir, "/", what,
                    ";\n");
  }
  const std::string quota =
      settings.keepalive_requests > 0
          ? absl::StrCat("  keepalive_requests ", settings.keepalive_requests,
                         ";\n")
          : "";
  return absl::StrCat(
      "daemon off;\nmaster_process ", settings.reloadable ? "on" : "off",
      ";\nworker_processes 1;\n",
      settings.reloadable ? "worker_shutdown_timeout 10s;\n" : "", "pid ",
      dir, "/nginx.pid;\nerror_log ", dir,
      "/error.log warn;\nevents { worker_connections 1024; }\n"
      "http {\n  access_log off;\n",
      quota, temp_paths, "  upstream backends {\n", servers,
      "    keepalive 16;\n  }\n"
      "  server {\n    listen 127.0.0.1:",
      port,
      " http2;\n"
      "    location / {\n"
      "      grpc_pass grpc://backends;\n"
      "      grpc_read_timeout ",
      timeout, ";\n      grpc_send_timeout ", timeout,
      ";\n      client_body_timeout ", timeout, ";\n    }\n  }\n}\n");
}

std::string HaproxyConfig(int port, const std::vector<int>& backends,
                          const std::string& timeout) {
  std::string servers;
  for (std::size_t i = 0; i < backends.size(); ++i) {
    absl::StrAppend(&servers, "  server s", i, " 127.0.0.1:", backends[i],
                    " proto h2 check inter 1s\n");
  }
  return absl::StrCat(
      "global\n  maxconn 1000\n"
      "defaults\n  mode http\n  timeout connect 5s\n"
      "  timeout client ",
      timeout, "\n  timeout server ", timeout,
      "\n"
      "frontend fe\n  bind 127.0.0.1:",
      port,
      " proto h2\n  default_backend be\n"
      "backend be\n  balance roundrobin\n"
      // A refused connect is retried on the other server, as nginx's
      // grpc_next_upstream does by default.
      "  retries 3\n  option redispatch 1\n"
      "  retry-on conn-failure\n",
      servers);
}

}  // namespace

bool L7Proxy::Installed(Kind kind) { return access(Binary(kind), X_OK) == 0; }

const char* L7Proxy::Name(Kind kind) {
  return kind == Kind::kNginx ? "nginx" : "haproxy";
}

absl::StatusOr<std::unique_ptr<L7Proxy>> L7Proxy::Start(
    Kind kind, const std::vector<int>& backends, const Settings& settings) {
  if (!Installed(kind)) {
    return absl::UnavailableError(
        absl::StrCat(Binary(kind), " is not installed"));
  }
  std::unique_ptr<L7Proxy> proxy(new L7Proxy());
  char dir[] = "/tmp/tether-proxy-XXXXXX";
  if (mkdtemp(dir) == nullptr) return absl::InternalError("mkdtemp");
  proxy->dir_ = dir;
  // A master's workers run as nobody: they must reach the temp paths.
  if (chmod(dir, 0755) != 0) return absl::InternalError("chmod");
  proxy->reloadable_ = settings.reloadable && kind == Kind::kNginx;
  absl::StatusOr<std::vector<int>> ports = support::FreeLoopbackPorts(1);
  if (!ports.ok()) return ports.status();
  proxy->port_ = (*ports)[0];
  const std::string timeout =
      absl::StrCat(absl::ToInt64Milliseconds(settings.timeouts), "ms");
  std::vector<std::string> argv;
  if (kind == Kind::kNginx) {
    const std::string conf = absl::StrCat(proxy->dir_, "/nginx.conf");
    std::ofstream(conf) << NginxConfig(proxy->dir_, proxy->port_, backends,
                                       timeout, settings);
    argv = {Binary(kind), "-p", proxy->dir_, "-e",
            absl::StrCat(proxy->dir_, "/error.log"), "-c", conf};
  } else {
    const std::string conf = absl::StrCat(proxy->dir_, "/haproxy.cfg");
    std::ofstream(conf) << HaproxyConfig(proxy->port_, backends, timeout);
    argv = {Binary(kind), "-db", "-f", conf};
  }
  absl::Status s = proxy->process_.Spawn(
      std::move(argv), absl::StrCat(proxy->dir_, "/stdout.log"));
  if (!s.ok()) return s;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!support::AcceptsConnections(proxy->port_)) {
    if (proxy->process_.Exited() || absl::Now() >= deadline) {
      return absl::UnavailableError(absl::StrCat(
          Name(kind), " did not come up on ", proxy->address(), ": ",
          proxy->log()));
    }
    // Polling a port: there is no event to wait on.
    absl::SleepFor(absl::Milliseconds(20));
  }
  return proxy;
}

absl::Status L7Proxy::Reload() {
  if (!reloadable_) {
    return absl::FailedPreconditionError("the proxy was not started reloadable");
  }
  process_.Signal(SIGHUP);
  return absl::OkStatus();
}

L7Proxy::~L7Proxy() {
  // A master stops its workers on SIGTERM; killed, it would leave them
  // running.
  (void)process_.Stop(reloadable_ ? SIGTERM : SIGKILL, absl::Seconds(10));
  const std::string rm = absl::StrCat("rm -rf ", dir_);
  if (!dir_.empty() && std::system(rm.c_str()) != 0) {
    std::fprintf(stderr, "could not remove %s\n", dir_.c_str());
  }
}

std::string L7Proxy::address() const {
  return absl::StrCat("127.0.0.1:", port_);
}

std::string L7Proxy::log() const {
  std::ifstream in(absl::StrCat(dir_, "/stdout.log"));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace testsupport
}  // namespace tether
