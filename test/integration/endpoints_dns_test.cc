// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Endpoints that move, against a real DNS server (dnsmasq on loopback) and
// replicas on their own loopback addresses (127.0.0.11, .12, ... on one
// port), like the pods of a Kubernetes headless Service. Every wait is on an
// event with a generous deadline; nothing sleeps.
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/dns_server.h"
#include "test/integration/rollout_fixture.h"
#include "test/support/dns_pods.h"
#include "test/support/one_shot.h"
#include "test/support/test_server.h"
#include "tether/connection_pool.h"
#include "tether/endpoints.h"
#include "tether/resolved_endpoints.h"

namespace tether {
namespace testsupport {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(30);

std::vector<Endpoint> Eps(std::vector<std::string> addresses) {
  std::vector<Endpoint> out;
  for (std::string& a : addresses) out.push_back({std::move(a), ""});
  return out;
}

// Fast enough for a test: a record change is seen within 300 ms.
ResolverOptions FastResolver() {
  ResolverOptions o;
  o.resolve_interval = absl::Milliseconds(300);
  o.min_resolve_interval = absl::Milliseconds(50);
  o.query_timeout = absl::Milliseconds(500);
  return o;
}

// A condition over some recorded state, waited on without sleeping.
class Waitable {
 protected:
  bool WaitUntil(const std::function<bool()>& pred, absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), pred);
  }
  std::mutex mu_;
  std::condition_variable cv_;
};

// What a source told its sink.
class SinkLog final : public EndpointSource::Sink, public Waitable {
 public:
  void OnEndpoints(std::vector<Endpoint> endpoints) override {
    std::lock_guard<std::mutex> lock(mu_);
    last_ = std::move(endpoints);
    ++answers_;
    cv_.notify_all();
  }
  void OnEndpointsError(const absl::Status& status) override {
    std::lock_guard<std::mutex> lock(mu_);
    errors_.push_back(status);
    cv_.notify_all();
  }
  // Waits for an answer whose addresses are exactly `want`.
  bool WaitForAnswer(std::vector<std::string> want) {
    std::sort(want.begin(), want.end());
    return WaitUntil(
        [&] {
          std::vector<std::string> got;
          for (const Endpoint& e : last_) got.push_back(e.address);
          std::sort(got.begin(), got.end());
          return got == want;
        },
        kWait);
  }
  // Waits for an error with `code` after the first `seen` errors.
  bool WaitForError(absl::StatusCode code, std::size_t seen) {
    return WaitUntil(
        [&] {
          for (std::size_t i = seen; i < errors_.size(); ++i) {
            if (errors_[i].code() == code) return true;
          }
          return false;
        },
        kWait);
  }
  std::vector<Endpoint> last() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }
  std::vector<absl::Status> errors() {
    std::lock_guard<std::mutex> lock(mu_);
    return errors_;
  }

 private:
  std::vector<Endpoint> last_;
  int answers_ = 0;
  std::vector<absl::Status> errors_;
};

// The pool's endpoint events ("added ipv4:127.0.0.11:P", "missing ...",
// "removed ...", "error ..."), with waits. The pool owns it; its destructor
// tells `gone`.
class EndpointLog final : public ConnectionObserver, public Waitable {
 public:
  explicit EndpointLog(std::shared_ptr<OneShot> gone)
      : gone_(std::move(gone)) {}
  ~EndpointLog() override { gone_->Signal(); }
  void OnEndpointAdded(absl::string_view a) override {
    Add(absl::StrCat("added ", a));
  }
  void OnEndpointMissing(absl::string_view a) override {
    Add(absl::StrCat("missing ", a));
  }
  void OnEndpointRemoved(absl::string_view a, absl::string_view) override {
    Add(absl::StrCat("removed ", a));
  }
  void OnEndpointsError(const absl::Status& s) override {
    Add(absl::StrCat("error ", s.message()));
  }
  bool WaitFor(const std::string& event) {
    return WaitUntil(
        [&] {
          return std::find(events_.begin(), events_.end(), event) !=
                 events_.end();
        },
        kWait);
  }

 private:
  void Add(std::string e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
    cv_.notify_all();
  }
  std::vector<std::string> events_;
  const std::shared_ptr<OneShot> gone_;
};

// Waits until `pred(pool->Endpoints())` holds.
bool WaitForEndpoints(
    ConnectionPool& pool,
    const std::function<bool(const std::vector<EndpointStats>&)>& pred) {
  const absl::Time deadline = absl::Now() + kWait;
  while (!pred(pool.Endpoints())) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));  // polling a snapshot, not a fix
  }
  return true;
}

// A real pool (gRPC threads: not a unit test under TSan), with nothing
// listening on its endpoints.
TEST(ConnectionPoolEndpointsTest, OptionsAndSetEndpointsValidate) {
  ConnectionPoolOptions o;
  o.addresses = {"127.0.0.1:1", "ipv4:127.0.0.1:1"};
  EXPECT_THAT(std::string(Validate(o).message()), HasSubstr("twice"));
  o.addresses = {"127.0.0.1:1"};
  o.endpoints = *FixedEndpoints(Eps({"127.0.0.2:1"}));
  EXPECT_THAT(std::string(Validate(o).message()), HasSubstr("exactly one"));
  o.addresses.clear();
  auto pool = ConnectionPool::Create(o);
  ASSERT_TRUE(pool.ok()) << pool.status();
  ASSERT_EQ((*pool)->Endpoints().size(), 1u);
  EXPECT_EQ((*pool)->Endpoints()[0].address, "127.0.0.2:1");
  // A bad set changes nothing.
  EXPECT_EQ((*pool)->SetEndpoints({}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*pool)->SetEndpoints(Eps({"127.0.0.3:1", "nope"})).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_EQ((*pool)->Endpoints().size(), 1u);
  EXPECT_EQ((*pool)->Endpoints()[0].address, "127.0.0.2:1");
  EXPECT_TRUE((*pool)->SetEndpoints(Eps({"127.0.0.3:1", "[::1]:1"})).ok());
  EXPECT_EQ((*pool)->Stats().endpoints, 2u);
}

TEST(ResolvedEndpointsDnsTest, FollowsRecordsAndKeepsTheLastSetOnErrors) {
  auto dns = support::DnsServer::Start();
  ASSERT_TRUE(dns.ok()) << dns.status();
  ASSERT_TRUE(
      (*dns)->SetRecords({{"svc.test", {"127.0.0.11", "127.0.0.12"}}}).ok());
  auto source = ResolvedEndpoints(
      absl::StrCat("dns://", (*dns)->address(), "/svc.test:5000"),
      FastResolver());
  ASSERT_TRUE(source.ok()) << source.status();
  auto sink = std::make_shared<SinkLog>();
  (*source)->Start(sink);
  ASSERT_TRUE(
      sink->WaitForAnswer({"ipv4:127.0.0.11:5000", "ipv4:127.0.0.12:5000"}));
  for (const Endpoint& e : sink->last()) {
    EXPECT_EQ(e.authority, "svc.test:5000");
  }
  // A rollout step: one record replaced, one IPv6 record added.
  ASSERT_TRUE(
      (*dns)
          ->SetRecords({{"svc.test", {"127.0.0.12", "127.0.0.13", "::1"}}})
          .ok());
  ASSERT_TRUE(sink->WaitForAnswer(
      {"ipv4:127.0.0.12:5000", "ipv4:127.0.0.13:5000", "ipv6:[::1]:5000"}));
  // NXDOMAIN: an error, and no answer replaces the set.
  std::size_t seen = sink->errors().size();
  ASSERT_TRUE((*dns)->SetRecords({}).ok());
  ASSERT_TRUE(sink->WaitForError(absl::StatusCode::kNotFound, seen));
  EXPECT_THAT(sink->errors().back().message(), HasSubstr("NXDOMAIN"));
  EXPECT_EQ(sink->last().size(), 3u);
  // The DNS server down: UNAVAILABLE, the set stays.
  ASSERT_TRUE((*dns)->SetRecords({{"svc.test", {"127.0.0.14"}}}).ok());
  ASSERT_TRUE(sink->WaitForAnswer({"ipv4:127.0.0.14:5000"}));
  seen = sink->errors().size();
  ASSERT_TRUE((*dns)->Stop().ok());
  ASSERT_TRUE(sink->WaitForError(absl::StatusCode::kUnavailable, seen));
  EXPECT_EQ(sink->last().size(), 1u);
  // Back: answers again.
  ASSERT_TRUE((*dns)->SetRecords({{"svc.test", {"127.0.0.15"}}}).ok());
  ASSERT_TRUE((*dns)->Restart().ok());
  ASSERT_TRUE(sink->WaitForAnswer({"ipv4:127.0.0.15:5000"}));
  (*source)->Stop();
}

// Pods on 127.0.0.11, .12, ... sharing one port, a DNS name listing them,
// and a pool that resolves it.
class DnsRollout : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pods = DnsPods::Start();
    ASSERT_TRUE(pods.ok()) << pods.status();
    pods_ = *std::move(pods);
  }

  TestServer* StartPod(int i) { return pods_->StartPod(i); }
  TestServer* Pod(int i) { return pods_->pod(i); }
  std::string Endpoint(int i) const { return pods_->Endpoint(i); }
  void Publish(const std::vector<int>& pods) {
    ASSERT_TRUE(pods_->Publish(pods).ok());
  }
  void MakePool() {
    auto log = std::make_shared<EndpointLog>(pool_gone_);
    log_ = log.get();
    ConnectionPoolOptions o;
    auto source = ResolvedEndpoints(
        pods_->Target(), FastResolver());
    ASSERT_TRUE(source.ok()) << source.status();
    o.endpoints = *source;
    o.observer = std::move(log);
    pool_ = testsupport::MakePool(std::move(o));
    ASSERT_NE(pool_, nullptr);
  }
  // Waits until the pool has READY connections to exactly `n` endpoints.
  bool WaitReadyEndpoints(std::size_t n) {
    return WaitForEndpoints(*pool_, [&](const std::vector<EndpointStats>& v) {
      std::size_t in = 0;
      for (const EndpointStats& e : v) in += (!e.missing && !e.leaving);
      return in == n && pool_->Stats().ready >= n;
    });
  }
  std::map<std::string, std::size_t> StreamsPerEndpoint() {
    std::map<std::string, std::size_t> out;
    for (const EndpointStats& e : pool_->Endpoints()) {
      out[e.address] = e.streams;
    }
    return out;
  }
  void TearDown() override {
    if (streams_ != nullptr && pool_ != nullptr) {
      StopStreamsAndWaitForPool(*streams_, pool_, *pool_gone_);
    }
  }

  std::unique_ptr<DnsPods> pods_;
  std::shared_ptr<OneShot> pool_gone_ = std::make_shared<OneShot>();
  EndpointLog* log_ = nullptr;
  std::shared_ptr<ConnectionPool> pool_;
  std::unique_ptr<Streams> streams_;
};

TEST_F(DnsRollout, SixtyFourStreamsSpreadOverThreePodsAndANewPodTakesItsShare) {
  for (int i = 1; i <= 3; ++i) ASSERT_NE(StartPod(i), nullptr);
  Publish({1, 2, 3});
  MakePool();
  ASSERT_TRUE(WaitReadyEndpoints(3));
  streams_ = std::make_unique<Streams>(64);
  streams_->StartAll(pool_);
  ASSERT_TRUE(streams_->fleet.WaitAll(
      [](const Delivered& d) { return d.count >= 3; }, kWait));
  std::size_t lo = 64, hi = 0;
  for (int i = 1; i <= 3; ++i) {
    const std::size_t n =
        static_cast<std::size_t>(Pod(i)->stats().open_streams);
    lo = std::min(lo, n);
    hi = std::max(hi, n);
  }
  EXPECT_GE(lo, 20u);
  EXPECT_LE(hi, 2 * lo) << "max/min streams per pod";
  // A pod added to the answer takes the streams that open after it.
  ASSERT_NE(StartPod(4), nullptr);
  Publish({1, 2, 3, 4});
  ASSERT_TRUE(log_->WaitFor(absl::StrCat("added ", Endpoint(4))));
  ASSERT_TRUE(WaitReadyEndpoints(4));
  Streams more(16);
  more.StartAll(pool_);
  ASSERT_TRUE(more.fleet.WaitAll(
      [](const Delivered& d) { return d.count >= 3; }, kWait));
  EXPECT_EQ(StreamsPerEndpoint()[Endpoint(4)], 16u);
  EXPECT_EQ(Pod(4)->stats().open_streams, 16);
  more.streams.clear();
  streams_->ExpectClean();
}

using Stop = DnsPods::Stop;

// A Deployment's rolling update with surge 1, three times, so that no
// original pod is left: the new pod starts and its record is added, the old
// record is removed, then the old pod is stopped (gracefully: GOAWAY, 2 s
// grace; or cancel-first: its streams end before its GOAWAY and new ones are
// refused for 2 s). With `RecordAfterStop` the record leaves 1 s after the
// stop began (endpoint propagation slower than the signal): the GOAWAY and
// suspect paths must hold then.
class DnsRollingUpdate
    : public DnsRollout,
      public ::testing::WithParamInterface<std::tuple<Stop, bool>> {};

TEST_P(DnsRollingUpdate, NoErrorNoLossNoAttemptOnAPodWhoseRecordLeft) {
  const Stop how = std::get<0>(GetParam());
  const bool record_after_stop = std::get<1>(GetParam());
  for (int i = 1; i <= 3; ++i) ASSERT_NE(StartPod(i), nullptr);
  std::vector<int> live = {1, 2, 3};
  Publish(live);
  MakePool();
  ASSERT_TRUE(WaitReadyEndpoints(3));
  streams_ = std::make_unique<Streams>(24);
  streams_->StartAll(pool_);
  ASSERT_TRUE(streams_->fleet.WaitAll(
      [](const Delivered& d) { return d.count >= 3; }, kWait));
  for (int step = 0; step < 3; ++step) {
    const int old_pod = live.front();
    const int new_pod = 4 + step;
    ASSERT_NE(StartPod(new_pod), nullptr);
    live.push_back(new_pod);
    Publish(live);
    ASSERT_TRUE(log_->WaitFor(absl::StrCat("added ", Endpoint(new_pod))));
    ASSERT_TRUE(WaitReadyEndpoints(4));
    live.erase(live.begin());
    std::int64_t attempts_when_gone = -1;
    if (!record_after_stop) {
      Publish(live);
      ASSERT_TRUE(log_->WaitFor(absl::StrCat("missing ", Endpoint(old_pod))));
      attempts_when_gone = Pod(old_pod)->stats().watches_started;
    }
    const absl::Time stop_at = absl::Now();
    pods_->StopPod(old_pod, how);
    if (record_after_stop) {
      // The record leaves 1 s into the stop (waiting on the clock is the
      // scenario here, not a fix for a race).
      absl::SleepFor(absl::Seconds(1) - (absl::Now() - stop_at));
      Publish(live);
    }
    ASSERT_TRUE(log_->WaitFor(absl::StrCat("removed ", Endpoint(old_pod))));
    ASSERT_TRUE(Pod(old_pod)->WaitForStopped(kWait));
    if (attempts_when_gone >= 0) {
      EXPECT_EQ(Pod(old_pod)->stats().watches_started, attempts_when_gone)
          << "attempts on pod " << old_pod << " after its record left";
    }
    // The old pod is forgotten, and every stream delivers on.
    ASSERT_TRUE(
        WaitForEndpoints(*pool_, [&](const std::vector<EndpointStats>& v) {
          for (const EndpointStats& e : v) {
            if (e.address == Endpoint(old_pod)) return false;
          }
          return true;
        }));
    std::vector<int> base;
    for (int i = 0; i < 24; ++i) base.push_back(streams_->fleet.Get(i).count);
    ASSERT_TRUE(streams_->fleet.WaitAll(
        [&](int i, const Delivered& d) { return d.count >= base[i] + 3; },
        kWait));
  }
  streams_->ExpectClean();
  for (int i = 1; i <= 3; ++i) {
    EXPECT_FALSE(Pod(i)->running()) << "an original pod is left";
  }
  // No stream reopened on a pod that was going away: the evidence of a
  // cancel-first pod (its streams ended unannounced) holds for the whole
  // endpoint, and a graceful pod's GOAWAY or its missing record moved the
  // streams before it refused any.
  EXPECT_EQ(pods_->FailedBeforeFirst(), 0);
  // The figures of docs/endpoints.md.
  absl::Duration stall = absl::ZeroDuration();
  for (int i = 0; i < 24; ++i) {
    stall = std::max(stall, streams_->fleet.Get(i).max_gap);
  }
  std::string per_pod;
  for (const auto& [address, n] : StreamsPerEndpoint()) {
    absl::StrAppend(&per_pod, " ", n);
  }
  std::printf(
      "[figure] rollout x3 %s: max stall %s, refused attempts %lld, "
      "streams per pod%s\n",
      ::testing::UnitTest::GetInstance()->current_test_info()->name(),
      absl::FormatDuration(stall).c_str(),
      static_cast<long long>(pods_->FailedBeforeFirst()),  // NOLINT
      per_pod.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Modes, DnsRollingUpdate,
    ::testing::Combine(::testing::Values(Stop::kGraceful, Stop::kCancelFirst),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<Stop, bool>>& info) {
      return absl::StrCat(
          std::get<0>(info.param) == Stop::kGraceful ? "Graceful"
                                                     : "CancelFirst",
          std::get<1>(info.param) ? "RecordAfterStop" : "RecordFirst");
    });

}  // namespace
}  // namespace testsupport
}  // namespace tether
