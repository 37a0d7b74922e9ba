// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Observers that tell two others, in order: the simulation's own (which
// traces and checks) and an app's (the `LoggingObserver`).
#ifndef TETHER_TEST_SIM_TEE_OBSERVERS_H_
#define TETHER_TEST_SIM_TEE_OBSERVERS_H_

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tether/connection_pool.h"
#include "tether/observer.h"

namespace tether {
namespace sim {

class StreamTee final : public StreamObserver {
 public:
  StreamTee(std::shared_ptr<StreamObserver> first,
            std::shared_ptr<StreamObserver> second)
      : a_(std::move(first)), b_(std::move(second)) {}

  void OnAttemptStarted(const AttemptInfo& i) override {
    a_->OnAttemptStarted(i);
    b_->OnAttemptStarted(i);
  }
  void OnFirstMessage(const AttemptInfo& i, absl::Duration d) override {
    a_->OnFirstMessage(i, d);
    b_->OnFirstMessage(i, d);
  }
  void OnAttemptEnded(const AttemptInfo& i, const absl::Status& s, EndClass c,
                      bool by_client) override {
    a_->OnAttemptEnded(i, s, c, by_client);
    b_->OnAttemptEnded(i, s, c, by_client);
  }
  void OnDuplicateDropped(std::uint64_t seq, std::uint64_t last) override {
    a_->OnDuplicateDropped(seq, last);
    b_->OnDuplicateDropped(seq, last);
  }
  void OnGap(std::uint64_t expected, std::uint64_t got) override {
    a_->OnGap(expected, got);
    b_->OnGap(expected, got);
  }
  void OnBackoff(absl::Duration d, const absl::Status& s) override {
    a_->OnBackoff(d, s);
    b_->OnBackoff(d, s);
  }
  void OnRetryBudgetWait(absl::Duration added) override {
    a_->OnRetryBudgetWait(added);
    b_->OnRetryBudgetWait(added);
  }
  void OnGaveUp(const absl::Status& s) override {
    a_->OnGaveUp(s);
    b_->OnGaveUp(s);
  }
  void OnStalled(const AttemptInfo& i, absl::Duration silent) override {
    a_->OnStalled(i, silent);
    b_->OnStalled(i, silent);
  }
  void OnResync(const absl::Status& why, std::uint64_t after) override {
    a_->OnResync(why, after);
    b_->OnResync(why, after);
  }
  void OnConnectionDraining(std::uint64_t id, absl::string_view why) override {
    a_->OnConnectionDraining(id, why);
    b_->OnConnectionDraining(id, why);
  }
  void OnDrainNotice(const AttemptInfo& i) override {
    a_->OnDrainNotice(i);
    b_->OnDrainNotice(i);
  }
  void OnMessageDelivered() override {
    a_->OnMessageDelivered();
    b_->OnMessageDelivered();
  }
  void OnStreamEnded(const absl::Status& s, StreamEnd how) override {
    a_->OnStreamEnded(s, how);
    b_->OnStreamEnded(s, how);
  }
  void OnOutboxChanged(std::int64_t delta) override {
    a_->OnOutboxChanged(delta);
    b_->OnOutboxChanged(delta);
  }
  void OnWriteRefused() override {
    a_->OnWriteRefused();
    b_->OnWriteRefused();
  }

 private:
  const std::shared_ptr<StreamObserver> a_;
  const std::shared_ptr<StreamObserver> b_;
};

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
