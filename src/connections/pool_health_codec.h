// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Hand-written protobuf wire format for the two grpc.health.v1 messages the
// pool needs, so tether generates no code for them:
//   message HealthCheckRequest  { string service = 1; }
//   message HealthCheckResponse { ServingStatus status = 1; }
#ifndef TETHER_SRC_CONNECTIONS_POOL_HEALTH_CODEC_H_
#define TETHER_SRC_CONNECTIONS_POOL_HEALTH_CODEC_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace tether {
namespace internal {

// HealthCheckResponse.ServingStatus values.
inline constexpr int kHealthUnknown = 0;
inline constexpr int kHealthServing = 1;
inline constexpr int kHealthNotServing = 2;
inline constexpr int kHealthServiceUnknown = 3;

inline void AppendVarint(std::uint64_t v, std::string& out) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Reads a varint at `pos`; false if truncated or longer than 10 bytes.
inline bool ReadVarint(absl::string_view in, std::size_t& pos,
                       std::uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && pos < in.size(); shift += 7) {
    const auto byte = static_cast<unsigned char>(in[pos++]);
    v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// A serialized HealthCheckRequest. An empty service encodes as no bytes.
inline std::string EncodeHealthCheckRequest(absl::string_view service) {
  std::string out;
  if (service.empty()) return out;
  out.push_back(0x0a);  // field 1, wire type 2 (length-delimited)
  AppendVarint(service.size(), out);
  out.append(service.data(), service.size());
  return out;
}

// The `status` of a serialized HealthCheckResponse (the last one wins, as
// protobuf parsing does); `kHealthUnknown` if absent; -1 if malformed.
inline int DecodeHealthCheckResponseStatus(absl::string_view in) {
  int status = kHealthUnknown;
  std::size_t pos = 0;
  while (pos < in.size()) {
    std::uint64_t key = 0;
    if (!ReadVarint(in, pos, key)) return -1;
    const std::uint64_t field = key >> 3;
    const int wire = static_cast<int>(key & 7);
    std::uint64_t v = 0;
    switch (wire) {
      case 0:  // varint
        if (!ReadVarint(in, pos, v)) return -1;
        if (field == 1) status = static_cast<int>(v);
        break;
      case 1:  // 64-bit
        if (in.size() - pos < 8) return -1;
        pos += 8;
        break;
      case 2:  // length-delimited
        if (!ReadVarint(in, pos, v) || v > in.size() - pos) return -1;
        pos += static_cast<std::size_t>(v);
        break;
      case 5:  // 32-bit
        if (in.size() - pos < 4) return -1;
        pos += 4;
        break;
      default:
        return -1;
    }
  }
  return status;
}

}  // namespace internal
}  // namespace tether

#endif  // TETHER_SRC_CONNECTIONS_POOL_HEALTH_CODEC_H_
