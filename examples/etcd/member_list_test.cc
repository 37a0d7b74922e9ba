// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The member list's endpoints, without a cluster. Label: unit.
#include "examples/etcd/member_list.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether {
namespace examples {
namespace etcd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

etcdserverpb::Member MakeMember(const std::string& name,
                                std::vector<std::string> urls,
                                bool learner = false) {
  etcdserverpb::Member m;
  m.set_name(name);
  for (const std::string& u : urls) m.add_clienturls(u);
  m.set_islearner(learner);
  return m;
}

TEST(ClientEndpointsTest, StartedVotingMembersPlainHttpOnly) {
  std::vector<etcdserverpb::Member> members = {
      MakeMember("m0", {"http://127.0.0.1:2379"}),
      // Added but not started yet: no name, no client URLs.
      MakeMember("", {}),
      MakeMember("m2", {"http://127.0.0.1:22379/", "https://10.0.0.2:2379",
                        "unix://etcd.sock"}),
      MakeMember("learner", {"http://127.0.0.1:32379"}, true),
      // The same URL twice (two members behind one proxy) counts once.
      MakeMember("m4", {"http://127.0.0.1:2379"}),
      MakeMember("m5", {"http://", "http://h:1/path"}),
  };
  EXPECT_THAT(ClientEndpoints(members),
              ElementsAre("127.0.0.1:2379", "127.0.0.1:22379"));
  EXPECT_THAT(ClientEndpoints({}), IsEmpty());
}

// Records what a source answers.
class Record final : public EndpointSource::Sink {
 public:
  void OnEndpoints(std::vector<Endpoint> endpoints) override {
    std::vector<std::string> a;
    for (Endpoint& e : endpoints) a.push_back(std::move(e.address));
    answers.push_back(std::move(a));
  }
  void OnEndpointsError(const absl::Status&) override {}
  std::vector<std::vector<std::string>> answers;
};

TEST(MemberListEndpointsTest, AnswersTheGivenEndpointsInsideStart) {
  // Nothing listens on port 1: the member-list calls fail, and the first
  // answer (the endpoints given) stays.
  auto client = std::make_shared<EtcdClient>(
      std::vector<std::string>{"127.0.0.1:1", "127.0.0.1:2"},
      absl::Milliseconds(50));
  auto source = MemberListEndpoints(client, absl::Seconds(5));
  ASSERT_TRUE(source.ok()) << source.status();
  auto sink = std::make_shared<Record>();
  (*source)->Start(sink);
  ASSERT_EQ(sink->answers.size(), 1u);  // before Start returned
  EXPECT_THAT(sink->answers[0], ElementsAre("127.0.0.1:1", "127.0.0.1:2"));
  (*source)->Stop();
}

TEST(MemberListEndpointsTest, IntervalExtremes) {
  auto client = std::make_shared<EtcdClient>(
      std::vector<std::string>{"127.0.0.1:1"});
  for (absl::Duration bad :
       {absl::ZeroDuration(), absl::Milliseconds(499), absl::Hours(2),
        absl::InfiniteDuration(), -absl::Seconds(1)}) {
    auto source = MemberListEndpoints(client, bad);
    ASSERT_FALSE(source.ok()) << bad;
    EXPECT_EQ(source.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(source.status().message()),
                HasSubstr("MemberListEndpoints interval must be in "
                          "[500ms, 1h]"));
  }
  EXPECT_THAT(
      std::string(
          MemberListEndpoints(nullptr, absl::Seconds(5)).status().message()),
      HasSubstr("MemberListEndpoints client must not be null"));
  EXPECT_TRUE(MemberListEndpoints(client, absl::Milliseconds(500)).ok());
  EXPECT_TRUE(MemberListEndpoints(client, absl::Hours(1)).ok());
}

}  // namespace
}  // namespace etcd
}  // namespace examples
}  // namespace tether
