// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Endpoint sets: validation, the spread rule, endpoints that join and leave,
// and the flap rule. Fake connections and a fake clock: no network.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "connections/pool_core.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/pool_core_fixture.h"
#include "tether/connection_pool.h"
#include "tether/endpoints.h"

namespace tether {
namespace {

using internal::LinkState;
using pool_test::Listener;
using pool_test::PoolCoreTest;
using Removal = internal::PoolCore::Removal;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<Endpoint> Eps(std::vector<std::string> addresses) {
  std::vector<Endpoint> out;
  for (std::string& a : addresses) out.push_back({std::move(a), ""});
  return out;
}

TEST(EndpointKeyTest, NamesTheSamePlaceTheSameWay) {
  EXPECT_EQ(*EndpointKey("10.0.0.1:443"), "ipv4:10.0.0.1:443");
  EXPECT_EQ(*EndpointKey("ipv4:10.0.0.1:443"), "ipv4:10.0.0.1:443");
  EXPECT_EQ(*EndpointKey("[::1]:443"), "ipv6:[::1]:443");
  EXPECT_EQ(*EndpointKey("ipv6:[0:0::1]:443"), "ipv6:[::1]:443");
  EXPECT_EQ(*EndpointKey("unix:/run/a.sock"), "unix:/run/a.sock");
  EXPECT_EQ(*EndpointKey("unix-abstract:a"), "unix-abstract:a");
  EXPECT_EQ(*EndpointKey("Svc.Example:80"), "svc.example:80");
  EXPECT_EQ(*EndpointKey("a:1"), "a:1");
}

TEST(EndpointKeyTest, InvalidAddressesSayWhy) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "is empty"},
      {"host", "no :PORT"},
      {"host:", "port outside"},
      {"host:0", "port outside"},
      {"host:65536", "port outside"},
      {"host:99999999999", "port outside"},
      {"host:-1", "port outside"},
      {"a b:1", "space"},
      {std::string("a\0b:1", 5), "control"},
      {"ipv4:1.2.3.4:5,1.2.3.5:5", "more than one address"},
      {"ipv4:host:1", "not an IPv4"},
      {"ipv4:1.2.3.256:1", "not an IPv4"},
      {"ipv6:::1:443", "bracketed IPv6"},
      {"ipv6:[1.2.3.4]:443", "bracketed IPv6"},
      {"[zz::1]:443", "bracketed IPv6"},
      {"[::1]443", "no :PORT"},
      {"dns:///svc:443", "target to resolve"},
      {"xds:///svc", "target to resolve"},
      {"unix:", "empty path"},
      {"bad/host:1", "invalid host name"},
  };
  for (const auto& [address, why] : cases) {
    absl::StatusOr<std::string> key = EndpointKey(address);
    ASSERT_FALSE(key.ok()) << address;
    EXPECT_EQ(key.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(key.status().message()),
                HasSubstr("Endpoint.address must be"))
        << address;
    EXPECT_THAT(std::string(key.status().message()), HasSubstr(why)) << address;
  }
}

TEST(ValidateEndpointsTest, SizesDuplicatesAndAuthorities) {
  EXPECT_THAT(std::string(ValidateEndpoints({}).message()),
              HasSubstr("endpoints must not be empty"));
  std::vector<Endpoint> many;
  for (std::size_t i = 0; i < kMaxEndpoints; ++i) {
    many.push_back({absl::StrCat("10.", i / 256, ".", i % 256, ".1:443"), ""});
  }
  EXPECT_TRUE(ValidateEndpoints(many).ok());
  many.push_back({"10.200.0.1:443", ""});
  EXPECT_THAT(std::string(ValidateEndpoints(many).message()),
              HasSubstr("at most 1024"));
  EXPECT_THAT(
      std::string(
          ValidateEndpoints(Eps({"10.0.0.1:1", "ipv4:10.0.0.1:1"})).message()),
      HasSubstr("listed twice"));
  EXPECT_THAT(
      std::string(
          ValidateEndpoints(Eps({"[::1]:1", "ipv6:[::1]:1"})).message()),
      HasSubstr("listed twice"));
  EXPECT_TRUE(
      ValidateEndpoints(Eps({"[::1]:1", "127.0.0.1:1", "unix:/a"})).ok());
  EXPECT_THAT(
      std::string(
          ValidateEndpoints({{"10.0.0.1:1", "svc name:443"}}).message()),
      HasSubstr("Endpoint.authority must"));
  EXPECT_FALSE(FixedEndpoints({}).ok());
  EXPECT_TRUE(FixedEndpoints(Eps({"10.0.0.1:1"})).ok());
}

class EndpointsTest : public PoolCoreTest {
 protected:
  void MakeWith(std::vector<std::string> addresses) {
    ConnectionPoolOptions o;
    o.addresses = std::move(addresses);
    Make(std::move(o));
  }
  // Streams per endpoint address, from the core.
  std::map<std::string, std::size_t> Streams() {
    std::map<std::string, std::size_t> out;
    for (const EndpointStats& e : core_->Endpoints())
      out[e.address] = e.streams;
    return out;
  }
  const EndpointStats* Find(const std::string& address) {
    stats_ = core_->Endpoints();
    for (const EndpointStats& e : stats_) {
      if (e.address == address) return &e;
    }
    return nullptr;
  }
  // Two READY endpoints, a stream on 10.0.0.1, then a source's answer
  // without 10.0.0.1 (missing, under the flap rule).
  std::shared_ptr<Listener> StreamOnAThenAnswerWithoutIt() {
    MakeWith({"10.0.0.1:1", "10.0.0.2:1"});
    Serve(1);
    Serve(2);
    auto a = std::make_shared<Listener>();
    EXPECT_EQ(MustPick(a), 1u);
    core_->SetEndpoints(Eps({"10.0.0.2:1"}), Removal::kConfirmed);
    return a;
  }
  std::vector<EndpointStats> stats_;
};

TEST_F(EndpointsTest, PicksSpreadOverEndpointsFewestStreamsFirst) {
  MakeWith({"10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1"});
  for (std::uint64_t id = 1; id <= 3; ++id) Serve(id);
  std::vector<std::shared_ptr<Listener>> streams;
  for (int i = 0; i < 64; ++i) {
    streams.push_back(std::make_shared<Listener>());
    MustPick(streams.back());
  }
  std::size_t lo = 64, hi = 0;
  for (const auto& [address, n] : Streams()) {
    lo = std::min(lo, n);
    hi = std::max(hi, n);
  }
  EXPECT_EQ(hi, 22u);
  EXPECT_EQ(lo, 21u);
}

TEST_F(EndpointsTest, AnEndpointAddedTakesTheNextPicksUntilItCatchesUp) {
  MakeWith({"10.0.0.1:1", "10.0.0.2:1"});
  Serve(1);
  Serve(2);
  std::vector<std::shared_ptr<Listener>> streams;
  for (int i = 0; i < 20; ++i) {
    streams.push_back(std::make_shared<Listener>());
    MustPick(streams.back());
  }
  core_->SetEndpoints(Eps({"10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1"}),
                      Removal::kConfirmed);
  ASSERT_EQ(driver_.opened(), 3u);
  ASSERT_EQ(driver_.link(3)->address(), "10.0.0.3:1");
  // Connecting: READY ones are preferred.
  auto early = std::make_shared<Listener>();
  EXPECT_NE(MustPick(early), 3u);
  Serve(3);
  for (int i = 0; i < 10; ++i) {
    streams.push_back(std::make_shared<Listener>());
    EXPECT_EQ(MustPick(streams.back()), 3u) << i;
  }
  EXPECT_EQ(Streams()["10.0.0.3:1"], 10u);
  EXPECT_THAT(
      observer_->endpoint_events(),
      ElementsAre("added 10.0.0.1:1", "added 10.0.0.2:1", "added 10.0.0.3:1"));
}

TEST_F(EndpointsTest, AnEndpointThatLeavesDrainsLikeAGoaway) {
  MakeWith({"10.0.0.1:1", "10.0.0.2:1"});
  Serve(1);
  Serve(2);
  auto a = std::make_shared<Listener>();
  auto b = std::make_shared<Listener>();
  ASSERT_EQ(MustPick(a), 1u);
  ASSERT_EQ(MustPick(b), 2u);
  a->hook_ = [&](std::uint64_t id) {
    // Make before break: the stream re-picks while it still holds the old.
    EXPECT_EQ(MustPick(a), 2u);
    core_->Release(id, a);
  };
  core_->SetEndpoints(Eps({"10.0.0.2:1"}), Removal::kAtOnce);
  EXPECT_THAT(a->calls(), ElementsAre(1u));
  EXPECT_THAT(a->last_why(), HasSubstr("left the endpoint set"));
  EXPECT_TRUE(b->calls().empty());
  EXPECT_FALSE(core_->IsOpen(1));   // its last pick went: retired
  EXPECT_EQ(driver_.opened(), 2u);  // no replacement to a leaving endpoint
  EXPECT_EQ(core_->Stats().endpoints, 1u);
  EXPECT_EQ(Find("10.0.0.1:1"), nullptr);  // gone with its last connection
  EXPECT_THAT(observer_->endpoint_events(),
              ElementsAre("added 10.0.0.1:1", "added 10.0.0.2:1",
                          "removed 10.0.0.1:1"));
  // Nothing else opens to it later either.
  clock_->AdvanceBy(absl::Minutes(1));
  EXPECT_EQ(driver_.opened(), 2u);
}

TEST_F(EndpointsTest, FlapRuleAnEndpointMissingFromOneAnswerKeepsItsStreams) {
  auto a = StreamOnAThenAnswerWithoutIt();
  EXPECT_TRUE(a->calls().empty());  // not moved
  ASSERT_NE(Find("10.0.0.1:1"), nullptr);
  EXPECT_TRUE(Find("10.0.0.1:1")->missing);
  // New picks avoid it.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(MustPick(std::make_shared<Listener>()), 2u);
  }
  // Back in the next answer: nothing moved, nothing reopened.
  core_->SetEndpoints(Eps({"10.0.0.1:1", "10.0.0.2:1"}), Removal::kConfirmed);
  EXPECT_TRUE(a->calls().empty());
  EXPECT_FALSE(Find("10.0.0.1:1")->missing);
  EXPECT_EQ(driver_.opened(), 2u);
  EXPECT_THAT(observer_->endpoint_events(),
              ElementsAre("added 10.0.0.1:1", "added 10.0.0.2:1",
                          "missing 10.0.0.1:1"));
  // Missing from two answers in a row: it leaves.
  core_->SetEndpoints(Eps({"10.0.0.2:1"}), Removal::kConfirmed);
  EXPECT_TRUE(a->calls().empty());
  core_->SetEndpoints(Eps({"10.0.0.2:1"}), Removal::kConfirmed);
  EXPECT_THAT(a->calls(), ElementsAre(1u));
  EXPECT_TRUE(Find("10.0.0.1:1")->leaving);
}

TEST_F(EndpointsTest, FlapRuleAMissingEndpointWhoseConnectionDrainsLeaves) {
  auto a = StreamOnAThenAnswerWithoutIt();
  core_->OnLinkState(1, LinkState::kIdle);  // its GOAWAY
  EXPECT_THAT(a->calls(), ElementsAre(1u));
  EXPECT_EQ(driver_.opened(), 2u);  // no replacement: it is leaving
  EXPECT_TRUE(Find("10.0.0.1:1")->leaving);
  EXPECT_EQ(observer_->endpoint_events().back(), "removed 10.0.0.1:1");
}

TEST_F(EndpointsTest, FlapRuleAMissingEndpointWithNoReadyConnectionLeaves) {
  MakeWith({"10.0.0.1:1", "10.0.0.2:1"});
  Serve(2);  // 10.0.0.1 never connected
  core_->SetEndpoints(Eps({"10.0.0.2:1"}), Removal::kConfirmed);
  EXPECT_EQ(Find("10.0.0.1:1"), nullptr);
  EXPECT_FALSE(core_->IsOpen(1));
}

TEST_F(EndpointsTest, AMissingEndpointIsALastResort) {
  MakeWith({"10.0.0.1:1", "10.0.0.2:1"});
  Serve(1);
  core_->SetEndpoints(Eps({"10.0.0.2:1"}), Removal::kConfirmed);
  // 10.0.0.2 is still connecting: a connecting member beats a missing one.
  EXPECT_EQ(MustPick(std::make_shared<Listener>()), 2u);
  // 10.0.0.2's connections fail; after two, the next waits for the probe
  // backoff.
  core_->OnLinkState(2, LinkState::kShutdown);
  ASSERT_EQ(driver_.opened(), 3u);
  core_->OnLinkState(3, LinkState::kShutdown);
  ASSERT_EQ(driver_.opened(), 3u);
  // Only the missing endpoint is left READY: better than no pick.
  EXPECT_EQ(MustPick(std::make_shared<Listener>()), 1u);
}

TEST_F(EndpointsTest, EvidenceIsPerEndpointNotPerConnection) {
  MakeWith({"10.0.0.1:1", "10.0.0.2:1"});
  Serve(1);
  Serve(2);
  auto a = std::make_shared<Listener>();
  ASSERT_EQ(MustPick(a), 1u);
  // A stream on 10.0.0.1 ended before its first message: a server going
  // away (ending streams before its GOAWAY). The pool replaces the
  // connection, to the same endpoint.
  core_->Release(1, a);
  core_->ReportDrainEnd(1, absl::UnavailableError("server is shutting down"));
  ASSERT_EQ(driver_.opened(), 3u);
  ASSERT_EQ(driver_.link(3)->address(), "10.0.0.1:1");
  Serve(3);
  // The new connection reaches the same server: picks go elsewhere.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(MustPick(std::make_shared<Listener>()), 2u) << i;
  }
  // Alone, the endpoint still takes picks (a last resort, not a failure).
  core_->OnLinkState(2, LinkState::kShutdown);
  core_->SetEndpoints(Eps({"10.0.0.1:1"}), Removal::kAtOnce);
  EXPECT_EQ(MustPick(std::make_shared<Listener>()), 3u);
  // After the probation without new evidence, it is an equal again.
  clock_->AdvanceBy(absl::Seconds(31));
  core_->SetEndpoints(Eps({"10.0.0.1:1", "10.0.0.2:1"}), Removal::kAtOnce);
  const std::uint64_t b_conn = driver_.opened();
  Serve(b_conn);
  auto c = std::make_shared<Listener>();
  auto d = std::make_shared<Listener>();
  const std::uint64_t first = MustPick(c);
  const std::uint64_t second = MustPick(d);
  EXPECT_NE(first, second);  // spread again
}

TEST_F(EndpointsTest, SourceErrorsKeepTheSetAndAreCounted) {
  MakeWith({"10.0.0.1:1"});
  Serve(1);
  core_->OnEndpointsError(absl::NotFoundError("NXDOMAIN svc.example"));
  EXPECT_EQ(core_->Stats().endpoints, 1u);
  EXPECT_EQ(core_->Stats().endpoint_errors, 1u);
  EXPECT_EQ(MustPick(std::make_shared<Listener>()), 1u);
  EXPECT_EQ(observer_->endpoint_events().back(), "error NXDOMAIN svc.example");
}

TEST_F(EndpointsTest, DrainsFailedConnectsAndSuspectsAskForARefresh) {
  int refreshes = 0;
  ConnectionPoolOptions o;
  o.addresses = {"10.0.0.1:1", "10.0.0.2:1"};
  o.clock = clock_;
  core_ = internal::PoolCore::Create(o, &driver_);
  core_->SetRefreshHook([&] { ++refreshes; });
  core_->Start();
  EXPECT_EQ(refreshes, 0);
  core_->OnLinkState(1, LinkState::kTransientFailure);  // failed connect
  EXPECT_EQ(refreshes, 1);
  Serve(2);
  core_->OnLinkState(2, LinkState::kIdle);  // GOAWAY
  EXPECT_EQ(refreshes, 2);
  Serve(3);  // the replacement
  core_->ReportDrainEnd(3, absl::UnavailableError("shutting down"));
  EXPECT_EQ(refreshes, 3);
  // Removing an endpoint is no reason to ask again.
  core_->SetEndpoints(Eps({"10.0.0.1:1"}), Removal::kAtOnce);
  EXPECT_EQ(refreshes, 3);
}

TEST_F(EndpointsTest, AFlappingSetOpensNoFasterThanTheProbeBackoff) {
  MakeWith({"10.0.0.1:1", "10.0.0.2:1"});
  Serve(2);
  const std::size_t before = driver_.opened();
  for (int i = 0; i < 10; ++i) {
    core_->SetEndpoints(Eps({"10.0.0.2:1"}), Removal::kAtOnce);
    core_->SetEndpoints(Eps({"10.0.0.1:1", "10.0.0.2:1"}), Removal::kAtOnce);
  }
  // The first open and one at once; the rest wait for the probe timer.
  std::size_t to_a = 0;
  for (std::uint64_t id = before + 1; id <= driver_.opened(); ++id) {
    if (driver_.link(id)->address() == "10.0.0.1:1") ++to_a;
  }
  EXPECT_LE(to_a, 2u);
}

TEST_F(EndpointsTest, AuthorityGoesToTheDriver) {
  MakeWith({"10.0.0.1:1"});
  core_->SetEndpoints({{"ipv4:10.0.0.9:443", "svc.example:443"}},
                      Removal::kAtOnce);
  ASSERT_EQ(driver_.opened(), 2u);
  EXPECT_EQ(driver_.link(2)->address(), "ipv4:10.0.0.9:443");
  EXPECT_EQ(driver_.authority(2), "svc.example:443");
}

TEST_F(EndpointsTest, AThousandEndpointsComeAndGo) {
  MakeWith({"10.0.0.1:1"});
  std::vector<Endpoint> first, second;
  for (std::size_t i = 0; i < kMaxEndpoints; ++i) {
    first.push_back({absl::StrCat("10.1.", i / 256, ".", i % 256, ":1"), ""});
    second.push_back({absl::StrCat("10.2.", i / 256, ".", i % 256, ":1"), ""});
  }
  core_->SetEndpoints(first, Removal::kAtOnce);
  EXPECT_EQ(core_->Stats().endpoints, kMaxEndpoints);
  core_->SetEndpoints(second, Removal::kAtOnce);
  EXPECT_EQ(core_->Stats().endpoints, kMaxEndpoints);
  EXPECT_EQ(core_->Endpoints().size(), kMaxEndpoints);  // the old ones gone
  EXPECT_EQ(core_->Stats().open, kMaxEndpoints);
}

TEST_F(EndpointsTest, APoolWithNoAnswerYetSaysSo) {
  ConnectionPoolOptions o;
  o.endpoints = *FixedEndpoints(Eps({"10.0.0.1:1"}));  // never started here
  o.clock = clock_;
  core_ = internal::PoolCore::Create(o, &driver_);
  core_->Start();
  auto pick = core_->Pick(std::make_shared<Listener>());
  ASSERT_FALSE(pick.ok());
  EXPECT_THAT(std::string(pick.status().message()),
              HasSubstr("no endpoint yet"));
}

}  // namespace
}  // namespace tether
