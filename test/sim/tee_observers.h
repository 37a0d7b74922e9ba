// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// A pool observer that tells two others, in order: the simulation's own
// (which traces and checks) and an app's (the `LoggingObserver`). Streams
// use `CombineObservers`; the pool needs this one because the app may let
// its observer go while the pool still runs.
#ifndef TETHER_TEST_SIM_TEE_OBSERVERS_H_
#define TETHER_TEST_SIM_TEE_OBSERVERS_H_

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tether/connection_pool.h"
#include "tether/observer.h"

namespace tether {
namespace sim {

// The second may be let go while the pool still runs (`DropSecond`): the
// app releasing its observer. Single-threaded, as the simulation is.
class ConnectionTee final : public ConnectionObserver {
 public:
  ConnectionTee(std::shared_ptr<ConnectionObserver> first,
                std::shared_ptr<ConnectionObserver> second)
      : a_(std::move(first)), b_(std::move(second)) {}

  void DropSecond() { b_ = std::make_shared<ConnectionObserver>(); }

  void OnConnectionOpened(std::uint64_t id, absl::string_view to) override {
    a_->OnConnectionOpened(id, to);
    b_->OnConnectionOpened(id, to);
  }
  void OnConnectionReady(std::uint64_t id) override {
    a_->OnConnectionReady(id);
    b_->OnConnectionReady(id);
  }
  void OnConnectionDraining(std::uint64_t id, absl::string_view why) override {
    a_->OnConnectionDraining(id, why);
    b_->OnConnectionDraining(id, why);
  }
  void OnConnectionSuspect(std::uint64_t id, const absl::Status& s) override {
    a_->OnConnectionSuspect(id, s);
    b_->OnConnectionSuspect(id, s);
  }
  void OnConnectionRestored(std::uint64_t id) override {
    a_->OnConnectionRestored(id);
    b_->OnConnectionRestored(id);
  }
  void OnConnectionRetired(std::uint64_t id) override {
    a_->OnConnectionRetired(id);
    b_->OnConnectionRetired(id);
  }
  void OnEndpointAdded(absl::string_view address) override {
    a_->OnEndpointAdded(address);
    b_->OnEndpointAdded(address);
  }
  void OnEndpointMissing(absl::string_view address) override {
    a_->OnEndpointMissing(address);
    b_->OnEndpointMissing(address);
  }
  void OnEndpointRemoved(absl::string_view address,
                         absl::string_view why) override {
    a_->OnEndpointRemoved(address, why);
    b_->OnEndpointRemoved(address, why);
  }
  void OnEndpointsError(const absl::Status& s) override {
    a_->OnEndpointsError(s);
    b_->OnEndpointsError(s);
  }
  void OnEndpointBalancesCalls(absl::string_view address,
                               absl::string_view why) override {
    a_->OnEndpointBalancesCalls(address, why);
    b_->OnEndpointBalancesCalls(address, why);
  }

 private:
  const std::shared_ptr<ConnectionObserver> a_;
  std::shared_ptr<ConnectionObserver> b_;
};

}  // namespace sim
}  // namespace tether

#endif  // TETHER_TEST_SIM_TEE_OBSERVERS_H_
