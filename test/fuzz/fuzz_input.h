// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The byte script of tether's fuzzers: a cursor over the input that never
// fails. Past the end every read returns 0, so any input is a valid script
// and a truncated input still runs (shorter).
#ifndef TETHER_TEST_FUZZ_FUZZ_INPUT_H_
#define TETHER_TEST_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>

namespace tether {
namespace fuzz {

class FuzzInput {
 public:
  FuzzInput(const std::uint8_t* data, std::size_t size)
      : data_(data), size_(size) {}

  // The next byte, or 0 past the end.
  std::uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  bool empty() const { return pos_ >= size_; }

 private:
  const std::uint8_t* const data_;
  const std::size_t size_;
  std::size_t pos_ = 0;
};

}  // namespace fuzz
}  // namespace tether

#endif  // TETHER_TEST_FUZZ_FUZZ_INPUT_H_
