// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: a stream's random source (jitter, backoff draws).
#ifndef TETHER_INTERNAL_STREAM_RANDOM_H_
#define TETHER_INTERNAL_STREAM_RANDOM_H_

#include <cstdint>

#include "absl/time/time.h"

namespace tether {
namespace internal {

// A small uniform random bit generator (SplitMix64: 8 bytes of state, one
// per stream; a std::mt19937_64 is 2.5 KB). Good enough for jitter and
// backoff draws, not for anything secret. Usable as an
// `absl::BitGenRef`. A plain value: not thread-safe (the stream calls it
// under its lock).
class StreamRandom {
 public:
  using result_type = std::uint64_t;

  // The same seed gives the same draws.
  explicit StreamRandom(std::uint64_t seed) : state_(seed) {}

  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~result_type{0}; }

  result_type operator()() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // A duration drawn uniformly from [0, `bound`); zero for `bound` <= 0.
  // Out of line: keeps absl's distributions out of every user translation
  // unit.
  absl::Duration Below(absl::Duration bound);
  // A double drawn uniformly from [0, 1).
  double Unit();

 private:
  std::uint64_t state_;
};

// `seed`, or one drawn from the system's entropy when it is 0: the options'
// "random_seed 0 picks one", for streams, calls, pools and breakers alike.
std::uint64_t SeedOrEntropy(std::uint64_t seed);

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_STREAM_RANDOM_H_
