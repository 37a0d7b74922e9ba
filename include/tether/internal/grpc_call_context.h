// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: what every gRPC adapter of tether (stream reactors, unary
// calls) needs around a call: its status and trailers in tether's terms,
// the per-attempt context hook, and releasing a call's last references off
// gRPC's threads.
#ifndef TETHER_INTERNAL_GRPC_CALL_CONTEXT_H_
#define TETHER_INTERNAL_GRPC_CALL_CONTEXT_H_

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "tether/function.h"
#include "tether/transport.h"

namespace tether {
namespace internal {

// The status with its error details (`grpc-status-details-bin`) as the
// payload `kStatusDetailsPayloadUrl`. (Compiled in the library, as is
// everything here that does not depend on a message type: compile time.)
absl::Status ToAbslStatus(const grpc::Status& s);

// A call's trailing metadata, copied out of gRPC's buffers.
Metadata TrailersOf(const grpc::ClientContext& context);

// Sets up one attempt's context: the user's per-attempt hook.
using ConfigureAttemptFn =
    Function<void(grpc::ClientContext&, const AttemptInfo&)>;

// The empty one (a spec without `configure_attempt`).
const ConfigureAttemptFn& NoConfigureAttempt();

// Drops `ref` on a thread tether owns (one per process, started on first
// use), never on the caller's. gRPC 1.51 tears down its shared callback
// queue when the last channel or server using it is released; if that happens
// on one of the queue's own threads, the thread joins itself and the queue is
// freed under it. A call's `OnDone` runs on such a thread and may hold the
// last reference to its context (and so its channel), its stream, and through
// the stream the pool, so it hands them here instead.
void ReleaseOffGrpcThread(std::shared_ptr<void> ref);

// Calls `context->TryCancel()` on the same thread as `ReleaseOffGrpcThread`,
// then drops `owner` (which keeps `context` alive) there. A cancel does the
// transport's work inline (a RST_STREAM, often its write); a stream that
// retires the attempt it moved off does so from the callback that delivered
// its replacement's first message, on one of gRPC's few callback threads,
// which the other streams moving at the same time are waiting for.
void CancelOffGrpcThread(std::shared_ptr<void> owner,
                         grpc::ClientContext* context);

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_GRPC_CALL_CONTEXT_H_
