// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The non-template pieces of stream_core.h: the hooks, the attempt sink and
// the factory of the machine (src/streams/stream_machine.h).
#include "tether/internal/stream_core.h"

#include <memory>
#include <utility>

#include "streams/stream_machine.h"

namespace tether {
namespace internal {

StreamHooks::Rare::Rare() = default;
StreamHooks::Rare::~Rare() = default;
StreamHooks::StreamHooks() = default;
StreamHooks::~StreamHooks() = default;
StreamHooks::StreamHooks(StreamHooks&&) noexcept = default;
StreamHooks& StreamHooks::operator=(StreamHooks&&) noexcept = default;

AttemptSink::AttemptSink(std::shared_ptr<StreamCore> core,
                         std::shared_ptr<AttemptRecord> rec)
    : core_(std::move(core)), rec_(std::move(rec)) {}
AttemptSink::~AttemptSink() = default;
AttemptSink::AttemptSink(AttemptSink&&) noexcept = default;

bool AttemptSink::OnMessage(void* response) {
  return static_cast<StreamMachine*>(core_.get())->OnMessage(rec_, response);
}

void AttemptSink::OnEnd(const absl::Status& status, const Metadata& trailers) {
  static_cast<StreamMachine*>(core_.get())
      ->OnAttemptDone(rec_, status, trailers);
}

absl::StatusOr<std::shared_ptr<StreamCore>> StreamCore::Create(
    std::shared_ptr<ConnectionSource> source,
    std::unique_ptr<StreamParts> parts, StreamHooks hooks,
    ReconnectingStreamOptions options, DoneFn on_done) {
  return StreamMachine::Create(std::move(source), std::move(parts),
                               std::move(hooks), std::move(options),
                               std::move(on_done));
}

}  // namespace internal
}  // namespace tether
