// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_TEST_SUPPORT_DNS_PODS_H_
#define TETHER_TEST_SUPPORT_DNS_PODS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "support/dns_server.h"
#include "test/support/test_server.h"

namespace tether {
namespace testsupport {

// The pods of a Kubernetes headless Service, on loopback: replicas
// (`TestServer`s named "p<i>") on 127.0.0.(10 + i), all on one port like
// pods' own IPs, and a DNS server (`DnsServer`) whose name `svc.test` lists
// the pods published. Shared by the endpoint tests and the DNS rollout
// bench, so that both run the same rolling update.
//
// Thread safety: none; one owner. The pods themselves are thread-safe.
//
//   auto pods = DnsPods::Start();
//   ASSERT_TRUE(pods.ok()) << pods.status();
//   ASSERT_NE((*pods)->StartPod(1), nullptr);
//   ASSERT_TRUE((*pods)->Publish({1}).ok());
//   target = (*pods)->Target();  // dns://127.0.0.1:<dns>/svc.test:<port>
class DnsPods {
 public:
  // How a pod stops: gracefully (GOAWAY, then `window` of grace), or
  // cancel-first (its streams end before its GOAWAY and new ones are
  // refused for `window`).
  enum class Stop { kGraceful, kCancelFirst };

  // Starts the DNS server, with no record and no pod.
  static absl::StatusOr<std::unique_ptr<DnsPods>> Start();

  // Starts pod `i` (in [1, 240]) on 127.0.0.(10 + i) and the pods' port
  // (the OS picks it for the first pod). Null on failure (the reason on
  // stderr).
  TestServer* StartPod(int i);
  // Pod `i`, or null if never started.
  TestServer* pod(int i) const;
  // Stops pod `i` as `how` says; returns at once (see
  // `TestServer::WaitForStopped`).
  void StopPod(int i, Stop how, absl::Duration window = absl::Seconds(2));

  // The DNS name lists exactly `pods` (returns once the server answers so).
  absl::Status Publish(const std::vector<int>& pods);

  static std::string Ip(int i);
  // "ipv4:127.0.0.(10 + i):<port>", as the pool names the endpoint.
  std::string Endpoint(int i) const;
  // The name, asking this DNS server: "dns://127.0.0.1:<dns>/svc.test:<port>".
  std::string Target() const;
  int port() const { return port_; }
  support::DnsServer& dns() { return *dns_; }

  // Over every pod ever started: Watch calls that reached it, and those it
  // refused or ended before their first message.
  std::int64_t WatchesStarted() const;
  std::int64_t FailedBeforeFirst() const;

 private:
  DnsPods() = default;

  std::unique_ptr<support::DnsServer> dns_;
  std::map<int, std::unique_ptr<TestServer>> pods_;
  int port_ = 0;
};

}  // namespace testsupport
}  // namespace tether

#endif  // TETHER_TEST_SUPPORT_DNS_PODS_H_
