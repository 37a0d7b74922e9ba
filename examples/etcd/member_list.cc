// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "examples/etcd/member_list.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "tether/resolved_endpoints.h"

namespace tether {
namespace examples {
namespace etcd {

namespace {

// Answers `first` inside Start, then whatever `then` answers.
class FirstThen final : public EndpointSource {
 public:
  FirstThen(std::vector<Endpoint> first, std::shared_ptr<EndpointSource> then)
      : first_(std::move(first)), then_(std::move(then)) {}

  void Start(std::shared_ptr<Sink> sink) override {
    sink->OnEndpoints(first_);
    then_->Start(std::move(sink));  // its answers come after the first
  }
  void Refresh() override { then_->Refresh(); }
  void Stop() override { then_->Stop(); }

 private:
  const std::vector<Endpoint> first_;
  const std::shared_ptr<EndpointSource> then_;
};

}  // namespace

std::vector<std::string> ClientEndpoints(
    const std::vector<etcdserverpb::Member>& members) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const etcdserverpb::Member& m : members) {
    if (m.name().empty() || m.islearner()) continue;
    for (const std::string& url : m.clienturls()) {
      absl::string_view rest = url;
      if (!absl::ConsumePrefix(&rest, "http://")) continue;
      // "host:port" (an etcd client URL may end in "/").
      absl::ConsumeSuffix(&rest, "/");
      if (rest.empty() || rest.find('/') != absl::string_view::npos) continue;
      if (seen.insert(std::string(rest)).second) out.emplace_back(rest);
    }
  }
  return out;
}

absl::StatusOr<std::shared_ptr<EndpointSource>> MemberListEndpoints(
    std::shared_ptr<EtcdClient> client, absl::Duration interval) {
  if (client == nullptr) {
    return absl::InvalidArgumentError(
        "MemberListEndpoints client must not be null");
  }
  if (interval < absl::Milliseconds(500) || interval > absl::Hours(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("MemberListEndpoints interval must be in [500ms, 1h], "
                     "got ",
                     absl::FormatDuration(interval)));
  }
  ResolverOptions options;
  options.resolve_interval = interval;
  options.min_resolve_interval = absl::Milliseconds(500);
  std::vector<Endpoint> first;
  for (const std::string& a : client->endpoints()) first.push_back({a, ""});
  auto polled = PolledEndpoints(
      [client = std::move(client)](absl::Duration timeout)
          -> absl::StatusOr<std::vector<Endpoint>> {
        auto members = client->MemberList(absl::Now() + timeout);
        if (!members.ok()) return members.status();
        std::vector<std::string> addresses = ClientEndpoints(*members);
        client->SetEndpoints(addresses);  // an empty list is ignored
        std::vector<Endpoint> endpoints;
        for (std::string& a : addresses) endpoints.push_back({std::move(a), ""});
        return endpoints;
      },
      std::move(options));
  if (!polled.ok()) return polled.status();
  return std::shared_ptr<EndpointSource>(
      std::make_shared<FirstThen>(std::move(first), *std::move(polled)));
}

}  // namespace etcd
}  // namespace examples
}  // namespace tether
