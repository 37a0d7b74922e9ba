// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/bidi_parts.h"

#include <cstddef>
#include <utility>
#include <vector>

namespace tether {
namespace internal {

void* BidiOpen::NewCopy(const BidiOpen& open) { return new BidiOpen(open); }

void BidiOpen::Delete(void* open) { delete static_cast<BidiOpen*>(open); }

BidiOpen::BidiOpen() = default;
BidiOpen::BidiOpen(const BidiOpen&) = default;
BidiOpen::~BidiOpen() = default;

void BidiOpen::SetOpens(void* first, std::size_t count, std::size_t size,
                        BidiOutbox::Message (*share)(void* request)) {
  opens.clear();
  opens.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    opens.push_back(share(static_cast<unsigned char*>(first) + i * size));
  }
}

std::shared_ptr<BidiOutbox> NewBidiOutbox(
    std::size_t max, BidiOutbox::AckFn acknowledges,
    std::shared_ptr<StreamObserver> observer) {
  return std::make_shared<BidiOutbox>(max, std::move(acknowledges),
                                      std::move(observer));
}

absl::StatusOr<std::shared_ptr<StreamCore>> StartBidiStream(
    const Target& target, SpecFacts& facts, std::shared_ptr<BidiOutbox> box,
    StreamParts* parts, ReconnectingStreamOptions& options,
    Function<void(const absl::Status&)> on_done) {
  std::unique_ptr<StreamParts> owned(parts);
  StreamHooks hooks;
  absl::Status s = TakeSpec(target, facts, *owned, options,
                            static_cast<bool>(on_done), hooks);
  if (!s.ok()) return s;
  hooks.resume = true;
  hooks.resume_always = true;
  hooks.resume_name = "open_requests";
  hooks.MutableRare().on_end_decided = [weak = std::weak_ptr<BidiOutbox>(box)] {
    if (auto b = weak.lock()) b->End();
  };
  if (box->acknowledged()) hooks.MutableRare().acks = box;
  absl::StatusOr<std::shared_ptr<StreamCore>> core =
      StreamCore::Create(target.source(), std::move(owned), std::move(hooks),
                         std::move(options), std::move(on_done));
  if (!core.ok()) return core.status();
  std::weak_ptr<StreamCore> weak_core = *core;
  box->SetCallout([weak_core](const std::function<void()>& f) {
    if (auto c = weak_core.lock()) c->Callout(f);
  });
  (*core)->StartFirst();
  return core;
}

}  // namespace internal
}  // namespace tether
