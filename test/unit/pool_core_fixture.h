// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The pool core's test fixture: fake links and driver, a recording listener
// and observer, and `PoolCoreTest` (a core over the fake driver under a fake
// clock). Shared by the pool's unit test files.
#ifndef TETHER_TEST_UNIT_POOL_CORE_FIXTURE_H_
#define TETHER_TEST_UNIT_POOL_CORE_FIXTURE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "connections/pool_core.h"
#include "gtest/gtest.h"
#include "tether/connection_pool.h"
#include "tether/testing/fake_clock.h"
#include "tether/transport.h"

namespace tether {
namespace pool_test {

using internal::LinkState;
using internal::PoolCore;
using DrainListener = ConnectionSource::DrainListener;

class FakeLink final : public internal::Link {
 public:
  FakeLink(std::uint64_t id, std::string address)
      : id_(id), address_(std::move(address)) {}
  std::shared_ptr<grpc::Channel> channel() override { return nullptr; }
  void Close() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++closes_;
  }
  int closes() {
    std::lock_guard<std::mutex> lock(mu_);
    return closes_;
  }
  std::uint64_t id() const { return id_; }
  const std::string& address() const { return address_; }

 private:
  const std::uint64_t id_;
  const std::string address_;
  std::mutex mu_;
  int closes_ = 0;
};

class FakeDriver final : public internal::ConnectionDriver {
 public:
  std::shared_ptr<internal::Link> Open(std::uint64_t id,
                                       const Endpoint& endpoint) override {
    std::lock_guard<std::mutex> lock(mu_);
    authorities_[id] = endpoint.authority;
    links_.push_back(std::make_shared<FakeLink>(id, endpoint.address));
    return links_.back();
  }
  std::size_t opened() {
    std::lock_guard<std::mutex> lock(mu_);
    return links_.size();
  }
  std::string authority(std::uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return authorities_[id];
  }
  std::shared_ptr<FakeLink> link(std::uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& l : links_) {
      if (l->id() == id) return l;
    }
    return nullptr;
  }

 private:
  std::mutex mu_;
  std::vector<std::shared_ptr<FakeLink>> links_;
  std::map<std::uint64_t, std::string> authorities_;
};

// Records drain calls; optionally runs a hook inside the callback.
class Listener final : public DrainListener {
 public:
  void OnConnectionDraining(std::uint64_t id, absl::string_view why) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back(id);
      last_why_ = std::string(why);
    }
    if (hook_) hook_(id);
  }
  void OnConnectionAvailable() override {
    ++available;
    if (available_hook_) available_hook_();
  }
  std::vector<std::uint64_t> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  std::string last_why() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_why_;
  }
  std::function<void(std::uint64_t)> hook_;
  std::function<void()> available_hook_;
  std::atomic<int> available{0};

 private:
  std::mutex mu_;
  std::vector<std::uint64_t> calls_;
  std::string last_why_;
};

class RecordingObserver final : public ConnectionObserver {
 public:
  void OnConnectionOpened(std::uint64_t id, absl::string_view target) override {
    Add(absl::StrCat("opened ", id, " ", target));
  }
  void OnConnectionReady(std::uint64_t id) override {
    Add(absl::StrCat("ready ", id));
  }
  void OnConnectionDraining(std::uint64_t id, absl::string_view) override {
    Add(absl::StrCat("draining ", id));
  }
  void OnConnectionSuspect(std::uint64_t id, const absl::Status&) override {
    Add(absl::StrCat("suspect ", id));
  }
  void OnConnectionRetired(std::uint64_t id) override {
    Add(absl::StrCat("retired ", id));
  }
  void OnConnectionRestored(std::uint64_t id) override {
    Add(absl::StrCat("restored ", id));
  }
  // Endpoint events go to their own list, so that connection event lists
  // stay as they are.
  void OnEndpointAdded(absl::string_view a) override {
    AddEndpoint(absl::StrCat("added ", a));
  }
  void OnEndpointMissing(absl::string_view a) override {
    AddEndpoint(absl::StrCat("missing ", a));
  }
  void OnEndpointRemoved(absl::string_view a, absl::string_view) override {
    AddEndpoint(absl::StrCat("removed ", a));
  }
  void OnEndpointsError(const absl::Status& s) override {
    AddEndpoint(absl::StrCat("error ", s.message()));
  }
  std::vector<std::string> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  std::vector<std::string> endpoint_events() {
    std::lock_guard<std::mutex> lock(mu_);
    return endpoint_events_;
  }

 private:
  void Add(std::string e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
  }
  void AddEndpoint(std::string e) {
    std::lock_guard<std::mutex> lock(mu_);
    endpoint_events_.push_back(std::move(e));
  }
  std::mutex mu_;
  std::vector<std::string> events_;
  std::vector<std::string> endpoint_events_;
};

class PoolCoreTest : public ::testing::Test {
 protected:
  void Make(ConnectionPoolOptions o) {
    ASSERT_TRUE(Validate(o).ok()) << Validate(o);
    o.clock = clock_;
    o.observer = observer_;
    core_ = PoolCore::Create(o, &driver_);
    core_->Start();
  }
  void MakeTarget(int max_connections = 8) {
    ConnectionPoolOptions o;
    o.target = "svc.example:443";
    o.max_connections = max_connections;
    Make(std::move(o));
  }
  // Connection `id` is READY and stays usable long enough (>= the probe
  // backoff's max) to count as healthy: losing it is replaced at once.
  void Serve(std::uint64_t id) {
    core_->OnLinkState(id, LinkState::kReady);
    clock_->AdvanceBy(absl::Seconds(1));
  }
  std::uint64_t MustPick(const std::shared_ptr<Listener>& l) {
    auto pick = core_->Pick(l);
    EXPECT_TRUE(pick.ok()) << pick.status();
    return pick.ok() ? pick->connection_id : 0;
  }

 public:
  fakes::FakeClock* clock() { return clock_.get(); }
  FakeDriver* driver() { return &driver_; }

 protected:
  std::shared_ptr<fakes::FakeClock> clock_ =
      std::make_shared<fakes::FakeClock>();
  std::shared_ptr<RecordingObserver> observer_ =
      std::make_shared<RecordingObserver>();
  FakeDriver driver_;
  std::shared_ptr<PoolCore> core_;
};

}  // namespace pool_test
}  // namespace tether

#endif  // TETHER_TEST_UNIT_POOL_CORE_FIXTURE_H_
