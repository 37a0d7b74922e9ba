// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The gRPC adapters' helpers that do not depend on a message type, compiled
// once here rather than in every translation unit that starts a stream.
#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "tether/classification.h"
#include "tether/internal/grpc_call_context.h"

namespace tether {
namespace internal {

absl::Status ToAbslStatus(const grpc::Status& s) {
  absl::Status out(static_cast<absl::StatusCode>(s.error_code()),
                   s.error_message());
  if (!out.ok() && !s.error_details().empty()) {
    out.SetPayload(kStatusDetailsPayloadUrl, absl::Cord(s.error_details()));
  }
  return out;
}

Metadata TrailersOf(const grpc::ClientContext& context) {
  Metadata out;
  for (const auto& kv : context.GetServerTrailingMetadata()) {
    out.emplace(std::string(kv.first.data(), kv.first.size()),
                std::string(kv.second.data(), kv.second.size()));
  }
  return out;
}

const ConfigureAttemptFn& NoConfigureAttempt() {
  static const auto* const none = new ConfigureAttemptFn();
  return *none;
}

}  // namespace internal
}  // namespace tether
