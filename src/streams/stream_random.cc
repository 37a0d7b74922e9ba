// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/stream_random.h"

#include "absl/random/distributions.h"
#include "absl/random/random.h"

namespace tether {
namespace internal {

absl::Duration StreamRandom::Below(absl::Duration bound) {
  if (bound <= absl::ZeroDuration()) return absl::ZeroDuration();
  const absl::Duration d = bound * Unit();
  return d < bound ? d : absl::ZeroDuration();
}

double StreamRandom::Unit() {
  // 53 random bits: a double uniform in [0, 1).
  return static_cast<double>((*this)() >> 11) * 0x1.0p-53;
}

std::uint64_t SeedOrEntropy(std::uint64_t seed) {
  if (seed != 0) return seed;
  absl::BitGen entropy;
  return absl::Uniform<std::uint64_t>(entropy);
}

}  // namespace internal
}  // namespace tether
