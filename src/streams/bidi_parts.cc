// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/bidi_parts.h"

#include <utility>

namespace tether {
namespace internal {

void* BidiOpen::NewCopy(const BidiOpen& open) { return new BidiOpen(open); }

void BidiOpen::Delete(void* open) { delete static_cast<BidiOpen*>(open); }

std::shared_ptr<BidiOutbox> NewBidiOutbox(
    std::size_t max, BidiOutbox::AckFn acknowledges,
    std::shared_ptr<StreamObserver> observer) {
  return std::make_shared<BidiOutbox>(max, std::move(acknowledges),
                                      std::move(observer));
}

absl::StatusOr<std::shared_ptr<StreamCore>> CreateBidiCore(
    std::shared_ptr<ConnectionSource> source, std::shared_ptr<BidiOutbox> box,
    std::unique_ptr<StreamParts> parts, StreamHooks hooks,
    ReconnectingStreamOptions options,
    Function<void(const absl::Status&)> on_done) {
  hooks.resume = true;
  hooks.resume_always = true;
  hooks.resume_name = "open_requests";
  hooks.MutableRare().on_end_decided = [weak = std::weak_ptr<BidiOutbox>(box)] {
    if (auto b = weak.lock()) b->End();
  };
  if (box->acknowledged()) hooks.MutableRare().acks = box;
  absl::StatusOr<std::shared_ptr<StreamCore>> core =
      StreamCore::Create(std::move(source), std::move(parts), std::move(hooks),
                         std::move(options), std::move(on_done));
  if (!core.ok()) return core.status();
  std::weak_ptr<StreamCore> weak_core = *core;
  box->SetCallout([weak_core](const std::function<void()>& f) {
    if (auto c = weak_core.lock()) c->Callout(f);
  });
  return core;
}

}  // namespace internal
}  // namespace tether
