// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Internal: the `ServerDriver` that acts on a real `grpc::Server`.
#ifndef TETHER_SRC_SERVER_GRPC_SERVER_DRIVER_H_
#define TETHER_SRC_SERVER_GRPC_SERVER_DRIVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "absl/time/time.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server.h"
#include "server/drain_sequencer.h"

#include "tether/internal/visibility.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

// Flips `health` (may be null: no health service) and runs
// `server->Shutdown(deadline)` on a thread of its own.
//
// Lifetime: `server` and `health` must outlive this driver. If `Shutdown`
// has not returned when the driver is destroyed (a handler never returns),
// its thread is detached, not joined: the server must then never be
// destroyed (see `DrainController`, "Lifetime").
class GrpcServerDriver final : public ServerDriver {
 public:
  GrpcServerDriver(grpc::Server* server,
                   grpc::HealthCheckServiceInterface* health);
  ~GrpcServerDriver() override;

  void SetNotServing() override;
  void StartShutdown(absl::Duration deadline,
                     std::function<void()> on_returned) override;
  void EndHealthWatches() override;

 private:
  grpc::Server* const server_;
  grpc::HealthCheckServiceInterface* const health_;
  std::thread shutdown_thread_;
  // Set by the shutdown thread just before it ends.
  std::shared_ptr<std::atomic<bool>> returned_ =
      std::make_shared<std::atomic<bool>>(false);
};

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_SERVER_GRPC_SERVER_DRIVER_H_
