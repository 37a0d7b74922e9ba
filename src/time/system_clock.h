// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Internal: `SystemClock()` as the `std::shared_ptr<Clock>` that options
// hold when the user gave no clock. One pointer for the process (it owns
// nothing: the clock lives for ever), so a default clock costs an object
// nothing beyond the pointer, however many streams take it.
#ifndef TETHER_SRC_TIME_SYSTEM_CLOCK_H_
#define TETHER_SRC_TIME_SYSTEM_CLOCK_H_

#include <memory>

#include "tether/clock.h"
#include "tether/internal/visibility.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

const std::shared_ptr<Clock>& SharedSystemClock();

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_TIME_SYSTEM_CLOCK_H_
