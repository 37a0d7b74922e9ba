// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The production `ConnectionDriver` of `tether::ConnectionPool`: one
// `grpc::Channel` per connection, connectivity watches and health `Watch`
// calls, all on one completion queue served by one thread.
#ifndef TETHER_SRC_CONNECTIONS_GRPC_CONNECTION_DRIVER_H_
#define TETHER_SRC_CONNECTIONS_GRPC_CONNECTION_DRIVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "connections/pool_core.h"
#include "grpcpp/alarm.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "tether/connection_pool.h"
#include "tether/internal/mutex.h"
#include "tether/internal/visibility.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

// Opens one `grpc::Channel` per connection (own subchannel, keepalive and
// reconnect backoff from the options), watches its connectivity state with
// `NotifyOnStateChange` and, with `health_check`, runs a
// `grpc.health.v1.Health/Watch` on it once READY. A watch that ends (a
// proxy's idle timeout, a server restarting its health service) is started
// again after the probe backoff while the connection is READY; one that ends
// UNIMPLEMENTED reports SERVING and is not restarted. Reports go to the
// `PoolCore` set by `SetCore`, from the watcher thread, with no driver lock
// held.
//
// Thread safety: `Open` and the links' methods may be called from any
// thread; the core calls `Open` under its own lock, and `Open` never calls
// the core. `Create`, `SetCore` and `Shutdown` are for the owning pool.
//
// Ownership: held by `std::shared_ptr`; the watcher thread and every link
// hold a reference too, so that the pool may be destroyed from a callback
// running on that thread, and a link may be closed after the pool is gone.
class GrpcConnectionDriver final
    : public ConnectionDriver,
      public std::enable_shared_from_this<GrpcConnectionDriver> {
 public:
  // Starts the watcher thread. Wire the core with `SetCore` before the core
  // opens any connection.
  static std::shared_ptr<GrpcConnectionDriver> Create(
      const ConnectionPoolOptions& options);

  ~GrpcConnectionDriver() override;

  void SetCore(std::weak_ptr<PoolCore> core) { core_ = std::move(core); }

  std::shared_ptr<Link> Open(std::uint64_t id,
                             const Endpoint& endpoint) override;

  // Stops watching and stops the thread: waits for it, unless called on the
  // thread itself (a callback dropping the pool), which then ends on its own
  // once the queue is drained. Every link must already be closed (the core's
  // Shutdown does that, which also cancels the health watches).
  void Shutdown();

 private:
  class GrpcLink;
  enum class OpKind {
    kWatch,
    kHealthStart,
    kHealthWrite,
    kHealthRead,
    kHealthFinish,
    kHealthRetry  // the backoff alarm before restarting a health watch
  };
  struct Op {
    std::shared_ptr<GrpcLink> link;
    OpKind kind;
  };

  explicit GrpcConnectionDriver(const ConnectionPoolOptions& options);

  // Health calls post more ops (Read, Finish) until they finish, so the
  // queue is shut down only once shutting down and none is left.
  void MaybeShutdownQueueLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (shutting_down_ && active_health_ == 0 && !queue_shut_down_) {
      queue_shut_down_ = true;
      cq_.Shutdown();
    }
  }
  void Loop();
  void OnWatch(const std::shared_ptr<GrpcLink>& link, bool ok);
  void OnHealth(const std::shared_ptr<GrpcLink>& link, OpKind kind, bool ok);
  void StartHealthLocked(const std::shared_ptr<GrpcLink>& link)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a watch ended: restart it after the backoff, unless closed.
  void ScheduleHealthRetryLocked(const std::shared_ptr<GrpcLink>& link)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The watch's call is over (its write and its end both came back): hands
  // the call to the caller to drop after the lock, and restarts the watch
  // after the backoff unless the server has no health service. Returns 1
  // when that counts as serving, else -1 (nothing to report).
  int EndHealthCallLocked(
      const std::shared_ptr<GrpcLink>& link,
      std::unique_ptr<grpc::GenericClientAsyncReaderWriter>& drop_call,
      std::unique_ptr<grpc::ClientContext>& drop_context)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ConnectionPoolOptions options_;
  const std::uint64_t nonce_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::weak_ptr<PoolCore> core_;
  grpc::CompletionQueue cq_;
  // Assigned once in Create (under mu_); then used only by Shutdown and the
  // destructor.
  std::thread thread_;

  Mutex mu_;  // guards the fields of every GrpcLink and those below
  // Set by Loop before its first callback.
  std::thread::id loop_thread_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool queue_shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // Health calls not yet finished, and health retry alarms not yet fired.
  int active_health_ ABSL_GUARDED_BY(mu_) = 0;
  absl::BitGen gen_ ABSL_GUARDED_BY(mu_);  // health retry jitter
};

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_CONNECTIONS_GRPC_CONNECTION_DRIVER_H_
