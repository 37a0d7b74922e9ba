// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include <memory>
#include <utility>

#include "tether/transport.h"

namespace tether {
namespace {

// Every pick is the one channel, as connection 1. Never drains.
class SingleChannel final : public ConnectionSource {
 public:
  explicit SingleChannel(std::shared_ptr<grpc::Channel> channel)
      : channel_(std::move(channel)) {}

  absl::StatusOr<ConnectionPick> Pick(
      std::weak_ptr<DrainListener> /*listener*/) override {
    ConnectionPick pick;
    pick.connection_id = 1;
    pick.channel = channel_;
    return pick;
  }
  void Release(std::uint64_t /*connection_id*/,
               const std::weak_ptr<DrainListener>& /*listener*/) override {}
  void ReportDrainEnd(std::uint64_t /*connection_id*/,
                      const absl::Status& /*status*/) override {}

 private:
  const std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace

std::shared_ptr<ConnectionSource> SingleChannelSource(
    std::shared_ptr<grpc::Channel> channel) {
  return std::make_shared<SingleChannel>(std::move(channel));
}

}  // namespace tether
