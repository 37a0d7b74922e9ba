// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_SUPPORT_DNS_SERVER_H_
#define TETHER_SUPPORT_DNS_SERVER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "support/child_process.h"

namespace tether {
namespace support {

// A real DNS server on loopback for tests, benchmarks and the demo: Debian's
// dnsmasq, run as a child process (no daemon) on 127.0.0.1 and a free port,
// answering only from a hosts file its owner rewrites, for names under
// `.test` (others: REFUSED; unknown `.test` names: NXDOMAIN). Like a cluster
// DNS serving a headless Service: one A record per pod.
//
// Thread safety: none; one owner (a test body, a bench, the demo).
//
//   auto dns = DnsServer::Start();
//   ASSERT_TRUE(dns.ok()) << dns.status();
//   ASSERT_TRUE((*dns)->SetRecords({{"svc.test", {"127.0.0.11"}}}).ok());
//   target = absl::StrCat("dns://", (*dns)->address(), "/svc.test:5000");
class DnsServer {
 public:
  // Starts dnsmasq (`binary`, default /usr/sbin/dnsmasq) with no records,
  // records served with a TTL of `ttl`, and waits until it answers.
  // UNAVAILABLE when dnsmasq is missing or does not come up.
  static absl::StatusOr<std::unique_ptr<DnsServer>> Start(
      absl::Duration ttl = absl::ZeroDuration(),
      std::string binary = "/usr/sbin/dnsmasq");
  // Stops dnsmasq (SIGTERM, then SIGKILL) and removes its files.
  ~DnsServer();

  // Replaces every record (name -> IPv4/IPv6 addresses; a name with none
  // gets NXDOMAIN), reloads dnsmasq (SIGHUP) and returns once it answers
  // with the new records.
  absl::Status SetRecords(
      std::map<std::string, std::vector<std::string>> records);
  // Stops the server (a DNS server that is down); `Restart` brings it back
  // with the same port and records.
  absl::Status Stop();
  absl::Status Restart();

  // "127.0.0.1:<port>", as a `dns://` target's authority takes it.
  std::string address() const;
  int port() const { return port_; }

 private:
  DnsServer() = default;
  absl::Status Spawn();
  // Waits until a lookup of every name gives its records.
  absl::Status WaitServing(absl::Duration timeout);

  std::string binary_;
  std::string dir_;
  std::string hosts_path_;
  absl::Duration ttl_;
  int port_ = 0;
  std::map<std::string, std::vector<std::string>> records_;
  ChildProcess process_;
};

}  // namespace support
}  // namespace tether

#endif  // TETHER_SUPPORT_DNS_SERVER_H_
