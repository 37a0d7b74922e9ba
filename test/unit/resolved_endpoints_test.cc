// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// ResolvedEndpoints without a DNS server: the options, the targets, and the
// resolution schedule (a plain value).
#include "tether/resolved_endpoints.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "connections/resolve_schedule.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ResolverOptionsTest, DefaultsAreValidAndExtremesRejected) {
  ResolverOptions o;
  EXPECT_EQ(o.resolve_interval, absl::Seconds(5));
  EXPECT_EQ(o.min_resolve_interval, absl::Milliseconds(500));
  EXPECT_EQ(o.query_timeout, absl::Seconds(2));
  EXPECT_TRUE(o.honor_ttl);
  EXPECT_TRUE(Validate(o).ok());
  struct Case {
    std::function<void(ResolverOptions&)> mutate;
    const char* field;
  };
  const std::vector<Case> cases = {
      {[](ResolverOptions& r) {
         r.min_resolve_interval = absl::ZeroDuration();
       },
       "min_resolve_interval"},
      {[](ResolverOptions& r) {
         r.min_resolve_interval = absl::Milliseconds(9);
       },
       "min_resolve_interval"},
      {[](ResolverOptions& r) { r.min_resolve_interval = absl::Seconds(6); },
       "min_resolve_interval"},
      {[](ResolverOptions& r) {
         r.resolve_interval = absl::InfiniteDuration();
       },
       "resolve_interval"},
      {[](ResolverOptions& r) { r.resolve_interval = -absl::Seconds(1); },
       "min_resolve_interval"},
      {[](ResolverOptions& r) { r.query_timeout = absl::ZeroDuration(); },
       "query_timeout"},
      {[](ResolverOptions& r) { r.query_timeout = absl::InfiniteDuration(); },
       "query_timeout"},
  };
  for (const Case& c : cases) {
    ResolverOptions r;
    c.mutate(r);
    absl::Status s = Validate(r);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(std::string("ResolverOptions.") + c.field));
    EXPECT_FALSE(ResolvedEndpoints("dns:///svc:1", r).ok());
  }
  ResolverOptions edge;
  edge.min_resolve_interval = absl::Milliseconds(10);
  edge.resolve_interval = absl::Hours(1);
  edge.query_timeout = absl::Seconds(60);
  EXPECT_TRUE(Validate(edge).ok());
}

// Collects what a fixed source answers.
class Collect final : public EndpointSource::Sink {
 public:
  void OnEndpoints(std::vector<Endpoint> endpoints) override {
    for (Endpoint& e : endpoints) addresses.push_back(std::move(e.address));
  }
  void OnEndpointsError(const absl::Status&) override { ++errors; }
  std::vector<std::string> addresses;
  int errors = 0;
};

std::vector<std::string> FixedAnswer(const std::string& target) {
  auto source = ResolvedEndpoints(target);
  EXPECT_TRUE(source.ok()) << target << ": " << source.status();
  if (!source.ok()) return {};
  auto sink = std::make_shared<Collect>();
  (*source)->Start(sink);
  (*source)->Stop();
  return sink->addresses;
}

TEST(ResolvedEndpointsTest, LiteralTargetsNeedNoLookup) {
  EXPECT_THAT(FixedAnswer("ipv4:127.0.0.1:1,127.0.0.2:2"),
              ElementsAre("ipv4:127.0.0.1:1", "ipv4:127.0.0.2:2"));
  EXPECT_THAT(FixedAnswer("ipv6:[::1]:1"), ElementsAre("ipv6:[::1]:1"));
  EXPECT_THAT(FixedAnswer("unix:/tmp/x.sock"), ElementsAre("unix:/tmp/x.sock"));
  EXPECT_THAT(FixedAnswer("127.0.0.1:5"), ElementsAre("ipv4:127.0.0.1:5"));
  EXPECT_THAT(FixedAnswer("dns:///127.0.0.1:5"),
              ElementsAre("ipv4:127.0.0.1:5"));
  EXPECT_THAT(FixedAnswer("[::1]"), ElementsAre("ipv6:[::1]:443"));
}

TEST(ResolvedEndpointsTest, NamesAreAccepted) {
  for (const char* target :
       {"dns:///svc.test:5000", "dns:svc.test:5000", "svc.test:5000",
        "svc.test", "dns://127.0.0.1:5353/svc.test:5000",
        "dns://127.0.0.1/svc.test", "dns://[::1]:53/svc.test:1",
        "dns://[::1]/svc"}) {
    EXPECT_TRUE(ResolvedEndpoints(target).ok()) << target;
  }
}

TEST(ResolvedEndpointsTest, BadTargetsSayWhy) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "is empty"},
      {"dns:///", "no host"},
      {"dns:///svc:0", "port outside"},
      {"dns:///svc:70000", "port outside"},
      {"svc:http", "port outside"},
      {"xds:///svc", "scheme"},
      {"dns://resolver.example/svc:1", "not an IP"},
      {"dns://127.0.0.1:99999/svc:1", "port outside"},
      {"dns://127.0.0.1", "no / after"},
      {"dns:///bad_host!:1", "invalid host name"},
      {"dns:///fe80::1:443", "without brackets"},
      {"ipv4:127.0.0.1:1,nope:1", "not an IPv4"},
      {"ipv4:", "no :PORT"},
  };
  for (const auto& [target, why] : cases) {
    auto source = ResolvedEndpoints(target);
    ASSERT_FALSE(source.ok()) << target;
    EXPECT_EQ(source.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(source.status().message()), HasSubstr(why))
        << target << ": " << source.status();
  }
}

// --- The schedule ----------------------------------------------------------

class ResolveScheduleTest : public ::testing::Test {
 protected:
  absl::Time t0_ = absl::FromUnixSeconds(1000);
};

TEST_F(ResolveScheduleTest, AnswersWaitTheIntervalOrTheShorterTtl) {
  ResolverOptions o;
  internal::ResolveSchedule s(o);
  s.Started(t0_);
  EXPECT_EQ(s.Answered(t0_, absl::InfiniteDuration(), false),
            t0_ + absl::Seconds(5));
  EXPECT_EQ(s.Answered(t0_, absl::Seconds(2), false), t0_ + absl::Seconds(2));
  EXPECT_EQ(s.Answered(t0_, absl::Seconds(60), false), t0_ + absl::Seconds(5));
  // TTL 0 ("do not cache") tells nothing.
  EXPECT_EQ(s.Answered(t0_, absl::ZeroDuration(), false),
            t0_ + absl::Seconds(5));
  // A TTL below the minimum waits the minimum.
  EXPECT_EQ(s.Answered(t0_, absl::Milliseconds(1), false),
            t0_ + absl::Milliseconds(500));
  o.honor_ttl = false;
  internal::ResolveSchedule no_ttl(o);
  EXPECT_EQ(no_ttl.Answered(t0_, absl::Seconds(2), false),
            t0_ + absl::Seconds(5));
}

TEST_F(ResolveScheduleTest, AnAnswerThatDroppedAnAddressIsConfirmedSoon) {
  internal::ResolveSchedule s{ResolverOptions()};
  s.Started(t0_);
  EXPECT_EQ(
      s.Answered(t0_ + absl::Milliseconds(3), absl::InfiniteDuration(), true),
      t0_ + absl::Milliseconds(503));
}

TEST_F(ResolveScheduleTest, ErrorsBackOffFromTheMinimumToTheInterval) {
  internal::ResolveSchedule s{ResolverOptions()};
  std::vector<absl::Duration> waits;
  absl::Time now = t0_;
  for (int i = 0; i < 70; ++i) {
    s.Started(now);
    const absl::Time next = s.Failed(now);
    waits.push_back(next - now);
    now = next;
  }
  EXPECT_EQ(waits[0], absl::Milliseconds(500));
  EXPECT_EQ(waits[1], absl::Seconds(1));
  EXPECT_EQ(waits[2], absl::Seconds(2));
  EXPECT_EQ(waits[3], absl::Seconds(4));
  EXPECT_EQ(waits[4], absl::Seconds(5));
  EXPECT_EQ(waits[69], absl::Seconds(5));
  // An answer starts over.
  s.Started(now);
  s.Answered(now, absl::InfiniteDuration(), false);
  s.Started(now + absl::Seconds(5));
  EXPECT_EQ(s.Failed(now + absl::Seconds(5)) - (now + absl::Seconds(5)),
            absl::Milliseconds(500));
}

TEST_F(ResolveScheduleTest, RefreshesAreRateLimited) {
  internal::ResolveSchedule s{ResolverOptions()};
  s.Started(t0_);
  const absl::Time planned = s.Answered(t0_, absl::InfiniteDuration(), false);
  // Right after a lookup: not before the minimum interval.
  EXPECT_EQ(s.Refreshed(t0_ + absl::Milliseconds(100), planned),
            t0_ + absl::Milliseconds(500));
  // Later: at once.
  EXPECT_EQ(s.Refreshed(t0_ + absl::Seconds(2), planned),
            t0_ + absl::Seconds(2));
  // Never later than planned.
  EXPECT_EQ(s.Refreshed(t0_ + absl::Seconds(2), t0_ + absl::Seconds(1)),
            t0_ + absl::Seconds(1));
}

}  // namespace
}  // namespace tether
