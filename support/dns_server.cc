// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "support/dns_server.h"

#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "connections/dns_lookup.h"

namespace tether {
namespace support {

absl::StatusOr<std::unique_ptr<DnsServer>> DnsServer::Start(
    absl::Duration ttl, std::string binary) {
  if (access(binary.c_str(), X_OK) != 0) {
    return absl::UnavailableError(absl::StrCat(
        binary, " not found: install dnsmasq-base (scripts/lib.sh lists it)"));
  }
  std::unique_ptr<DnsServer> server(new DnsServer());
  server->binary_ = std::move(binary);
  server->ttl_ = ttl;
  char dir[] = "/tmp/tether-dns-XXXXXX";
  if (mkdtemp(dir) == nullptr) return absl::InternalError("mkdtemp");
  server->dir_ = dir;
  // dnsmasq drops privileges to its --user and rereads the file as that
  // user on SIGHUP.
  chmod(dir, 0755);
  server->hosts_path_ = absl::StrCat(dir, "/hosts");
  std::ofstream(server->hosts_path_).flush();
  absl::StatusOr<std::vector<int>> ports = FreeLoopbackPorts(1);
  if (!ports.ok()) return ports.status();
  server->port_ = (*ports)[0];
  absl::Status s = server->Spawn();
  if (!s.ok()) return s;
  return server;
}

DnsServer::~DnsServer() {
  (void)process_.Stop(SIGTERM, absl::Seconds(10));
  if (!hosts_path_.empty()) unlink(hosts_path_.c_str());
  const std::string log = absl::StrCat(dir_, "/dnsmasq.log");
  unlink(log.c_str());
  if (!dir_.empty()) rmdir(dir_.c_str());
}

std::string DnsServer::address() const {
  return absl::StrCat("127.0.0.1:", port_);
}

absl::Status DnsServer::Spawn() {
  const passwd* pw = getpwuid(getuid());
  std::vector<std::string> argv = {
      binary_,
      "--no-daemon",
      "--conf-file=/dev/null",
      absl::StrCat("--port=", port_),
      "--listen-address=127.0.0.1",
      "--bind-interfaces",
      "--no-resolv",
      "--no-hosts",
      "--no-negcache",
      absl::StrCat("--addn-hosts=", hosts_path_),
      "--local=/test/",
      "--pid-file=",
      absl::StrCat("--local-ttl=", absl::ToInt64Seconds(ttl_)),
      "--log-facility=-",
  };
  if (pw != nullptr) argv.push_back(absl::StrCat("--user=", pw->pw_name));
  absl::Status s =
      process_.Spawn(std::move(argv), absl::StrCat(dir_, "/dnsmasq.log"));
  if (!s.ok()) return s;
  return WaitServing(absl::Seconds(20));
}

absl::Status DnsServer::WaitServing(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  // A name that is never in the file: NXDOMAIN once dnsmasq is up.
  std::map<std::string, std::vector<std::string>> want = records_;
  want.emplace("tether-probe.test", std::vector<std::string>());
  for (;;) {
    if (process_.Exited()) {
      return absl::UnavailableError(
          absl::StrCat("dnsmasq exited; see ", dir_, "/dnsmasq.log"));
    }
    bool all = true;
    for (const auto& [name, ips] : want) {
      auto answer =
          internal::LookUpHost(name, address(), absl::Milliseconds(500));
      std::set<std::string> got;
      if (answer.ok()) {
        got.insert(answer->ipv4.begin(), answer->ipv4.end());
        got.insert(answer->ipv6.begin(), answer->ipv6.end());
      } else if (answer.status().code() != absl::StatusCode::kNotFound) {
        all = false;  // not up yet
        break;
      }
      if (got != std::set<std::string>(ips.begin(), ips.end())) {
        all = false;
        break;
      }
    }
    if (all) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "dnsmasq did not serve the records within ",
          absl::FormatDuration(timeout), "; see ", dir_, "/dnsmasq.log"));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

absl::Status DnsServer::SetRecords(
    std::map<std::string, std::vector<std::string>> records) {
  const std::string tmp = absl::StrCat(hosts_path_, ".new");
  {
    std::ofstream out(tmp);
    for (const auto& [name, ips] : records) {
      for (const std::string& ip : ips) out << ip << " " << name << "\n";
    }
    if (!out) return absl::InternalError(absl::StrCat("write ", tmp));
  }
  if (rename(tmp.c_str(), hosts_path_.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("rename to ", hosts_path_));
  }
  records_ = std::move(records);
  if (!process_.running()) return absl::OkStatus();
  process_.Signal(SIGHUP);
  return WaitServing(absl::Seconds(20));
}

absl::Status DnsServer::Stop() {
  return process_.Stop(SIGTERM, absl::Seconds(10));
}

absl::Status DnsServer::Restart() {
  if (process_.running()) return absl::OkStatus();
  return Spawn();
}

}  // namespace support
}  // namespace tether
