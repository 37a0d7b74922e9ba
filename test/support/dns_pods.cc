// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "test/support/dns_pods.h"

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tether {
namespace testsupport {

absl::StatusOr<std::unique_ptr<DnsPods>> DnsPods::Start() {
  auto dns = support::DnsServer::Start();
  if (!dns.ok()) return dns.status();
  std::unique_ptr<DnsPods> pods(new DnsPods());
  pods->dns_ = *std::move(dns);
  return pods;
}

TestServer* DnsPods::StartPod(int i) {
  if (i < 1 || i > 240) {
    std::fprintf(stderr, "DnsPods: pod %d is not in [1, 240]\n", i);
    return nullptr;
  }
  TestServerOptions o;
  o.name = absl::StrCat("p", i);
  o.host = Ip(i);
  o.port = port_;
  auto pod = std::make_unique<TestServer>(o);
  const absl::Status started = pod->Start();
  if (!started.ok()) {
    std::fprintf(stderr, "DnsPods: pod %d: %s\n", i,
                 started.ToString().c_str());
    return nullptr;
  }
  port_ = pod->port();
  pods_[i] = std::move(pod);
  return pods_[i].get();
}

TestServer* DnsPods::pod(int i) const {
  auto it = pods_.find(i);
  return it == pods_.end() ? nullptr : it->second.get();
}

void DnsPods::StopPod(int i, Stop how, absl::Duration window) {
  TestServer* p = pod(i);
  if (p == nullptr) return;
  if (how == Stop::kGraceful) {
    p->ShutdownAsync(window);
  } else {
    p->CancelFirstDrain(window);
  }
}

absl::Status DnsPods::Publish(const std::vector<int>& pods) {
  std::vector<std::string> ips;
  for (int i : pods) ips.push_back(Ip(i));
  return dns_->SetRecords({{"svc.test", ips}});
}

std::string DnsPods::Ip(int i) { return absl::StrCat("127.0.0.", 10 + i); }

std::string DnsPods::Endpoint(int i) const {
  return absl::StrCat("ipv4:", Ip(i), ":", port_);
}

std::string DnsPods::Target() const {
  return absl::StrCat("dns://", dns_->address(), "/svc.test:", port_);
}

std::int64_t DnsPods::WatchesStarted() const {
  std::int64_t n = 0;
  for (const auto& [i, p] : pods_) n += p->stats().watches_started;
  return n;
}

std::int64_t DnsPods::FailedBeforeFirst() const {
  std::int64_t n = 0;
  for (const auto& [i, p] : pods_) n += p->stats().watches_failed_before_first;
  return n;
}

}  // namespace testsupport
}  // namespace tether
