// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// What a stream's end says about its connection: per connection (pods, L4
// balancers) or per call (an L7 proxy that balances each call), set by
// `ConnectionPoolOptions::balancing` or learned. The pool core under a fake
// clock with a fake driver.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/pool_core_fixture.h"
#include "tether/connection_pool.h"

namespace tether {
namespace pool_test {
namespace {

using ::testing::HasSubstr;

class BalancingTest : public PoolCoreTest {
 protected:
  // One endpoint (the proxy), READY, with `a` (the stream whose calls the
  // proxy sends to a server going away) on its first connection, and with
  // `d` (a stream on a live server) there too unless `alone`.
  void MakeProxy(EndpointBalancing balancing, bool alone = false) {
    ConnectionPoolOptions o;
    o.target = "proxy.example:443";
    o.balancing = balancing;
    ASSERT_TRUE(Validate(o).ok());
    o.clock = clock_;
    o.observer = learned_;
    core_ = PoolCore::Create(o, &driver_);
    core_->Start();
    Serve(1);
    ASSERT_EQ(MustPick(a_), 1u);
    if (!alone) {
      ASSERT_EQ(MustPick(d_), 1u);
    }
  }
  // `l`'s call on `id` ended: refused (before its first message), or after
  // it had delivered.
  void Ended(const std::shared_ptr<Listener>& l, std::uint64_t id,
             bool before_first_message) {
    core_->Release(id, l);
    ConnectionSource::EndReport r;
    r.status = absl::UnavailableError("server is shutting down");
    r.before_first_message = before_first_message;
    core_->ReportUnannouncedEnd(id, r);
  }
  void Refused(std::uint64_t id) { Ended(a_, id, true); }
  bool PerCall() { return core_->Endpoints().at(0).per_call; }

  // Records suspects and the learning event.
  class LearningObserver final : public ConnectionObserver {
   public:
    void OnEndpointBalancesCalls(absl::string_view address,
                                 absl::string_view why) override {
      events.push_back(absl::StrCat(address, ": ", why));
    }
    void OnConnectionSuspect(std::uint64_t id, const absl::Status&) override {
      events.push_back(absl::StrCat("suspect ", id));
    }
    std::vector<std::string> events;
  };
  std::shared_ptr<LearningObserver> learned_ =
      std::make_shared<LearningObserver>();
  std::shared_ptr<Listener> a_ = std::make_shared<Listener>();
  std::shared_ptr<Listener> d_ = std::make_shared<Listener>();
};

TEST(BalancingOptionsTest, OnlyTheThreeValuesAreValid) {
  ConnectionPoolOptions o;
  o.target = "svc.example:443";
  EXPECT_EQ(o.balancing, EndpointBalancing::kDetect);
  for (EndpointBalancing b :
       {EndpointBalancing::kDetect, EndpointBalancing::kPerConnection,
        EndpointBalancing::kPerCall}) {
    o.balancing = b;
    EXPECT_TRUE(Validate(o).ok()) << Validate(o);
  }
  for (int bad : {-1, 3, 1 << 30}) {
    o.balancing = static_cast<EndpointBalancing>(bad);
    EXPECT_THAT(std::string(Validate(o).message()),
                HasSubstr("balancing must be kDetect, kPerConnection or "
                          "kPerCall"))
        << bad;
  }
}

TEST_F(BalancingTest, PerCallRefusalsNeverMakeTheConnectionSuspect) {
  MakeProxy(EndpointBalancing::kPerCall);
  EXPECT_TRUE(PerCall());
  for (int i = 0; i < 5; ++i) {
    Refused(1);
    // The retry goes out on the same connection: the proxy sends it
    // wherever it balances it; no new connection (whose health watch would
    // take the proxy's next slot) is opened.
    ASSERT_EQ(MustPick(a_), 1u) << i;
  }
  // Ends after a first message, from many streams: nothing either.
  for (int i = 0; i < 4; ++i) {
    auto s = std::make_shared<Listener>();
    ASSERT_EQ(MustPick(s), 1u);
    Ended(s, 1, /*before_first_message=*/false);
  }
  EXPECT_EQ(core_->Stats().suspect, 0u);
  EXPECT_EQ(driver_.opened(), 1u);
  EXPECT_TRUE(learned_->events.empty());
}

TEST_F(BalancingTest, PerCallStallsStillCount) {
  MakeProxy(EndpointBalancing::kPerCall);
  core_->Release(1, a_);
  ConnectionSource::EndReport r;
  r.status = absl::DeadlineExceededError("nothing arrived (stall_timeout)");
  r.stalled = true;
  core_->ReportUnannouncedEnd(1, r);
  EXPECT_EQ(core_->Stats().suspect, 1u);
  EXPECT_EQ(driver_.opened(), 2u);  // its replacement
}

TEST_F(BalancingTest, PerCallRefusedStreamsRetryAfterTheirJitterNotBackoff) {
  MakeProxy(EndpointBalancing::kPerCall);
  Refused(1);
  // The stream waits out its backoff and asks to be woken: it is, at once
  // (it then retries after its recovery_jitter).
  core_->NotifyWhenAvailable(a_);
  EXPECT_EQ(a_->available, 1);
  // Once: the next wait is an ordinary one.
  core_->NotifyWhenAvailable(a_);
  EXPECT_EQ(a_->available, 1);
  // Two more fast retries within suspect_end_window (round robin sends
  // about half of the retries back to the refusing server)...
  for (int i = 2; i <= 3; ++i) {
    ASSERT_EQ(MustPick(a_), 1u);
    clock_->AdvanceBy(absl::Milliseconds(100));
    Refused(1);
    core_->NotifyWhenAvailable(a_);
    EXPECT_EQ(a_->available, i);
  }
  // ...then the service behind the proxy may be down: the stream's backoff
  // paces it.
  ASSERT_EQ(MustPick(a_), 1u);
  clock_->AdvanceBy(absl::Milliseconds(600));
  Refused(1);
  core_->NotifyWhenAvailable(a_);
  EXPECT_EQ(a_->available, 3);
  // A window later, fast retries again.
  ASSERT_EQ(MustPick(a_), 1u);
  clock_->AdvanceBy(absl::Milliseconds(200));
  Refused(1);
  core_->NotifyWhenAvailable(a_);
  EXPECT_EQ(a_->available, 4);
  // A stream that picks again before asking is forgotten too.
  ASSERT_EQ(MustPick(d_), 1u);
  Ended(d_, 1, /*before_first_message=*/true);
  ASSERT_EQ(MustPick(d_), 1u);
  core_->NotifyWhenAvailable(d_);
  EXPECT_EQ(d_->available, 0);
  // An end after a first message reopens at once anyway: not recorded.
  auto e = std::make_shared<Listener>();
  ASSERT_EQ(MustPick(e), 1u);
  Ended(e, 1, /*before_first_message=*/false);
  core_->NotifyWhenAvailable(e);
  EXPECT_EQ(e->available, 0);
}

TEST_F(BalancingTest, PerConnectionRefusedStreamsWaitForAUsableConnection) {
  MakeProxy(EndpointBalancing::kPerConnection);
  Refused(1);
  core_->NotifyWhenAvailable(a_);
  EXPECT_EQ(a_->available, 0);
  Serve(2);  // the replacement
  EXPECT_EQ(a_->available, 1);
}

TEST_F(BalancingTest, DetectLearnsWhenStreamsRunOnThroughTheOldConnection) {
  MakeProxy(EndpointBalancing::kDetect);
  EXPECT_FALSE(PerCall());
  // Refused on the first connection: as from a pod, it turns suspect and a
  // replacement opens (an escape: behind an L4 balancer it may reach
  // another server).
  Refused(1);
  EXPECT_EQ(core_->Stats().suspect, 1u);
  ASSERT_EQ(driver_.opened(), 2u);
  Serve(2);
  ASSERT_EQ(MustPick(a_), 2u);
  // Refused on the escape too, while `d` runs on through the first
  // connection: a pod would have ended it. The endpoint balances each call.
  Refused(2);
  EXPECT_TRUE(PerCall());
  ASSERT_EQ(learned_->events.size(), 2u);
  EXPECT_EQ(learned_->events[0], "suspect 1");
  EXPECT_THAT(learned_->events[1],
              HasSubstr("proxy.example:443: a call was refused on a "
                        "connection opened to get away from refusals or "
                        "ends, while 1 streams ran on"));
  // Its suspect is restored, nothing more is opened, and later refusals
  // are retried on its connections.
  EXPECT_EQ(core_->Stats().suspect, 0u);
  EXPECT_EQ(core_->Stats().restored, 1u);
  for (int i = 0; i < 5; ++i) {
    const std::uint64_t id = MustPick(a_);
    EXPECT_TRUE(core_->IsOpen(id));
    Refused(id);
  }
  EXPECT_EQ(core_->Stats().suspect, 0u);
  EXPECT_EQ(driver_.opened(), 2u);
  EXPECT_TRUE(d_->calls().empty());  // never disturbed
}

TEST_F(BalancingTest, DetectLearnsALoneStreamsProxyFromTwoEscapesRefused) {
  MakeProxy(EndpointBalancing::kDetect, /*alone=*/true);
  Refused(1);  // 1 retires (suspect, no pick); its replacement 2 escapes
  Serve(2);
  ASSERT_EQ(MustPick(a_), 2u);
  // Refused on one escape: an L4 balancer may have reached the same server.
  Refused(2);
  EXPECT_FALSE(PerCall());
  ASSERT_EQ(driver_.opened(), 3u);
  Serve(3);
  ASSERT_EQ(MustPick(a_), 3u);
  Refused(3);  // a second escape refused
  EXPECT_TRUE(PerCall());
  ASSERT_EQ(learned_->events.size(), 3u);
  EXPECT_THAT(learned_->events[2],
              HasSubstr("calls were refused on 2 connections opened to get "
                        "away"));
  EXPECT_EQ(driver_.opened(), 3u);
  EXPECT_EQ(MustPick(a_), 3u);
}

TEST_F(BalancingTest, DetectCountsEscapesRefusedWithinOneProbation) {
  MakeProxy(EndpointBalancing::kDetect, /*alone=*/true);
  Refused(1);  // suspect; its replacement 2 is an escape
  Serve(2);
  ASSERT_EQ(MustPick(a_), 2u);
  Refused(2);  // escapes refused: 1
  Serve(3);
  ASSERT_EQ(MustPick(a_), 3u);
  // The second escape serves well. After the probation a refusal on 3 is
  // no escape's any more.
  clock_->AdvanceBy(absl::Seconds(31));
  Refused(3);
  EXPECT_FALSE(PerCall());
  Serve(4);
  ASSERT_EQ(MustPick(a_), 4u);
  Refused(4);  // a new episode: escapes refused: 1
  EXPECT_FALSE(PerCall());
  Serve(5);
  ASSERT_EQ(MustPick(a_), 5u);
  Refused(5);  // 2 within one probation
  EXPECT_TRUE(PerCall());
}

TEST_F(BalancingTest, DetectLearnsFromStreamsLeavingAfterWeakEvidence) {
  // A server behind the proxy ends three streams after their first message
  // (cancel-first). The first to leave opens an escape connection and the
  // others follow it there; the proxy sends their calls to the same server,
  // which refuses them, while `a` and `d` run on through the first
  // connection.
  MakeProxy(EndpointBalancing::kDetect);
  std::vector<std::shared_ptr<Listener>> s(3);
  for (auto& l : s) {
    l = std::make_shared<Listener>();
    ASSERT_EQ(MustPick(l), 1u);
  }
  std::vector<std::uint64_t> escapes;
  for (auto& l : s) {
    Ended(l, 1, /*before_first_message=*/false);
    escapes.push_back(MustPick(l));
  }
  EXPECT_EQ(core_->Stats().suspect, 1u);  // 1, after three streams' ends
  ASSERT_EQ(escapes, std::vector<std::uint64_t>(3, 2u));
  core_->OnLinkState(2, LinkState::kReady);
  Ended(s[0], 2, /*before_first_message=*/true);
  EXPECT_TRUE(PerCall());
  EXPECT_EQ(core_->Stats().suspect, 0u);
  // The refused stream is woken at once and retries on the proxy's
  // connections, opening none.
  core_->NotifyWhenAvailable(s[0]);
  EXPECT_EQ(s[0]->available, 1);
  for (auto& l : {s[0], s[1]}) {
    const std::uint64_t id = MustPick(l);
    EXPECT_TRUE(core_->IsOpen(id));
    Ended(l, id, /*before_first_message=*/true);
  }
  EXPECT_EQ(driver_.opened(), 2u);
}

TEST_F(BalancingTest, PerConnectionNeverLearns) {
  MakeProxy(EndpointBalancing::kPerConnection);
  for (std::uint64_t id = 1; id <= 4; ++id) {
    Refused(id);
    Serve(id + 1);
    ASSERT_EQ(MustPick(a_), id + 1);
  }
  EXPECT_FALSE(PerCall());
  EXPECT_EQ(driver_.opened(), 5u);  // each refusal: a new connection
}

TEST_F(BalancingTest, APodAmongOthersIsNotLearnedPerCall) {
  // Pods: a refused stream moves to another endpoint, and the replacement
  // to the refusing pod takes no pick, so it is never refused anything.
  ConnectionPoolOptions o;
  o.addresses = {"10.0.0.1:1", "10.0.0.2:1"};
  Make(std::move(o));
  Serve(1);
  Serve(2);
  ASSERT_EQ(MustPick(a_), 1u);
  Refused(1);
  ASSERT_EQ(driver_.opened(), 3u);  // the replacement, to 10.0.0.1
  Serve(3);
  for (int i = 0; i < 4; ++i) {
    const std::uint64_t id = MustPick(a_);
    EXPECT_EQ(id, 2u) << i;
    core_->Release(id, a_);
  }
  for (const EndpointStats& e : core_->Endpoints()) EXPECT_FALSE(e.per_call);
}

}  // namespace
}  // namespace pool_test
}  // namespace tether
