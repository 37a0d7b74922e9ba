// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "server/grpc_server_driver.h"

#include <chrono>
#include <utility>

namespace tether {
namespace internal {

GrpcServerDriver::GrpcServerDriver(grpc::Server* server,
                                   grpc::HealthCheckServiceInterface* health)
    : server_(server), health_(health) {}

GrpcServerDriver::~GrpcServerDriver() {
  if (!shutdown_thread_.joinable()) return;
  // The last reference may drop on the shutdown thread itself (its
  // `on_returned`), or while `Shutdown` waits for a handler that never
  // returns: neither can be joined.
  if (returned_->load() &&
      shutdown_thread_.get_id() != std::this_thread::get_id()) {
    shutdown_thread_.join();
  } else {
    shutdown_thread_.detach();
  }
}

void GrpcServerDriver::SetNotServing() {
  // Every service name, the server's ("") included; open Watches are told.
  if (health_ != nullptr) health_->SetServingStatus(false);
}

void GrpcServerDriver::StartShutdown(absl::Duration deadline,
                                     std::function<void()> on_returned) {
  grpc::Server* server = server_;
  std::shared_ptr<std::atomic<bool>> returned = returned_;
  // The deadline is on the system clock, which gRPC's deadlines use.
  const auto at =
      std::chrono::system_clock::now() +
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          absl::ToChronoNanoseconds(deadline));
  shutdown_thread_ =
      std::thread([server, at, returned, on_returned = std::move(on_returned)] {
        server->Shutdown(at);
        on_returned();
        returned->store(true);
      });
}

void GrpcServerDriver::EndHealthWatches() {
  // The default service's Shutdown keeps every status NOT_SERVING for good
  // and ends its open Watches (CANCELLED "not writing due to shutdown").
  if (health_ != nullptr) health_->Shutdown();
}

}  // namespace internal
}  // namespace tether
