// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: the one form of an option that is out of range.
#ifndef TETHER_SRC_POLICIES_OUT_OF_RANGE_H_
#define TETHER_SRC_POLICIES_OUT_OF_RANGE_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include "tether/internal/visibility.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

// INVALID_ARGUMENT "<options>.<field> must be <range>, got <value>".
inline absl::Status OutOfRange(absl::string_view options,
                               absl::string_view field, absl::string_view value,
                               absl::string_view range) {
  return absl::InvalidArgumentError(
      absl::StrCat(options, ".", field, " must be ", range, ", got ", value));
}

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_POLICIES_OUT_OF_RANGE_H_
