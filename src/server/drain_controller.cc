// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/server/drain_controller.h"

#include <utility>

#include "absl/status/status.h"
#include "server/drain_sequencer.h"
#include "server/grpc_server_driver.h"

namespace tether {
namespace server {

absl::StatusOr<std::unique_ptr<DrainController>> DrainController::Create(
    grpc::Server* server, DrainOptions options) {
  if (server == nullptr) {
    return absl::InvalidArgumentError(
        "DrainController::Create: server must not be null");
  }
  absl::Status valid = ValidateDrainOptions(options);
  if (!valid.ok()) return valid;
  grpc::HealthCheckServiceInterface* health =
      options.health_service != nullptr ? options.health_service
                                        : server->GetHealthCheckService();
  auto driver = std::make_shared<internal::GrpcServerDriver>(server, health);
  return std::unique_ptr<DrainController>(new DrainController(
      internal::DrainSequencer::Create(std::move(options), std::move(driver))));
}

DrainController::DrainController(
    std::shared_ptr<internal::DrainSequencer> sequencer)
    : sequencer_(std::move(sequencer)) {}

DrainController::~DrainController() { sequencer_->Stop(); }

std::unique_ptr<DrainCall> DrainController::Register(DrainHooks hooks) {
  return sequencer_->Register(std::move(hooks));
}

bool DrainController::Begin() { return sequencer_->Begin(); }

bool DrainController::draining() const {
  return sequencer_->phase() != internal::DrainPhase::kServing;
}

DrainReport DrainController::Wait() {
  for (;;) {
    if (auto report = sequencer_->WaitFor(absl::Hours(1))) return *report;
  }
}

absl::optional<DrainReport> DrainController::WaitFor(absl::Duration timeout) {
  return sequencer_->WaitFor(timeout);
}

}  // namespace server
}  // namespace tether
